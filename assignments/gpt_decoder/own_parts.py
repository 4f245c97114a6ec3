"""What the own-parts checks of gpt_decoder share: a part built on others is judged on the student's own pieces
on every configuration where those pieces run.

A configuration where a piece (an earlier part's code) raises is that part's failure, not this one's: it is
skipped (`Unrunnable`).  The check fails with one "cannot be judged on your own parts" message, naming what
the pieces did, only when no configuration could be judged (`cannot_be_judged`); and, as before, it fails
instead of passing vacuously when the pieces run but are too degenerate to tell the right wiring from a wrong
one.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, NoReturn

import pytest

from autograder.judging import checks as C


class Unrunnable(Exception):
    """The student's pieces raised on this configuration; `reason` is the student-facing failure it gave."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def pieces() -> Iterator[None]:
    """Requests to the student's earlier parts: a failure there (the code raised, or returned what cannot be
    used) makes the configuration unrunnable instead of failing the check."""
    try:
        yield
    except pytest.fail.Exception as failure:
        raise Unrunnable(str(getattr(failure, "msg", failure))) from None


def cannot_be_judged(what: str, reason: str, fix: str) -> NoReturn:
    """Fail: no configuration of the check could be judged; `reason` is what the student's pieces did on the
    last one tried, as the student saw it (a forbidden operation says so there: autograder.judging.checks.calls)."""
    C.fail(f"{what} cannot be judged on your own parts, which could not be run on this check's inputs; {fix} first. "
           f"{reason}")
