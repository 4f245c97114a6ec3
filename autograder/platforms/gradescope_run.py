"""One Gradescope submission, graded: what the autograder zip's run_autograder runs (autograder/platforms/
gradescope.py builds the zip).

    python -m autograder.platforms.gradescope_run --root /autograder --assignment NAME --visibility WHEN
        [--allow-unisolated] [--token-fd FD --results-fd FD]

Gradescope puts the student's files in ROOT/submission and reads ROOT/results/results.json.  The notebook graded
is the one named like the assignment, else the only notebook handed in.  Anything else (no notebook, several)
is a score of 0 whose output says what was found, and so is a notebook that is not a regular file
(autograder.host.intake: a symbolic link, which could name a file of the grader's such as a hidden suite); so is a machine that refuses the sandbox,
unless the zip was built with --allow-unisolated (the kit's policy: never grade without isolation unless told
to, and then say so in every result).  A run stopped by SIGTERM writes nothing, like `grade`; run_autograder
then writes a result that says so.

run_autograder runs it through gradescope_supervisor.py, which hands it the run's token on --token-fd and an open
file on --results-fd: results.json, token in extra_data, goes there rather than into ROOT/results, and the
supervisor keeps it only if the token is its own.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from autograder.grading.batch import grade_report
from autograder.model.limits import Limits
from autograder.host.sandbox import Zygote, isolation_refused
from autograder.model.interrupts import JudgingInterrupted, interruption, raise_terminated
from autograder.grading.rubric import Rubric, load_rubric
from autograder.protocol import one_line
from autograder.grading.results_json import VISIBILITIES, fenced, summary, write_json_atomic

LISTED_FILES = 10  # names a "not graded" message quotes from the submission
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38


def _shown(path: Path, folder: Path) -> str:
    """A submitted file's name as a message may quote it: the student chose it."""
    return one_line(path.relative_to(folder).as_posix(), 200)


def _listing(paths: list[Path], folder: Path) -> str:
    names = [_shown(p, folder) for p in paths[:LISTED_FILES]]
    more = len(paths) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def submitted_files(folder: Path) -> list[Path]:
    """Every file handed in, in a stable order; hidden folders (.ipynb_checkpoints, .git) are not looked in, and
    symbolic links to folders are not followed."""
    found = []
    for where, folders, files in os.walk(folder):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        found += [Path(where) / f for f in sorted(files) if not f.startswith(".")]
    return found


def choose_notebook(folder: Path, assignment: str) -> tuple[Path | None, str]:
    """(the notebook to grade, "") or (None, why none can be: what was handed in)."""
    files = submitted_files(folder)
    notebooks = [p for p in files if p.suffix == ".ipynb"]
    named = [p for p in notebooks if p.name == f"{assignment}.ipynb"]
    if len(named) > 1:
        return None, f"several notebooks are named {assignment}.ipynb ({_listing(named, folder)}); hand in one"
    chosen = named or notebooks
    if not chosen:
        held = f"it holds {_listing(files, folder)}" if files else "it is empty"
        return None, f"no notebook (.ipynb) was handed in: {held}. Hand in {assignment}.ipynb"
    if len(chosen) > 1:
        return None, (f"{len(chosen)} notebooks were handed in ({_listing(chosen, folder)}) and none is named "
                      f"{assignment}.ipynb; hand in that one only")
    return chosen[0], ""


def not_graded(rubric: Rubric, reason: str, seconds: float, visibility: str) -> dict[str, Any]:
    """results.json for a submission that was not graded: 0 points, and why."""
    return {"score": 0, "max_score": rubric.max_score, "execution_time": round(seconds, 2),
            "output": fenced(f"Not graded: {reason}"), "output_format": "md", "visibility": visibility,
            "stdout_visibility": "hidden", "tests": [],
            "extra_data": {"assignment": rubric.assignment, "not_graded": reason}}


