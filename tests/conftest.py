"""Shared helpers: sample submissions and running the real command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.samples import student_notebook, write_notebook

REPO = Path(__file__).resolve().parent.parent


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
    write_notebook(student_notebook(), folder / "correct.ipynb")
    write_notebook(student_notebook(solved=False), folder / "untouched.ipynb")
    return folder
