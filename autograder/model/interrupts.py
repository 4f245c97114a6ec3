"""How grading stops before it has a grade: Ctrl-C, SIGTERM, or the judge itself stopping.

Kept apart from autograder.judging.judge so that the command line can handle them without importing pytest and
torch first (it starts the zygote before those imports, so that both sides warm up at once).
"""
from __future__ import annotations

import signal
from typing import Any


class JudgingInterrupted(KeyboardInterrupt):
    """Judging stopped before every expected test had an outcome: there is no grade, and nothing may be
    recorded as one.  A KeyboardInterrupt, so that whatever handles Ctrl-C handles it (nbgrader removes the
    notebook it was autograding, so a rerun grades it) and no `except Exception` carries on as if one
    submission had merely failed."""

    def __init__(self, reason: str, exit_code: int = 1) -> None:
        super().__init__(reason, exit_code)  # both in args: it crosses from a worker process by pickling
        self.reason = reason
        self.exit_code = exit_code  # what the command line exits with: 128 + the signal's number, or 1

    def __str__(self) -> str:
        return self.reason


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so that pytest and every `finally` on the way
    (closing the sandbox, removing a half-written file) handle both alike."""


def raise_terminated(signum: int, frame: Any) -> None:
    """A SIGTERM handler: `signal.signal(signal.SIGTERM, raise_terminated)`."""
    raise Terminated()


def interruption(exc: BaseException, doing: str = "") -> JudgingInterrupted:
    """The JudgingInterrupted for `exc` (a signal's KeyboardInterrupt, or anything else that stopped the judge)."""
    if isinstance(exc, Terminated):
        return JudgingInterrupted(f"stopped by SIGTERM {doing}".strip(), 128 + signal.SIGTERM)
    import pytest  # here, so that importing this module stays cheap (the command line does first)

    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, pytest.Session.Interrupted):
        return JudgingInterrupted(f"stopped by SIGINT {doing}".strip(), 128 + signal.SIGINT)
    # pytest stopping the session (pytest.exit, a stop request) or a crash of the judge itself
    what = str(exc).split("\n", 1)[0][:300]
    return JudgingInterrupted(f"judging stopped {doing}".strip() + f" ({type(exc).__name__}{': ' * bool(what)}{what})")
