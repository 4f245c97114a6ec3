"""The suites' stored references (autograder/judging/checks/caching.py) of one assignment, computed once when a
platform's package is built, so that a grading container that starts afresh for every submission (Gradescope's)
reads them instead of computing them again on every submission's critical path.

    python -m autograder.platforms.stored_references ASSIGNMENT FOLDER TORCH_VERSION

runs the hidden suites in-process against the reference solution (solutions/ASSIGNMENT.py, the instructor's own
code: no sandbox) with the grader's cache folder pointed at FOLDER, as grading does (one torch thread).  What
it stores is keyed like any grading process's references (the suites by the names they are imported under, the
engine, torch's version), so a container of the same files and the same torch build finds it and any other
ignores it.  The references depend on the suites alone (`once` refuses a submission's values), so which solution
ran only decides which of them were computed: the reference solution passes every check, so it computes them all.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.model.course import COURSE_ROOT_VARIABLE, assignment_root

ENTRY_PREFIX = "references-"
RUN_SECONDS = 600


def computed(assignment: str, torch_version: str) -> tuple[dict[str, bytes], str]:
    """(entry name -> bytes, "") of the references `assignment`'s suites store when its reference solution is
    graded with torch `torch_version`; ({}, why) when they cannot be computed here."""
    root = assignment_root(assignment)  # the course's or the checkout's: its solutions/ import from there
    if not (root / "solutions" / f"{assignment}.py").is_file():
        return {}, f"no solutions/{assignment}.py in {root}"
    with tempfile.TemporaryDirectory(prefix="autograder-references-") as folder:
        # a process of its own: the suites set torch's thread count and leave their modules imported
        done = subprocess.run([sys.executable, "-m", __name__, assignment, folder, torch_version], cwd=root,
                              env={**os.environ, "AUTOGRADER_CACHE": folder, COURSE_ROOT_VARIABLE: str(root)},
                              stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=RUN_SECONDS)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            return {}, f"computing them failed: {last}"
        if why := done.stdout.strip():
            return {}, why
        return {p.name: p.read_bytes() for p in sorted(Path(folder).glob(f"{ENTRY_PREFIX}*.pt"))}, ""


def main(argv: list[str]) -> int:
    """The process `computed` starts: prints why nothing was stored, or nothing."""
    assignment, folder, torch_version = argv
    import importlib

    import torch

    from autograder.grading.rubric import load_rubric
    from autograder.judging import cache
    from autograder.judging.judge import run_suite
    from autograder.model.submission import ModuleSubmission

    if torch.__version__ != torch_version:  # another build's references are keyed apart: useless there
        print(f"this machine's torch is {torch.__version__}, not the image's {torch_version}")
        return 0
    if cache.folder() != Path(folder):
        raise SystemExit(f"AUTOGRADER_CACHE is not {folder}")
    torch.set_num_threads(1)  # as grading does (autograder/grading/grade.py): part of every reference's key
    rubric = load_rubric(assignment)
    run_suite(rubric.suite_files(), ModuleSubmission(importlib.import_module(f"solutions.{assignment}")),
              rubric.part_names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
