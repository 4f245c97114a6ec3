"""How a check fails: a student-facing message only, with its hints and the evidence the feedback draws, if
any."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, NoReturn, Sequence

import pytest

from autograder.judging import evidence
from autograder.judging.evidence import Figure
from autograder.protocol import clean_text


@dataclass(frozen=True)
class Later:
    """Evidence that needs more of the submission's values than the check asked for.  The judge draws it once
    every verdict of the submission is final (autograder.judging.judge), so that asking can never change one:
    a submission that crashes or hangs only at a picture's inputs loses the picture, not another check."""

    build: Callable[[], Figure | None]


def fail(message: str, figure: Figure | Later | None = None, *, hints: Sequence[str] = ()) -> NoReturn:
    """Fail the current test with a student-facing message only: no traceback (pytrace=False) and no chained
    exception context (a failure raised while a StudentError or torch error is being handled would otherwise
    be printed under "During handling of the above exception ...").  `figure`: the evidence the feedback
    draws (autograder.judging.evidence), computed here from what the submission returned, or `Later` when
    drawing it asks the submission for more.  `hints`: advice on the likely mistake, each a text of its own
    (not part of `message`): every report shows them after the message, the feedback page apart from it."""
    failure = pytest.fail.Exception(msg=message, pytrace=False)
    failure.__suppress_context__ = True
    failure.figure = figure
    failure.hints = tuple(hints)  # the judge keeps each once (autograder.judging.hints.bounded)
    raise failure


@contextlib.contextmanager
def evidence_on_failure(build: Callable[[], Figure | None]) -> Iterator[None]:
    """A failure inside the block that carries no evidence gets `build()`'s, drawn later (`Later`): it may ask
    the submission for more values."""
    try:
        yield
    except pytest.fail.Exception as failure:
        if getattr(failure, "figure", None) is None:
            failure.figure = Later(build)
        raise


def evidence_title(what: str) -> str:
    """A check's description as a picture's title: cleaned and cut to what evidence may hold."""
    return clean_text(what, evidence.MAX_TEXT)
