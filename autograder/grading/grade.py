"""One submission, start to finish: read it, run it in a sandbox, judge it, score it."""
from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import torch

from autograder.grading.fingerprint import cells_sha256
from autograder.grading.result import GradeResult, as_text, display_name
from autograder.model.interrupts import JudgingInterrupted, interruption
from autograder.judging.judge import collect, run_suite
from autograder.judging.resemblance import resemblances
from autograder.host.remote import RemoteSubmission
from autograder.host.sandbox import Zygote
from autograder.grading.rubric import Rubric, score
from autograder.model.limits import Limits
from autograder.model.load_report import Notice, NoticeKind
from autograder.host.intake import UnreadableSubmission, read_submission
from autograder.host.source_cells import cells_from
from autograder.model.submission import Submission, SubmissionBroken


class Unjudgeable(Submission):
    """Stands in for a submission that cannot run at all, so its report still lists every test."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def names(self):
        return set()

    def _refuse(self, *args, **kwargs):
        raise SubmissionBroken(self.reason)

    call = vjp = new = rng = _refuse


def grade_file(path: Path, rubric: Rubric, limits: Limits, pictures: bool = True, within: Path | None = None,
               refused: str = "", every_check: bool = False) -> GradeResult:
    """Grades the submission at `path`, found in the folder `within` (by default its own; see
    autograder.host.intake), or, given `refused`, the file another machine could not read, for that reason.
    Raises JudgingInterrupted when grading stopped before every check had an outcome: no grade exists.
    Without `pictures`, the evidence that would ask the submission for more values is not drawn.  With
    `every_check`, the checks that could change nothing (Rubric.needed) run too (check-suite judges them)."""
    try:
        return _grade_file(path, rubric, limits, pictures, within, refused, every_check)
    except JudgingInterrupted:
        raise
    except KeyboardInterrupt as exc:  # a signal outside the judge (while loading, say): no grade either
        raise interruption(exc, f"while grading {display_name(path.name)}") from exc


_frozen_in: int | None = None  # the process that froze its imports


def _freeze_imports() -> None:
    """Once per process, before its first grade: torch, pytest and the judge (imported, and shared with the
    forkserver's other workers until written) are moved out of the garbage collector's sight.  Every
    collection would otherwise walk them, costing time and copying each shared page it touches."""
    global _frozen_in
    if _frozen_in != os.getpid():
        _frozen_in = os.getpid()
        gc.freeze()


def _loaded_while_collecting(cells: list[str], rubric: Rubric, limits: Limits) -> RemoteSubmission:
    """The submission, its cells run by the child while this process imports and collects the suites (which it
    does once, on its first grade): a cold grade waits for the longer of the two, not for both."""
    # the zygote's parent-death signal follows the thread that started it: started here, not by the loader,
    # whose end would take it (and the child) down
    Zygote.shared()
    loading: Future = Future()

    def load() -> None:
        try:
            loading.set_result(RemoteSubmission(cells, limits, rubric.forbidden_ops, rubric.preload))
        except BaseException as exc:
            loading.set_exception(exc)
    # a daemon: a grader stopped meanwhile exits at once, and its zygote's end ends the child
    threading.Thread(target=load, daemon=True, name="load").start()
    try:
        collect(rubric.suite_files())
        return loading.result()
    except BaseException:  # a suite that does not collect, a signal: the child is closed once it has started
        loading.add_done_callback(_close_when_loaded)
        raise


def _close_when_loaded(loading: Future) -> None:
    if loading.exception() is None:
        loading.result().close()


def _grade_file(path: Path, rubric: Rubric, limits: Limits, pictures: bool, within: Path | None,
                refused: str, every_check: bool) -> GradeResult:
    _freeze_imports()
    started = time.monotonic()
    torch.set_num_threads(1)  # references computed the same way whatever the machine
    result = GradeResult(display_name(path.name), "", rubric.assignment, [], rubric.max_score,
                         graded_by_hand=dict(rubric.graded_by_hand))
    try:
        if refused:
            raise UnreadableSubmission(refused)
        raw = read_submission(path, within)
        result.sha256 = hashlib.sha256(raw).hexdigest()  # of the very bytes graded
        cells = cells_from(path, raw, rubric.skip_when_unchanged, rubric.release_text)
        result.cells_sha256 = cells_sha256(cells)
    except UnreadableSubmission as exc:
        result.unreadable = as_text(str(exc))
        result.parts = score(rubric, run_suite(rubric.suite_files(), Unjudgeable(result.unreadable),
                                               rubric.part_names))
        result.seconds = time.monotonic() - started
        return result
    submission = _loaded_while_collecting(cells, rubric, limits)
    try:
        result.parts = score(rubric, run_suite(rubric.suite_files(), submission, rubric.part_names, pictures,
                                               None if every_check else rubric.needed))
    finally:
        result.printed = submission.printed()
        submission.close()
    if submission.exceeded:  # a bound on the whole submission: no check it passed before counts
        result.parts = score(rubric, run_suite(rubric.suite_files(), Unjudgeable(submission.exceeded),
                                               rubric.part_names))
        submission.report.notices.append(Notice(NoticeKind.LIMIT, submission.exceeded))
    result.load = submission.report
    result.resembles = resemblances(cells, rubric.torch_implementations)  # the source, not what ran
    result.seconds = time.monotonic() - started
    return result
