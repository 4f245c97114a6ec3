"""Shared helpers: sample submissions and running the real command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import REPO_ROOT as REPO
from autograder.authoring.samples import student_notebook, write_notebook

ASSIGNMENT = "transformer_block"  # the assignment the kit's own end-to-end tests grade
os.environ.setdefault("AUTOGRADER_ASSIGNMENT", ASSIGNMENT)
# one mistake, costing layer_norm only: the unbiased variance (divides by d - 1)
UNBIASED_VARIANCE = ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)")


def run_cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def grade(submission: Path, out_dir: Path, *flags: str) -> tuple[dict, float, subprocess.CompletedProcess]:
    """Grade through the CLI; returns results.json, wall seconds and the finished process."""
    out = out_dir / f"{submission.stem}.results.json"
    started = time.monotonic()
    done = run_cli("grade", submission, "-o", out, *flags)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), seconds, done


def part_scores(results: dict) -> dict[str, float]:
    return {name: p["score"] for name, p in results["extra_data"]["parts"].items()}


def full_marks(results: dict) -> dict[str, float]:
    return {name: p["max_score"] for name, p in results["extra_data"]["parts"].items()}


def processes_mentioning(token: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@pytest.fixture(scope="session")
def samples(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("samples")
    write_notebook(student_notebook("transformer_block"), folder / "correct.ipynb")
    write_notebook(student_notebook("transformer_block", solved=False), folder / "untouched.ipynb")
    return folder


def grade_class_both_ways(folder: Path, out: Path, course_root: Path, through_nbgrader: list[str],
                          flags: list[str] = (), nbgrader_flags: list[str] = ()
                          ) -> tuple[subprocess.CompletedProcess, dict[str, float]]:
    """Grades the notebooks in `folder` with `grade-all --jobs 2` while nbgrader autogrades the students in
    `through_nbgrader` (submitted from the same files) in a course of its own; returns the CLI's finished
    process and nbgrader's score per student.  Most hostile submissions spend their time waiting out a
    limit, so the two run side by side."""
    import csv
    from concurrent.futures import ThreadPoolExecutor

    from autograder.authoring.demo import Course

    course = Course(course_root, ASSIGNMENT)
    course.create()
    course.nbgrader("generate_assignment", ASSIGNMENT, "--force")
    for student in through_nbgrader:
        target = course.root / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        (target / f"{ASSIGNMENT}.ipynb").write_bytes((folder / f"{student}.ipynb").read_bytes())
        course.nbgrader("db", "student", "add", student)

    def nbgrader_scores() -> dict[str, float]:
        course.nbgrader("autograde", ASSIGNMENT, *nbgrader_flags)
        grades = course.root / "grades.csv"
        course.nbgrader("export", "--to", str(grades))
        with grades.open(newline="") as handle:
            return {r["student_id"]: float(r["score"]) for r in csv.DictReader(handle)}

    with ThreadPoolExecutor(1) as background:
        scores = background.submit(nbgrader_scores)
        done = run_cli("grade-all", folder, "-o", out, "--jobs", "2", *flags, timeout=1800)
        return done, scores.result()
