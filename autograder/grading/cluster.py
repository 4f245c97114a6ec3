"""grade-all on a Dask cluster: `python -m autograder grade-all DIR -o OUT --scheduler ADDRESS`.

The client (the instructor's machine) reads each submission and sends its bytes with the task, so workers need
no shared file system.  A worker grades with its own checkout of the kit, after checking that its copy of the
assignment is the client's (autograder.grading.fingerprint): a class is never graded with two different suites.
Results come back to the client, which alone writes them, atomically, the moment each arrives, exactly as a
local grade-all does: a rerun resumes, and a task that Dask ran twice (its worker died after finishing) is
still recorded once.

Workers should run one thread each (`dask worker ADDRESS --nthreads 1 --nworkers N`): grading in a process is
one at a time anyway (see _grading), and the process's warm state (its zygote, its pytest) is reused across
tasks.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from autograder.grading import batch
from autograder.grading.batch import Entry, finish, pending_entries, progress, record, stderr_log
from autograder.host.intake import UnreadableSubmission, read_submission
from autograder.model.interrupts import JudgingInterrupted
from autograder.grading.rubric import Rubric
from autograder.model.limits import Limits

CONNECT_SECONDS = 5  # a scheduler that does not answer within this is reported as absent


class ClusterUnusable(Exception):
    """The cluster cannot grade this class as asked (no scheduler, a worker with another assignment, a worker
    that cannot isolate): nothing is wrong with any submission, so the command line exits 2."""


class WorkerRefused(Exception):
    """Raised in a task: this worker will not grade for this client."""


class GradingStopped(Exception):
    """A worker's JudgingInterrupted, carried as an ordinary exception: a KeyboardInterrupt raised in a task
    shuts the whole Dask worker down (distributed re-raises it to stop the event loop)."""


# one grading at a time per worker process, whatever its --nthreads: the process's pytest and zygote serve
# one submission at a time
_grading = threading.Lock()


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # called outside a worker (the tests, a debugger)
        return socket.gethostname()


def _check_worker(assignment: str, limits: Limits, fingerprint: str) -> Rubric:
    """This worker's rubric for `assignment`, if its copy is the client's and it can grade as asked."""
    from autograder.grading.fingerprint import assignment_fingerprint
    from autograder.grading.rubric import RubricError, load_rubric
    from autograder.host.sandbox import isolation_refused

    try:
        rubric = load_rubric(assignment)
    except RubricError as exc:
        raise WorkerRefused(f"worker {_worker_name()} cannot grade {assignment!r}: {exc}") from None
    if assignment_fingerprint(rubric, limits) != fingerprint:
        # the fingerprint covers the engine's code as the worker first read it, so a worker started before its
        # checkout was updated is refused too
        raise WorkerRefused(f"worker {_worker_name()} has a different copy of the kit or of assignment "
                            f"{assignment!r} (engine, rubric or hidden suites) than the client: update its "
                            "checkout and restart it")
    if limits.isolate and (refused := isolation_refused()):
        raise WorkerRefused(f"worker {_worker_name()} allows no sandbox ({refused})")
    return rubric


def grade_submission(student: str, file_name: str, data: bytes | str, assignment: str, limits: Limits,
                     fingerprint: str) -> dict[str, Any]:
    """The task, run on a worker: the results.json of one submission, given as its file's name and bytes, or
    as why the client would not read it (autograder.host.intake): it is then graded as unreadable."""
    name = Path(file_name).name
    if name in ("", ".", ".."):
        raise ValueError(f"{student}: {file_name!r} is not a file name")
    with _grading:
        rubric = _check_worker(assignment, limits, fingerprint)
        # the original name, so that the result names the file the student handed in
        with tempfile.TemporaryDirectory(prefix="autograder-submission-") as folder:
            path = Path(folder) / name
            if isinstance(data, bytes):
                path.write_bytes(data)
            refused = "" if isinstance(data, bytes) else str(data) or "the file could not be read"
            try:  # exactly what a local grade-all records
                return batch.grade_report(path, rubric, limits, refused=refused)[1]
            except JudgingInterrupted as exc:
                raise GradingStopped(f"{student}: {exc} on worker {_worker_name()}") from None


def _connect(address: str) -> Any:
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except Exception as exc:  # OSError when nothing answers, ValueError or TypeError for a malformed address
        detail = str(exc).split("\n", 1)[0][:200]
        raise ClusterUnusable(f"no Dask scheduler reachable at {address} ({detail})") from None


def _read(entry: Entry) -> bytes | str:
    try:
        return read_submission(entry.path, entry.root)
    except UnreadableSubmission as exc:
        return str(exc)


def grade_all(folder: Path, out_dir: Path, rubric: Rubric, limits: Limits, scheduler: str,
              log: Callable[[str], None] = stderr_log, duplicates: str = "refuse",
              only: list[str] | None = None) -> list[Entry]:
    """Like autograder.grading.batch.grade_all, on the cluster at `scheduler`, which is contacted only when something
    is left to grade.  Raises ClusterUnusable (exit 2), or JudgingInterrupted / KeyboardInterrupt when
    stopped; every result recorded so far stays.  Raises DuplicateSubmissions or UnknownStudents before
    contacting it."""
    entries, pending = pending_entries(folder, out_dir, rubric, limits, log, duplicates, only)
    if pending:
        _grade_on_cluster(pending, out_dir, rubric, limits, scheduler, log)
    finish(out_dir, entries, rubric, log)
    return entries


def _grade_on_cluster(pending: list[Entry], out_dir: Path, rubric: Rubric, limits: Limits, scheduler: str,
                      log: Callable[[str], None]) -> None:
    with _quiet_distributed():
        client = _connect(scheduler)
        try:
            _run(client, pending, out_dir, rubric, limits, scheduler, log)
        finally:
            _close(client)


def _run(client: Any, pending: list[Entry], out_dir: Path, rubric: Rubric, limits: Limits, scheduler: str,
         log: Callable[[str], None]) -> None:
    import dask
    from distributed import as_completed

    from autograder.grading.fingerprint import assignment_fingerprint

    futures: dict[Any, Entry] = {}
    try:
        if not client.scheduler_info().get("workers"):
            log(f"no worker at {scheduler} yet: waiting for one (Ctrl-C stops)")
        fingerprint = assignment_fingerprint(rubric, limits)
        # a submission may be up to 20 MB (intake.MAX_SUBMISSION_BYTES): no warning for sending one
        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1GB"}):
            for entry in pending:
                # pure=False: a key of its own, never shared with another task or another run; retries=0: Dask
                # reschedules a task whose worker died by itself, but one that raised is the client's to judge
                future = client.submit(grade_submission, entry.student, entry.path.name, _read(entry),
                                       rubric.assignment, limits, fingerprint, pure=False, retries=0)
                futures[future] = entry
        recorded: set[str] = set()  # written once, however often Dask ran or reported a task
        with progress(len(pending), log) as graded:
            for future in as_completed(list(futures), loop=client.loop):
                entry = futures[future]
                if entry.student in recorded:
                    continue
                data = _result(future, entry)
                record(out_dir, entry, data)
                recorded.add(entry.student)
                graded(f"{entry.student}: {data['score']:g} / {data['max_score']:g}")
    except BaseException:
        # a signal, a refused or failed task: nothing more is recorded, and no worker starts another of ours
        # (a task already running finishes on its worker, and its result is dropped)
        client.cancel(list(futures), force=True)
        raise


def _result(future: Any, entry: Entry) -> dict[str, Any]:
    try:
        return future.result()
    except WorkerRefused as exc:
        raise ClusterUnusable(str(exc)) from None
    except GradingStopped as exc:  # no grade for it; the whole batch stops, as a local grade-all does
        raise JudgingInterrupted(str(exc)) from None
    except Exception as exc:  # KilledWorker (it took down several workers), an error in the kit on a worker
        detail = str(exc).split("\n", 1)[0][:300]
        raise JudgingInterrupted(f"{entry.student}: grading failed on the cluster "
                                 f"({type(exc).__name__}{': ' * bool(detail)}{detail})") from None


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """distributed logs a lost scheduler or a close with tasks cancelled as tracebacks on stderr; the command
    line says what happened in one line of its own.  All logging, not just the "distributed" logger: its
    children have levels and handlers of their own."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def _close(client: Any) -> None:
    try:
        client.close(timeout=CONNECT_SECONDS)
    except Exception:  # the scheduler went away: nothing left to release
        pass
