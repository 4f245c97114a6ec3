"""Runs a hidden pytest suite against a Submission and records one outcome per test.

Runs in the trusted process: the suite computes references with torch and talks to the submission only
through the `student` fixture.  Students see each failure's message, never the test's source: failures are
reported from the exception message alone.

A grade is the outcome of every test the suite expects, or it is not a grade: a collected test that never
reported fails as "not run", and a run that was stopped (Ctrl-C, SIGTERM, pytest stopping the session, a
crash of the judge) raises JudgingInterrupted instead of returning outcomes.

The suite is imported and collected once per process (SuiteSession) and then run against one submission
after another, the way pytest's own loop runs its items: the last item of each run tears down every
fixture, the session-scoped `student` included, so no check ever sees another submission's values.  A
session that was stopped or crashed is closed and the next run starts from a fresh import.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest
from _pytest.config import ConftestImportFailure, _prepareconfig
from _pytest.pathlib import CouldNotResolvePathError, module_name_from_path, resolve_pkg_root_and_module_name

from autograder.model.interrupts import JudgingInterrupted, interruption
from autograder.judging.checks.caching import StoredReferences, stored_in
from autograder.judging.checks.failing import Later
from autograder.judging import hints
from autograder.judging.evidence import FIGURE_TYPES, Figure
from autograder.judging.suite_files import suite_sources
from autograder.model.code_version import engine_digest
from autograder.model.submission import NotRun, StudentError, Submission, SubmissionBroken

NOT_RUN = "not run: judging stopped before this check"
MAX_SESSIONS = 8  # distinct suite sets kept warm in one process; a grader uses one, the kit's tests a few

PYTEST_ARGS = [
    # only pytest's own plugins: whatever else is installed beside the kit (xdist, hypothesis, anyio...) would
    # be imported, its files assertion-rewritten and its hooks run at every check, half a second per start-up
    "--disable-plugin-autoload",
    "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:warnings",
    # each installs a process-wide hook (sys.unraisablehook, threading.excepthook, faulthandler) for as long
    # as the session lives, i.e. for the whole grading process, and the first two would report, as warnings
    # in one submission's checks, what went wrong anywhere in the process since the last check
    "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:faulthandler",
    # captures log records into reports the judge never reads, attaching a handler to every non-propagating
    # logger (torch has dozens) around every phase of every check: a tenth of a second per submission
    "-p", "no:logging",
    "--import-mode=importlib", "-q", "--no-header", "--tb=no", "-o", "addopts=", "-c", os.devnull]


@dataclass
class Outcome:
    module: str       # the suite file's stem, e.g. "test_layer_norm"
    name: str         # the test's name, with its parameters, e.g. "test_shapes[float64]"
    passed: bool
    message: str      # student-facing: what was compared and what went wrong
    forbidden: tuple[str, ...] = ()
    figure: Figure | None = None  # evidence a failing check attached (autograder.judging.checks.fail)
    hints: tuple[str, ...] = ()   # student-facing advice a failing check gave, each whole (checks.fail's hints)


Needed = Callable[[str, str, Sequence[Outcome]], bool]


class SuiteError(Exception):
    """The hidden suite itself is broken (does not collect): an instructor's problem, never a student's."""


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


def _figure(excinfo: Any) -> Figure | Later | None:
    """The evidence on a failure raised by the suites' `fail`: an attribute only trusted code sets, since
    nothing from the submission's process ever arrives as an exception object."""
    exc = excinfo.value
    figure = getattr(exc, "figure", None) if isinstance(exc, pytest.fail.Exception) else None
    return figure if isinstance(figure, (*FIGURE_TYPES, Later)) else None


def _hints(excinfo: Any) -> tuple[str, ...]:
    """The hints on a failure raised by the suites' `fail`, as a result keeps them (autograder.judging.hints):
    like the evidence, an attribute only trusted code sets."""
    exc = excinfo.value
    return hints.bounded(getattr(exc, "hints", ())) if isinstance(exc, pytest.fail.Exception) else ()


def _undrawn(exc: BaseException) -> str:
    if isinstance(exc, StudentError):
        return f"your code raised {exc.type_name} while computing its values"
    if isinstance(exc, NotRun):
        return exc.reason
    if isinstance(exc, SubmissionBroken):
        return str(exc)
    return "its values could not be computed"


_running: tuple[str, str] | None = None  # (part, check name) of the check running now: one at a time (_lock)


def running_check() -> tuple[str, str] | None:
    """(part, check name) of the check this process is running now, None between checks: for the kit's hooks
    that observe checks as they run (check-suite's error ratios), never for a verdict."""
    return _running


def part_name(module: str) -> str:
    """The kit's naming convention, when no rubric says otherwise: test_layer_norm.py checks part layer_norm."""
    return module.removeprefix("test_")


