"""Runs a hidden pytest suite against a Submission and records one outcome per test.

Runs in the trusted process: the suite computes references with torch and talks to the submission only
through the `student` fixture.  Students see each failure's message, never the test's source: failures are
reported from the exception message alone.

A grade is the outcome of every test the suite expects, or it is not a grade: a collected test that never
reported fails as "not run", and a run that was stopped (Ctrl-C, SIGTERM, pytest stopping the session, a
crash of the judge) raises JudgingInterrupted instead of returning outcomes.
"""
from __future__ import annotations

import contextlib
import io
import os
import signal
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pytest

from autograder.submission import StudentError, Submission, SubmissionBroken

NOT_RUN = "not run: judging stopped before this check"


@dataclass
class Outcome:
    module: str       # the suite file's stem, e.g. "test_layer_norm"
    name: str         # the test's name, with its parameters, e.g. "test_shapes[float64]"
    passed: bool
    message: str      # student-facing: what was compared and what went wrong
    forbidden: tuple[str, ...] = ()


class SuiteError(Exception):
    """The hidden suite itself is broken (does not collect): an instructor's problem, never a student's."""


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
    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, pytest.Session.Interrupted):
        return JudgingInterrupted(f"stopped by SIGINT {doing}".strip(), 128 + signal.SIGINT)
    # pytest stopping the session (pytest.exit, a stop request) or a crash of the judge itself
    what = str(exc).split("\n", 1)[0][:300]
    return JudgingInterrupted(f"judging stopped {doing}".strip() + f" ({type(exc).__name__}{': ' * bool(what)}{what})")


def _message(excinfo: Any) -> str:
    exc = excinfo.value
    if isinstance(exc, pytest.fail.Exception):
        return exc.msg
    if isinstance(exc, StudentError):
        return f"your code raised {exc.type_name}: {exc.message}".rstrip(": ")
    if isinstance(exc, SubmissionBroken):
        return f"could not be judged: {exc}"
    # a suite bug or an unexpected value: say what, not where (the traceback would show hidden source)
    first_line = str(exc).split("\n", 1)[0][:300]
    return f"check failed ({type(exc).__name__}{': ' + first_line if first_line else ''})"


def part_name(module: str) -> str:
    """The kit's naming convention, when no rubric says otherwise: test_layer_norm.py checks part layer_norm."""
    return module.removeprefix("test_")


class _Collector:
    def __init__(self, submission: Submission, part_names: Mapping[str, str]) -> None:
        self.submission = submission
        self.part_names = part_names
        self.expected: dict[str, tuple[str, str]] = {}  # node id -> (module, name), in collection order
        self.outcomes: dict[str, Outcome] = {}          # node id -> outcome
        self.collection_errors: list[str] = []
        self.started: set[str] = set()  # parts whose first test has begun
        self.current = ""               # the part being judged
        self.all_parts: set[str] = set()
        self.stopped_by: BaseException | None = None

    def part(self, item: pytest.Item) -> str:
        module = item.path.stem
        return self.part_names.get(module) or part_name(module)

    def doing(self) -> str:
        where = f"while judging {self.current}" if self.current else "before any check ran"
        return f"{where} ({len(self.outcomes)} of {len(self.expected)} checks done)"

    @pytest.hookimpl(tryfirst=True)  # before any plugin deselects: a deselected test is expected all the same
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.expected = {item.nodeid: (item.path.stem, item.name) for item in items}
        self.all_parts = {self.part(item) for item in items}

    @pytest.hookimpl(tryfirst=True)  # before the test's fixtures compute anything on the submission
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        part = self.part(item)
        if part != self.current:
            self.current = part
            self.started.add(part)
            self.submission.begin_part(part, len(self.all_parts - self.started) + 1)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            forbidden = tuple(sorted(self.submission.take_forbidden()))
            passed = report.outcome == "passed"
            message = "" if passed or call.excinfo is None else _message(call.excinfo)
            if report.outcome == "skipped":  # a skipped check would be a free point or a lost one: neither
                passed, message = False, "check was skipped"
            self.outcomes[item.nodeid] = Outcome(item.path.stem, item.name, passed, message, forbidden)
        return report

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:  # also pytest.exit()
        self.stopped_by = excinfo.value

    def pytest_internalerror(self, excinfo: Any) -> None:  # a hook crashed: the judge itself is broken
        self.stopped_by = excinfo.value

    def results(self) -> list[Outcome]:
        return [self.outcomes.get(node) or Outcome(module, name, False, NOT_RUN)
                for node, (module, name) in self.expected.items()]


def _fixtures(submission: Submission) -> types.ModuleType:
    """The `student` fixture, as a plugin module (pytest wants fixtures as plain functions)."""
    plugin = types.ModuleType("autograder_student_fixture")

    @pytest.fixture(scope="session")
    def student() -> Submission:
        return submission

    plugin.student = student
    return plugin


def run_suite(suite_files: list[Path], submission: Submission,
              part_names: Mapping[str, str] | None = None) -> list[Outcome]:
    """One outcome per collected test, in collection order.  `part_names` maps a suite file's stem to the
    rubric part it checks (what `Submission.begin_part` is told); by default, `part_name`.

    Raises JudgingInterrupted when the run was stopped, SuiteError when the suite does not collect."""
    collector = _Collector(submission, part_names or {})
    args = [str(f) for f in suite_files] + [
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:warnings",
        "--import-mode=importlib", "-q", "--no-header", "--tb=no", "-o", "addopts=",
        "--rootdir", str(suite_files[0].parent), "-c", os.devnull]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = pytest.main(args, plugins=[collector, _fixtures(submission)])
    except (KeyboardInterrupt, Exception) as exc:  # a signal or a crash outside pytest's session
        raise interruption(exc, collector.doing()) from exc
    # first: pytest stops the session on a collection error the way it stops on Ctrl-C
    if collector.collection_errors or code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise SuiteError("; ".join(collector.collection_errors) or f"pytest exited with {code!r}")
    if collector.stopped_by is not None:
        raise interruption(collector.stopped_by, collector.doing()) from collector.stopped_by
    if code in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        raise JudgingInterrupted(f"pytest stopped ({code.name}) {collector.doing()}")
    return collector.results()