def grade(notebook: Path, rubric: Rubric, limits: Limits, visibility: str, within: Path) -> dict[str, Any]:
    """Grades `notebook`, handed in to the folder `within`, in the sandbox; prints the summary (for the
    instructor's log) and returns results.json.  Raises JudgingInterrupted when stopped before the grade was
    complete."""
    Zygote.shared()  # the zygote imports torch while this process imports the judge
    result, report = grade_report(notebook, rubric, limits, visibility, within)
    print(summary(result))
    # Gradescope shows it; the kit's own results.json leaves it out, so that a regrade gives the same bytes
    return {**report, "execution_time": round(result.seconds, 2)}


def seal() -> None:
    """Before the submission's first line, which runs under this process's uid when graded without the sandbox.
    Non-dumpable: no process of that uid may open this one's descriptors (the results file) or read its memory
    (the run's token).  no_new_privs: nothing below it gains a privilege from a setuid program.  Not earlier: the
    isolation probe, forked from here, must still be able to write its own /proc/self/uid_map."""
    libc = ctypes.CDLL(None, use_errno=True)
    for option, value in ((PR_SET_DUMPABLE, 0), (PR_SET_NO_NEW_PRIVS, 1)):
        if libc.prctl(option, value, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def run(root: Path, assignment: str, visibility: str, allow_unisolated: bool, sealed: bool = False
        ) -> dict[str, Any]:
    """results.json for the submission in root/submission; `sealed`: `seal` this process before grading (the
    grader run_autograder started, not a test's own process)."""
    started = time.monotonic()
    rubric = load_rubric(assignment)
    notebook, problem = choose_notebook(root / "submission", rubric.assignment)
    refused = isolation_refused() if notebook else None
    if refused and not allow_unisolated:
        print(f"this machine allows no sandbox ({refused}); the zip was built without --allow-unisolated, so "
              "nothing is graded")
        problem = ("the grading machine allows no sandbox, and this autograder runs no submission without one. "
                   "Nothing of your notebook was run; your instructor can see why in the autograder log")
    if problem:
        print(f"Not graded: {problem}")
        return not_graded(rubric, problem, time.monotonic() - started, visibility)
    if refused:
        print(f"this machine allows no sandbox ({refused}): grading WITHOUT isolation, as --allow-unisolated asked")
    print(f"grading {notebook}")
    if sealed:
        seal()
    return grade(notebook, rubric, Limits(isolate=not refused), visibility, root / "submission")


def read_token(fd: int) -> str:
    """The token on `fd`, a pipe whose writer has already closed it."""
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read(1024).decode("ascii")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.platforms.gradescope_run", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("/autograder"),
                        help="Gradescope's folder, holding submission/ and results/ (default: /autograder)")
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--visibility", choices=VISIBILITIES, default="visible")
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="grade without the sandbox where this machine refuses one (every result says so)")
    parser.add_argument("--token-fd", type=int,
                        help="read this run's token from this descriptor, and put it in results.json's extra_data")
    parser.add_argument("--results-fd", type=int,
                        help="write results.json to this open file instead of ROOT/results/results.json")
    args = parser.parse_args(argv)
    token = read_token(args.token_fd) if args.token_fd is not None else None
    # SIGTERM (run_autograder's time limit) stops grading the way Ctrl-C does: the sandbox is closed, no grade
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        report = run(args.root, args.assignment, args.visibility, args.allow_unisolated,
                     sealed=args.results_fd is not None)
    except (JudgingInterrupted, KeyboardInterrupt) as exc:
        stopped = exc if isinstance(exc, JudgingInterrupted) else interruption(exc)
        print(f"{parser.prog}: {stopped}; no grade written", file=sys.stderr)
        return stopped.exit_code
    finally:
        signal.signal(signal.SIGTERM, previous)
    if token is not None:
        report["extra_data"]["run_token"] = token
    if args.results_fd is None:
        write_json_atomic(args.root / "results" / "results.json", report)
    else:
        with os.fdopen(args.results_fd, "w", encoding="utf-8") as out:
            json.dump(report, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