class _Collector:
    """The session's plugin: what collection found, and what the current run's checks reported."""

    def __init__(self) -> None:
        self.expected: dict[str, tuple[str, str]] = {}  # node id -> (module, name), in collection order
        self.collection_errors: list[str] = []
        self.items: list[pytest.Item] = []
        self.begin(None, {})

    def begin(self, submission: Submission | None, part_names: Mapping[str, str],
              needed: Needed | None = None) -> None:
        self.submission = submission
        self.part_names = part_names
        self.needed = needed
        self.outcomes: dict[str, Outcome] = {}  # node id -> outcome
        self.later: list[tuple[str, Later]] = []  # (node id, its evidence), drawn once every verdict is final
        self.started: set[str] = set()  # parts whose first test has begun
        self.current = ""               # the part being judged
        self.all_parts = {self.part(item) for item in self.items}

    def part(self, item: pytest.Item) -> str:
        module = item.path.stem
        return self.part_names.get(module) or part_name(module)

    def doing(self) -> str:
        where = f"while judging {self.current}" if self.current else "before any check ran"
        return f"{where} ({len(self.outcomes)} of {len(self.expected)} checks done)"

    @pytest.hookimpl(tryfirst=True)  # before any plugin deselects: a deselected test is expected all the same
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.expected = {item.nodeid: (item.path.stem, item.name) for item in items}
        self.items = list(items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        global _running
        outer, _running = _running, (self.part(item), item.name)
        try:
            return (yield)
        finally:
            _running = outer  # a suite run from inside a check hands that check back

    @pytest.hookimpl(tryfirst=True)  # before the test's fixtures compute anything on the submission
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        part = self.part(item)
        if part != self.current:
            self.current = part
            self.started.add(part)
            self.student().begin_part(part, len(self.all_parts - self.started) + 1)

    @pytest.hookimpl(tryfirst=True)  # instead of the test function, its fixtures set up and torn down as ever
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        if self.needed is None or self.needed(pyfuncitem.path.stem, pyfuncitem.name, list(self.outcomes.values())):
            return None
        return True  # not run: it passes

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            forbidden = tuple(sorted(self.student().take_forbidden()))
            passed = report.outcome == "passed"
            failure = None if passed else call.excinfo
            message = "" if failure is None else _message(failure)
            figure = None if failure is None else _figure(failure)
            advice = () if failure is None else _hints(failure)
            if report.outcome == "skipped":  # a skipped check would be a free point or a lost one: neither
                passed, message, figure, advice = False, "check was skipped", None, ()
            if isinstance(figure, Later):
                self.later.append((item.nodeid, figure))
                figure = None
            self.outcomes[item.nodeid] = Outcome(item.path.stem, item.name, passed, message, forbidden, figure,
                                                 advice)
        return report

    def draw_later(self, pictures: bool) -> None:
        """The evidence that asks the submission for more values, once every verdict is final: whatever
        happens while it is drawn (the code raises, its process dies, hangs or crosses a bound) costs the
        picture alone, which a line then replaces."""
        pending, self.later = self.later, []
        if not pending or not pictures:
            return
        self.student().verdicts_final()
        for node, later in pending:
            outcome = self.outcomes[node]
            try:
                figure = later.build()
            except (Exception, pytest.fail.Exception) as exc:
                outcome.message += f"\n(No picture for this check: {_undrawn(exc)}.)"
                continue
            if isinstance(figure, FIGURE_TYPES):
                outcome.figure = figure

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    def student(self) -> Submission:
        if self.submission is None:  # a check running outside run(): never judge it against anyone
            raise RuntimeError("no submission is being judged")
        return self.submission

    def results(self) -> list[Outcome]:
        return [self.outcomes.get(node) or Outcome(module, name, False, NOT_RUN)
                for node, (module, name) in self.expected.items()]


def _fixtures(collector: _Collector) -> types.ModuleType:
    """The `student` fixture, as a plugin module (pytest wants fixtures as plain functions).  Session-scoped,
    and torn down at the end of every run: each run asks the collector again."""
    plugin = types.ModuleType("autograder_student_fixture")

    @pytest.fixture(scope="session")
    def student() -> Submission:
        return collector.student()

    plugin.student = student
    return plugin


class _Discard(io.TextIOBase):
    """Where pytest's own terminal output goes: nowhere, for as long as the session lives."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


_DISCARD = _Discard()


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """pytest's capturing puts back, after every test, the sys.std* objects and file descriptors 0-2 that
    were in place when the session was created, not those of this run's caller; and a check may change the
    working directory.  Put back what the caller had, and send pytest's own output nowhere meanwhile."""
    objects = sys.stdin, sys.stdout, sys.stderr
    fds, cwd = {}, None
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):  # a daemon may run with some of them closed
            fds[fd] = os.dup(fd)
    with contextlib.suppress(OSError):
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    sys.stdout = _DISCARD
    try:
        yield
    finally:
        for fd, copy in fds.items():
            with contextlib.suppress(OSError):
                os.dup2(copy, fd)
            os.close(copy)
        sys.stdin, sys.stdout, sys.stderr = objects
        if cwd is not None:
            with contextlib.suppress(OSError):
                os.fchdir(cwd)
            os.close(cwd)


