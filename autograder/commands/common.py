"""What grade and grade-all share: the assignment and limit flags, the rubric and sandbox they need before
anything is graded, and the one line of a run stopped by a signal."""
from __future__ import annotations

import argparse
import sys

from autograder.authoring.assignment import chosen_assignment
from autograder.commands import UsageError
from autograder.grading.rubric import Rubric, RubricError, load_rubric
from autograder.host.sandbox import SandboxMisplaced, isolation_refused
from autograder.model import limits
from autograder.model.interrupts import JudgingInterrupted, interruption


def add_assignment_and_limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--assignment", help="assignment to grade against (default: $AUTOGRADER_ASSIGNMENT, or "
                                             "the checkout's only assignment)")
    limits.add_flags(parser)


def rubric_of(args: argparse.Namespace) -> Rubric:
    try:
        return load_rubric(chosen_assignment(args.assignment))
    except RubricError as exc:
        raise UsageError(str(exc)) from None


def require_sandbox(args: argparse.Namespace) -> None:
    try:
        refused = None if args.allow_unisolated else isolation_refused()
    except SandboxMisplaced as exc:
        raise UsageError(str(exc)) from None
    if refused:
        raise UsageError(f"this machine allows no sandbox ({refused}); --allow-unisolated grades without one")


def stopped(exc: BaseException, consequence: str) -> int:
    """One line for a run stopped before its grade was complete; the exit status says why."""
    why = exc if isinstance(exc, JudgingInterrupted) else interruption(exc)
    print(f"python -m autograder: {why}; {consequence}", file=sys.stderr)
    return why.exit_code
