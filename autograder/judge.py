"""Runs a hidden pytest suite against a Submission and records one outcome per test.

Runs in the trusted process: the suite computes references with torch and talks to the submission only
through the `student` fixture.  Students see each failure's message, never the test's source: failures are
reported from the exception message alone.
"""
from __future__ import annotations

import contextlib
import io
import os
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder.submission import StudentError, Submission, SubmissionBroken


@dataclass
class Outcome:
    module: str       # the suite file's stem, e.g. "test_layer_norm"
    name: str         # the test's name, with its parameters, e.g. "test_shapes[float64]"
    passed: bool
    message: str      # student-facing: what was compared and what went wrong
    forbidden: tuple[str, ...] = ()


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


class _Collector:
    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self.outcomes: list[Outcome] = []
        self.collection_errors: list[str] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        outcome = yield
        report = outcome.get_result()
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            forbidden = tuple(sorted(self.submission.take_forbidden()))
            passed = report.outcome == "passed"
            message = "" if passed or call.excinfo is None else _message(call.excinfo)
            if report.outcome == "skipped":  # a skipped check would be a free point or a lost one: neither
                passed, message = False, "check was skipped"
            self.outcomes.append(Outcome(Path(str(item.fspath)).stem, item.name, passed, message, forbidden))

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")


class SuiteError(Exception):
    """The hidden suite itself is broken (does not collect): an instructor's problem, never a student's."""


def _fixtures(submission: Submission) -> types.ModuleType:
    """The `student` fixture, as a plugin module (pytest wants fixtures as plain functions)."""
    plugin = types.ModuleType("autograder_student_fixture")

    @pytest.fixture(scope="session")
    def student() -> Submission:
        return submission

    plugin.student = student
    return plugin


def run_suite(suite_files: list[Path], submission: Submission) -> list[Outcome]:
    collector = _Collector(submission)
    args = [str(f) for f in suite_files] + [
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:warnings",
        "--import-mode=importlib", "-q", "--no-header", "--tb=no", "-o", "addopts=",
        "--rootdir", str(suite_files[0].parent), "-c", os.devnull]
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(args, plugins=[collector, _fixtures(submission)])
    if collector.collection_errors or code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR,
                                                 pytest.ExitCode.NO_TESTS_COLLECTED):
        raise SuiteError("; ".join(collector.collection_errors) or f"pytest exited with {code!r}")
    return collector.outcomes