def _module_name(path: Path, root: Path) -> str:
    """The name pytest imports a suite file or helper module under (in its package; else relative to `root`)."""
    try:
        return resolve_pkg_root_and_module_name(path)[1]
    except CouldNotResolvePathError:
        return module_name_from_path(path, root)


def _digest(files: Sequence[Path]) -> str:
    """What the suite files and their helper modules hold, each by the name it is imported under (which is
    what a stored reference's name holds), never by where the checkout is: the references stored for one
    checkout are found in another of the same files (the Gradescope image's, shipped in its zip).  An edited
    helper is a different suite."""
    root = Path(files[0]).parent if files else Path()
    h = hashlib.sha256()
    for name, path in sorted((_module_name(p, root), p) for p in suite_sources(files)):
        h.update(name.encode() + b"\0")
        try:
            h.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError as exc:  # collecting will say what is wrong with it
            h.update(f"unreadable: {exc}".encode())
    return h.hexdigest()


def _forget_modules(files: Sequence[Path], root: Path) -> None:
    """pytest's importlib mode returns whatever module sys.modules holds under the name it gives a file (an
    earlier session's import of it, from before an edit; another suite's of the same name), and so does a
    suite's import of a helper beside it: a new session imports its suites and their helpers afresh."""
    for path in sorted(suite_sources(files)):
        sys.modules.pop(_module_name(path, root), None)


def stored_references(suite_files: Sequence[Path]) -> StoredReferences:
    """The references these suites stored in the grader's cache folder, keyed by what they depend on beyond
    their arguments (which `once` keys them by): the suites, the engine (and torch's version)."""
    return StoredReferences(f"{_digest([Path(os.path.abspath(f)) for f in suite_files])} {engine_digest().hex()}")


class SuiteSession:
    """A hidden suite imported and collected once, then run against any number of submissions in turn.

    The sequence is pytest's own (`_pytest.main.wrap_session` and `pytest_runtestloop`) cut in three:
    configure, start and collect (here); run every item, the last one with nextitem=None so that every
    fixture is torn down (`run`); finish and unconfigure (`close`).  A run that was stopped closes the
    session: the next one starts from a fresh import."""

    def __init__(self, suite_files: Sequence[Path]) -> None:
        self.files = [Path(os.path.abspath(f)) for f in suite_files]
        self.digest = _digest(self.files)
        self.references = stored_references(self.files)
        self.pid = os.getpid()
        self.busy = False
        self.closed = False
        self.collector = _Collector()
        self._started = False
        args = [str(f) for f in self.files] + PYTEST_ARGS + ["--rootdir", str(self.files[0].parent)]
        _forget_modules(self.files, self.files[0].parent)
        with _process_state_kept():
            try:
                self.config = _prepareconfig(args, plugins=[self.collector, _fixtures(self.collector)])
            except (pytest.UsageError, ConftestImportFailure) as exc:
                self.closed = True
                raise SuiteError(f"pytest exited with {pytest.ExitCode.USAGE_ERROR!r}: {exc}") from exc
            try:
                self.session = pytest.Session.from_config(self.config)
                self.session.exitstatus = pytest.ExitCode.OK
                self.config._do_configure()
                self.config.hook.pytest_sessionstart(session=self.session)
                self._started = True
                self.config.hook.pytest_collection(session=self.session)
                self._between_runs()
            except pytest.UsageError as exc:  # a suite file that does not exist
                self._discard()
                raise SuiteError(f"pytest exited with {pytest.ExitCode.USAGE_ERROR!r}: {exc}") from exc
            except BaseException as exc:  # a signal, or a crash of pytest or of the judge's plugin
                self._discard()
                raise interruption(exc, self.collector.doing()) from exc
        if self.collector.collection_errors or not self.session.items:
            self._discard()
            raise SuiteError("; ".join(self.collector.collection_errors)
                             or f"pytest exited with {pytest.ExitCode.NO_TESTS_COLLECTED!r}")
        # the rewriting import hook is needed to import the suites only; left in place it would rewrite every
        # test_*.py that the grading process imports later, for as long as the process lives
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "config", None) is not self.config]

    def run(self, submission: Submission, part_names: Mapping[str, str], pictures: bool = True,
            needed: Needed | None = None) -> list[Outcome]:
        """One outcome per collected test; JudgingInterrupted (and the session closed) when stopped.  Without
        `pictures`, evidence that would ask the submission for more values is not drawn."""
        if self.closed or self.busy:
            raise RuntimeError("this suite session is closed or already judging")
        session, collector = self.session, self.collector
        collector.begin(submission, part_names, needed)
        session.testsfailed = 0  # failures of this run only, as in a fresh session
        for item in session.items:
            item._report_sections.clear()  # what capturing attached to it in earlier runs
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.clear()  # every report of every run otherwise
        self.busy = True
        try:
            with _process_state_kept(), stored_in(self.references):
                try:
                    self.config.hook.pytest_runtestloop(session=session)
                finally:
                    self._between_runs()
                collector.draw_later(pictures)
            self.references.save()
            return collector.results()
        except session.Failed:  # a stop request (what --maxfail makes): the checks after it never ran
            self._discard()     # and a session cannot be told to go on after one
            return collector.results()
        except BaseException as exc:  # a signal, pytest.exit, a crash: whatever ran is no grade
            self._discard()
            raise interruption(exc, collector.doing()) from exc
        finally:
            self.busy = False
            collector.begin(None, {})

    def _between_runs(self) -> None:
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if capture is not None:  # stdin too, which pytest otherwise keeps captured until the session ends
            capture.suspend_global_capture(in_=True)

    def close(self) -> None:
        """Finish the session (tearing down whatever fixtures are still set up) and unconfigure pytest."""
        if self.closed:
            return
        self.closed = True
        with _process_state_kept():
            try:
                if self._started:
                    self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=self.session.exitstatus)
            finally:
                self.config._ensure_unconfigure()

    def _discard(self) -> None:
        """Close after a stop or a crash: what fails while closing adds nothing to what is being reported."""
        with contextlib.suppress(BaseException):
            self.close()


