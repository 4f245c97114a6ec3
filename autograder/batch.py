"""Grading a folder of submissions, durably.

Each submission's results.json is written atomically the moment it is graded, with the hash of the file
it judged; a rerun skips every submission whose result matches its current file, so killing the grader
mid-batch loses at most the submission in progress.  grades.csv is always rebuilt from the per-submission
results, never kept as its own state.

A batch that is stopped (Ctrl-C, SIGTERM, a submission whose judging was interrupted) records nothing for the
submissions in progress, writes no grades.csv, and raises: the rerun grades what is missing.
"""
from __future__ import annotations

import csv
import io
import json
import multiprocessing
import signal
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from autograder.grading import GradeResult, as_text, file_sha256, grade_file
from autograder.judge import JudgingInterrupted, raise_terminated
from autograder.results import gradescope, write_json_atomic
from autograder.rubric import Rubric
from autograder.sandbox import Limits

SUBMISSION_SUFFIXES = (".ipynb", ".py")


@dataclass(frozen=True)
class Entry:
    student: str
    path: Path


def discover(folder: Path, assignment: str) -> list[Entry]:
    """A flat folder of files (student = file stem), or nbgrader's submitted/<student>/<assignment>/ layout
    (given either the `submitted` folder or the course root)."""
    if (folder / "submitted").is_dir():
        folder = folder / "submitted"
    entries = [Entry(as_text(p.stem), p) for p in sorted(folder.iterdir())
               if p.is_file() and p.suffix in SUBMISSION_SUFFIXES]
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        assignment_dir = student_dir / assignment
        if not assignment_dir.is_dir():
            continue
        preferred = assignment_dir / f"{assignment}.ipynb"
        notebooks = [preferred] if preferred.is_file() else sorted(assignment_dir.glob("*.ipynb"))
        if notebooks:
            entries.append(Entry(as_text(student_dir.name), notebooks[0]))
    return entries


def result_path(out_dir: Path, student: str) -> Path:
    return out_dir / f"{student}.json"


def already_graded(out_dir: Path, entry: Entry) -> bool:
    try:
        data = json.loads(result_path(out_dir, entry.student).read_text(encoding="utf-8"))
        return data["extra_data"]["submission_sha256"] == file_sha256(entry.path)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _grade_and_record(entry: Entry, out_dir: Path, rubric: Rubric, limits: Limits) -> str:
    """Runs in a worker process: the result is on disk before the worker reports back."""
    result: GradeResult = grade_file(entry.path, rubric, limits)
    write_json_atomic(result_path(out_dir, entry.student), gradescope(result))
    return f"{entry.student}: {result.score:g} / {result.max_score:g} ({result.seconds:.1f} s)"


# In a worker process (--jobs > 1).  The main process stops a batch by sending its workers SIGTERM: a worker
# then stops the submission it is grading, which records nothing, and starts no other.
_stopping = False
_grading = False


def _worker_sigterm(signum: int, frame: Any) -> None:
    global _stopping
    _stopping = True
    if _grading:  # an idle worker raising here would die with a traceback instead of refusing new work
        raise_terminated(signum, frame)


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the main process decides
    signal.signal(signal.SIGTERM, _worker_sigterm)


def _grade_in_worker(entry: Entry, out_dir: Path, rubric: Rubric, limits: Limits) -> str:
    global _grading
    if _stopping:
        raise JudgingInterrupted(f"{entry.student}: not started, the batch was stopped")
    _grading = True
    try:
        return _grade_and_record(entry, out_dir, rubric, limits)
    finally:
        _grading = False


def grade_all(folder: Path, out_dir: Path, rubric: Rubric, limits: Limits, jobs: int = 1,
              log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> list[Entry]:
    """Raises JudgingInterrupted or KeyboardInterrupt when stopped; every result written so far stays."""
    entries = discover(folder, rubric.assignment)
    pending = []
    for entry in entries:
        if already_graded(out_dir, entry):
            log(f"{entry.student}: already graded, kept")
        else:
            pending.append(entry)
    if jobs <= 1:
        for entry in pending:
            log(_grade_and_record(entry, out_dir, rubric, limits))
    else:
        # each submission's grading waits mostly on its own child; a few run side by side.  Workers are
        # spawned, not forked, so none inherits another's threads or sandboxes.
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_worker) as pool:
            futures = [pool.submit(_grade_in_worker, entry, out_dir, rubric, limits) for entry in pending]
            try:
                for future in as_completed(futures):
                    log(future.result())
            except BaseException:  # a signal here, or a worker's submission stopped: stop the whole batch
                for future in futures:
                    future.cancel()
                for process in list(pool._processes.values()):  # the executor has no public way to stop a task
                    process.terminate()
                raise
    write_grades_csv(out_dir, entries, rubric)
    return entries


def grades_rows(out_dir: Path, entries: list[Entry], rubric: Rubric) -> Iterator[list[str]]:
    parts = [p.name for p in rubric.parts]
    yield ["student", "score", "max_score", *parts]
    for entry in entries:
        data = json.loads(result_path(out_dir, entry.student).read_text(encoding="utf-8"))
        by_part = data["extra_data"]["parts"]
        yield [entry.student, f"{data['score']:g}", f"{data['max_score']:g}",
               *(f"{by_part[p]['score']:g}" for p in parts)]


def write_grades_csv(out_dir: Path, entries: list[Entry], rubric: Rubric) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(grades_rows(out_dir, entries, rubric))
    target = out_dir / "grades.csv"
    tmp = target.with_name(".grades.csv.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    tmp.replace(target)
