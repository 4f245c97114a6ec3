"""Determinism: the manifest's entries graded several times through `python -m autograder grade` under varied
hash seeds and thread counts, their results.json compared byte for byte."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import REPO_ROOT
from autograder.authoring.catalogue import Catalogue
from autograder.authoring.check_suite.grading import DEFAULT_WORKERS, CheckSuiteError, load_catalogue
from autograder.model.course import COURSE_ROOT_VARIABLE, course_root


def rerun_conditions(count: int) -> list[dict[str, str]]:
    """Environment changes for each rerun: the grader's hash seed and its torch / OpenMP thread count."""
    seeds = ["0", "1", "4242"]
    return [{"PYTHONHASHSEED": seeds[i] if i < len(seeds) else str(10_000 + 7 * i),
             "OMP_NUM_THREADS": str(1 + i % 2), "MKL_NUM_THREADS": str(1 + i % 2)} for i in range(count)]


def _cli_grade(job: tuple[str, int, Path, Path, dict[str, str], str]) -> str:
    """One `python -m autograder grade` run; an error line, or "" when it exited 0."""
    name, i, path, out, changes, assignment = job
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--assignment", assignment,
                           "-o", str(out)], cwd=REPO_ROOT,
                          # the caller's course: its own kit assignments are found from the checkout too
                          env={**os.environ, COURSE_ROOT_VARIABLE: str(course_root()), **changes},
                          capture_output=True, text=True, timeout=600)
    return "" if done.returncode == 0 else f"{name} run {i}: exit {done.returncode}: {done.stderr[-300:]}"


def determinism_entries(catalogue: Catalogue) -> tuple[str, ...]:
    """The entries the manifest names for reruns; none is an error, since reruns would check nothing."""
    if not catalogue.determinism:
        raise CheckSuiteError(f"{catalogue.assignment.relative(catalogue.assignment.manifest)} names no "
                              "[catalogue] determinism entries, so --reruns would check nothing")
    return catalogue.determinism


def determinism(assignment: str, reruns: int, *, workers: int = DEFAULT_WORKERS, folder: Path | None = None
                ) -> tuple[dict[str, bool], list[str]]:
    """Grade the named entries `reruns` times each through `python -m autograder grade` under
    `rerun_conditions`; ({entry: its results.json files are byte-identical and every run exited 0}, report
    lines)."""
    from concurrent.futures import ThreadPoolExecutor

    catalogue = load_catalogue(assignment)
    names = determinism_entries(catalogue)
    entries = [e for e in catalogue.entries() if e.name in names]
    own_folder = folder is None
    folder = Path(tempfile.mkdtemp(prefix="autograder-reruns-")) if folder is None else folder
    try:
        sources = {e.name: catalogue.write(e, folder / "sources") for e in entries}
        jobs = []
        for i, changes in enumerate(rerun_conditions(reruns)):
            run_dir = folder / f"run{i:02d}"
            run_dir.mkdir(parents=True, exist_ok=True)
            for name, source in sources.items():
                copy = run_dir / source.name  # the same file name every run: results.json names the submission
                shutil.copyfile(source, copy)
                jobs.append((name, i, copy, run_dir / f"{name}.json", changes, assignment))
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            errors = list(pool.map(_cli_grade, jobs))
        lines = [e for e in errors if e]
        same = {}
        for name in sources:
            mine = [(job, error) for job, error in zip(jobs, errors) if job[0] == name]
            outputs = [job[3] for job, _ in mine]
            digests = [hashlib.sha256(out.read_bytes()).hexdigest() if out.exists() else "missing" for out in outputs]
            first = json.loads(outputs[0].read_text()) if outputs[0].exists() else {"score": "?"}
            same[name] = len(set(digests)) == 1 and "missing" not in digests and not any(e for _, e in mine)
            lines.append(f"  {name:<34} score {first['score']}: {reruns} results.json "
                         + ("byte-identical" if same[name] else f"DIFFERENT ({len(set(digests))} distinct)"))
        conditions = rerun_conditions(reruns)
        seeds = sorted({c["PYTHONHASHSEED"] for c in conditions}, key=int)
        threads = sorted({c["OMP_NUM_THREADS"] for c in conditions})
        header = (f"determinism: {reruns} reruns through `python -m autograder grade` (PYTHONHASHSEED in "
                  f"{', '.join(seeds)}; grader process started with OMP/MKL threads {' and '.join(threads)}, pinned "
                  "to 1 while grading)")
        return same, [header, *lines]
    finally:
        if own_folder:
            shutil.rmtree(folder, ignore_errors=True)