_sessions: dict[tuple[str, ...], SuiteSession] = {}  # by suite files, least recently used first
_lock = threading.RLock()  # pytest's capturing and hooks are process-wide: one run at a time


def _warm_session(suite_files: Sequence[Path]) -> SuiteSession:
    """This process's session for these suite files, collected anew when one of them changed."""
    key = tuple(os.path.abspath(f) for f in suite_files)
    session = _sessions.pop(key, None)
    if session is not None and session.pid != os.getpid():
        session = None  # inherited through fork: its capture files are shared with the parent; leave them be
    if session is not None and not session.busy and (session.closed or session.digest != _digest(session.files)):
        session._discard()
        session = None
    if session is None:
        session = SuiteSession(suite_files)
    _sessions[key] = session
    idle = [k for k, s in _sessions.items() if not s.busy]
    for old in idle[:max(0, len(_sessions) - MAX_SESSIONS)]:
        _sessions.pop(old)._discard()
    return session


def collect(suite_files: Sequence[Path]) -> None:
    """Import and collect these suites now (a warm process that will grade against them), not at the first run.
    Raises SuiteError when they do not collect."""
    with _lock:
        _warm_session(suite_files)


@atexit.register
def close_sessions() -> None:
    """Close every warm session of this process: at exit, or to start cold."""
    if not _lock.acquire(timeout=10):  # a thread still judging at exit: the process ends without closing
        return
    try:
        while _sessions:
            session = _sessions.pop(next(iter(_sessions)))
            if session.pid == os.getpid():
                session._discard()
    finally:
        _lock.release()


def run_suite(suite_files: list[Path], submission: Submission,
              part_names: Mapping[str, str] | None = None, pictures: bool = True,
              needed: Needed | None = None) -> list[Outcome]:
    """One outcome per collected test, in collection order.  `part_names` maps a suite file's stem to the
    rubric part it checks (what `Submission.begin_part` is told); by default, `part_name`.  `pictures`: draw
    the evidence that asks the submission for more values (never a verdict's business either way).  `needed`
    (suite stem, check name, the outcomes so far) -> whether the check can change anything: one that cannot
    is not run and passes (the rubric's own-parts checks, which carry no points, while everything before them
    passed).

    Raises JudgingInterrupted when the run was stopped, SuiteError when the suite does not collect."""
    try:
        with _lock:
            session = _warm_session(suite_files)
            if not session.busy:
                return session.run(submission, part_names or {}, pictures, needed)
            # run_suite from inside a check of another run of the same suite: a session of its own
            nested = SuiteSession(suite_files)
            try:
                return nested.run(submission, part_names or {}, pictures, needed)
            finally:
                nested.close()
    except (JudgingInterrupted, SuiteError):
        raise
    except (KeyboardInterrupt, Exception) as exc:  # a signal or a crash outside pytest's session
        raise interruption(exc, "before any check ran") from exc
