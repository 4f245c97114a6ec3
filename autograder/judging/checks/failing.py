"""How a check fails: a student-facing message only, with the evidence the feedback draws, if any."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, NoReturn

import pytest

from autograder.judging import evidence
from autograder.judging.evidence import Figure
from autograder.protocol import clean_text


def fail(message: str, figure: Figure | None = None) -> NoReturn:
    """Fail the current test with a student-facing message only: no traceback (pytrace=False) and no chained
    exception context (a failure raised while a StudentError or torch error is being handled would otherwise
    be printed under "During handling of the above exception ...").  `figure`: the evidence the feedback
    draws (autograder.judging.evidence), computed here from what the submission returned."""
    failure = pytest.fail.Exception(msg=message, pytrace=False)
    failure.__suppress_context__ = True
    failure.figure = figure
    raise failure


@contextlib.contextmanager
def evidence_on_failure(build: Callable[[], Figure | None]) -> Iterator[None]:
    """A failure inside the block that carries no evidence gets `build()`'s, which may ask the submission for
    more values.  Evidence is a courtesy: when building it fails in any way (the student's code raises, its
    process dies or runs out of time), the failure stands as it was."""
    try:
        yield
    except pytest.fail.Exception as failure:
        if getattr(failure, "figure", None) is None:
            with contextlib.suppress(Exception, pytest.fail.Exception):
                failure.figure = build()
        raise


def evidence_title(what: str) -> str:
    """A check's description as a picture's title: cleaned and cut to what evidence may hold."""
    return clean_text(what, evidence.MAX_TEXT)
