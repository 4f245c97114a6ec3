"""Grading a folder of submissions, durably.

Each submission's results.json is written atomically the moment it is graded, with the hash of the file
it judged and the fingerprint of the assignment it was judged against (suites, rubric, kit, limits; see
autograder.grading.fingerprint).  A rerun keeps a result only when both still match, so killing the grader mid-batch
loses at most the submissions in progress, and editing a suite, the rubric, the kit or a limit regrades
everything.  grades.csv is always rebuilt from the per-submission results, never kept as its own state.

A batch that is stopped (Ctrl-C, SIGTERM, a submission whose judging was interrupted) records nothing for the
submissions in progress, writes no grades.csv, and raises: the rerun grades what is missing.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import multiprocessing
import os
import signal
import socket
import sys
import unicodedata
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from autograder.grading import regrades
from autograder.grading.fingerprint import assignment_fingerprint, changed_components, fingerprint_components
from autograder.host.intake import submission_sha256
from autograder.grading.result import GradeResult, csv_cell, display_name
from autograder.model.interrupts import JudgingInterrupted, raise_terminated
from autograder.grading.results_json import NotAResult, gradescope, read_result, rounded, write_json_atomic
from autograder.grading.rubric import Rubric
from autograder.model.limits import Limits

SUBMISSION_SUFFIXES = (".ipynb", ".py")
NBGRADERS_OWN = {"timestamp.txt"}  # what nbgrader's collect and submit write into a hand-in: not the student's


@dataclass(frozen=True)
class Entry:
    student: str  # display_name of the file's stem or the student's folder: shown as it is, and names the result
    path: Path  # where the submission should be: whatever is there is read as autograder.host.intake reads
    root: Path  # the folder it was found in, below which no symbolic link is followed
    # what stood in for nbgrader's <assignment>.ipynb when the student's folder lacked it, in words ("" if nothing)
    instead: str = ""


def discover(folder: Path, assignment: str) -> list[Entry]:
    """A flat folder of files (student = file stem), or nbgrader's submitted/<student>/<assignment>/ layout
    (given either the `submitted` folder or the course root); students are named by the name's display_name,
    so that no writer ever shows a control character of it.  Two entries may name one student (alice.py and
    alice.ipynb): `choose` decides.  Every name that stands where a submission
    should be is an entry, whatever it is (a link, a FIFO, a folder called x.ipynb): reading it refuses what
    is not a regular file inside the folder, and the student scores 0 with the reason, in their own row."""
    if (folder / "submitted").is_dir():
        folder = folder / "submitted"
    entries, student_dirs = [], []
    for p in sorted(folder.iterdir()):
        if p.suffix in SUBMISSION_SUFFIXES:
            entries.append(Entry(display_name(p.stem), p, folder))
        elif not p.name.startswith(".") and (p / assignment).is_dir():  # followed: a linked folder is an entry too
            student_dirs.append(p)
    for student_dir in student_dirs:
        hand_in = hand_in_of(student_dir / assignment, assignment, student_dir.is_symlink())
        if hand_in is not None:
            path, instead = hand_in
            entries.append(Entry(display_name(student_dir.name), path, folder, instead))
    return entries


def hand_in_of(folder: Path, notebook: str, linked: bool = False) -> tuple[Path, str] | None:
    """What is graded of a student's nbgrader folder `folder` (submitted/<student>/<assignment>/), and, when it
    is not `<notebook>.ipynb`, what was graded instead, in words: the notebook named so; else another notebook,
    then a .py (the kit grades both); else the first other name there, which reading refuses with its reason,
    so that the student still scores 0 in their own row.  None only for a folder that holds nothing.  Inside
    a linked folder, the one named like the notebook (reading refuses the link, whatever it leads to)."""
    preferred = folder / f"{notebook}.ipynb"
    if linked or folder.is_symlink() or os.path.lexists(preferred):
        return preferred, ""
    names = sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name not in NBGRADERS_OWN)
    for suffix in SUBMISSION_SUFFIXES:
        found = [p for p in names if p.suffix == suffix]
        if found:
            return found[0], f"no {notebook}.ipynb was handed in: {display_name(found[0].name)} graded instead"
    if names:
        return names[0], (f"no {notebook}.ipynb was handed in, nor any notebook or .py: "
                          f"{display_name(names[0].name)} cannot be graded (0)")
    return None


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr)


# --- two submissions of one student ---------------------------------------------------------------------------

DUPLICATE_RULES = ("refuse", "newest", "ipynb", "py")
DUPLICATES_HELP = ("what to do when two submissions name one student (alice.py and alice.ipynb; names that "
                   "differ only in case or Unicode normalisation count as one, since their results would share a "
                   "file on macOS or Windows): refuse (the default) prints one line per such student, naming its "
                   "files, and exits 2 before grading anything; newest grades the one modified last; ipynb (py) "
                   "grades the notebook (the script), the newest of them if there are several, else the newest")


class DuplicateSubmissions(Exception):
    """Students that two or more entries name, under the rule "refuse": one line each, in `lines`."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def student_key(student: str) -> str:
    """What two names must differ in to be two students: not only case or Unicode normalisation, which
    case-insensitive file systems (macOS, Windows) ignore, so that their results would share one file."""
    return unicodedata.normalize("NFC", student).casefold()


def _relative(entry: Entry) -> str:
    try:
        return str(entry.path.relative_to(entry.root))
    except ValueError:
        return entry.path.name


def entry_label(entry: Entry) -> str:
    """The submission as the instructor finds it: its path below the folder, shown as display_name shows it."""
    return display_name(_relative(entry))


def _labels(group: list[Entry]) -> list[str]:
    labels = [entry_label(e) for e in group]
    if len(set(labels)) < len(labels):  # names that show alike (an escape's spelling and the character): as bytes
        labels = [ascii(os.fsencode(_relative(e)))[1:] for e in group]
    return labels


def _modified(entry: Entry) -> float:
    try:
        return os.lstat(entry.path).st_mtime  # a link is judged by itself: reading refuses it anyway
    except OSError:
        return float("-inf")


def choose(entries: list[Entry], rule: str = "refuse",
           log: Callable[[str], None] = stderr_log) -> list[Entry]:
    """One entry per student: raises DuplicateSubmissions under "refuse" when any student has several, else
    keeps the one `rule` picks (DUPLICATES_HELP) and logs which."""
    if rule not in DUPLICATE_RULES:
        raise ValueError(f"duplicates rule {rule!r} is not one of {', '.join(DUPLICATE_RULES)}")
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(student_key(entry.student), []).append(entry)
    several = [group for group in groups.values() if len(group) > 1]
    if not several:
        return entries
    if rule == "refuse":
        raise DuplicateSubmissions([
            f"student {display_name(group[0].student)} has {len(group)} submissions ({', '.join(_labels(group))}): "
            f"--duplicates {'|'.join(DUPLICATE_RULES[1:])} grades one of them" for group in several])
    dropped = set()
    for group in several:
        kind = f".{rule}" if rule != "newest" else None
        kept = max(group, key=lambda e: (kind is not None and e.path.suffix == kind, _modified(e)))
        dropped.update(id(e) for e in group if e is not kept)
        labels = dict(zip(map(id, group), _labels(group)))
        log(f"{display_name(kept.student)}: {len(group)} submissions ({', '.join(labels[id(e)] for e in group)}): "
            f"graded {labels[id(kept)]} (--duplicates {rule})")
    return [entry for entry in entries if id(entry) not in dropped]


def result_path(out_dir: Path, student: str) -> Path:
    """`student`.json; a name too long to be a file name keeps a prefix and a digest of the whole."""
    name = f"{student}.json"
    if len(os.fsencode(name)) > 255:
        digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        prefix = student
        while len(prefix.encode("utf-8", "surrogateescape")) > 180:
            prefix = prefix[:-10]
        name = f"{prefix}-{digest}.json"
    return out_dir / name


STALE_ASSIGNMENT = "graded with a different version of the assignment (suites, rubric, kit or limits changed)"


def stale_reason(out_dir: Path, entry: Entry, fingerprint: str, components: dict[str, Any], rubric: Rubric
                 ) -> str | None:
    """None when the stored result still holds: same file, same assignment fingerprint, readable as every report
    reads a result.  Otherwise why not, or "" when there is no result yet.  Given the assignment's `components`
    (fingerprint_components), a result that stored its own says which of them changed ("the hidden suite
    test_attention.py changed"); a result from before they were stored, STALE_ASSIGNMENT."""
    path = result_path(out_dir, entry.student)
    if not path.exists():
        return ""
    try:
        extra = json.loads(path.read_text(encoding="utf-8"))["extra_data"]
        sha256, stored_fingerprint = extra["submission_sha256"], extra.get("assignment_fingerprint")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"its result {path.name} is unreadable ({type(exc).__name__})"
    if sha256 != submission_sha256(entry.path, entry.root):
        return "the submission changed since it was graded"
    if stored_fingerprint != fingerprint:
        changed = changed_components(extra.get("assignment_components"), components, suite_names(rubric))
        return f"the assignment changed since it was graded: {', '.join(changed)}" if changed else STALE_ASSIGNMENT
    try:  # kept only if every report can read it as it reads a fresh one
        read_result(path, rubric)
    except NotAResult as exc:
        return f"its result is unreadable ({exc})"
    return None


def suite_names(rubric: Rubric) -> frozenset[str]:
    """The hidden suites' paths within the assignment, as fingerprint_components names its modules."""
    return frozenset(p.relative_to(rubric.folder).as_posix() for p in rubric.suite_files())


class UnknownStudents(ValueError):
    """--only named a student the folder has no submission of (or, for grades.csv, one without a result)."""


def pending_entries(folder: Path, out_dir: Path, rubric: Rubric, limits: Limits,
                    log: Callable[[str], None] = stderr_log, duplicates: str = "refuse",
                    only: list[str] | None = None) -> tuple[list[Entry], list[Entry]]:
    """(every submission in `folder`, one per student, `duplicates` deciding (see choose); those that need
    grading); logs the ones kept and why others are regraded.  With `only` (student names), exactly those are
    graded, fresh or not, and everyone else's stored result is kept as it is, even a stale one (which is
    logged).  Raises DuplicateSubmissions, or UnknownStudents (a name of `only` that no submission has, or,
    with `only`, a student without any stored result, whom grades.csv could not show), before anything is
    graded."""
    entries = choose(discover(folder, rubric.assignment), duplicates, log)
    for entry in entries:
        if entry.instead:
            log(f"{display_name(entry.student)}: {entry.instead}")
    fingerprint = assignment_fingerprint(rubric, limits)
    components = fingerprint_components(rubric, limits)
    chosen = None
    if only is not None:
        chosen = {student_key(e.student) for e in entries}
        unknown = [name for name in dict.fromkeys(only) if student_key(display_name(name)) not in chosen]
        if unknown:
            raise UnknownStudents(f"--only: no submission of {', '.join(map(display_name, unknown))} in "
                                  f"{display_name(str(folder))}")
        chosen = {student_key(display_name(name)) for name in only}
        missing = [e.student for e in entries
                   if student_key(e.student) not in chosen and not result_path(out_dir, e.student).exists()]
        if missing:
            raise UnknownStudents(f"--only: {', '.join(map(display_name, missing))} "
                                  f"{'has' if len(missing) == 1 else 'have'} no result yet, so grades.csv could "
                                  "not show the whole class: grade-all without --only grades them")
    pending = []
    for entry in entries:
        reason = stale_reason(out_dir, entry, fingerprint, components, rubric)
        if chosen is not None:
            if student_key(entry.student) in chosen:
                log(f"{display_name(entry.student)}: {reason or 'already graded'}: regraded on request (--only)")
                pending.append(entry)
            elif reason is None:
                log(f"{display_name(entry.student)}: already graded, kept")
            else:
                log(f"{display_name(entry.student)}: {reason}: kept as it is (not named by --only)")
            continue
        if reason is None:
            log(f"{display_name(entry.student)}: already graded, kept")
            continue
        if reason:
            log(f"{display_name(entry.student)}: {reason}: regraded")
        pending.append(entry)
    return entries, pending


def grade_report(path: Path, rubric: Rubric, limits: Limits, visibility: str = "visible",
                 within: Path | None = None, refused: str = "") -> tuple[GradeResult, dict[str, Any]]:
    """Grades one file (as autograder.grading.grade.grade_file does): its GradeResult and its results.json, keyed
    by what was graded against what."""
    fingerprint = assignment_fingerprint(rubric, limits)  # before grading: the suites the judge will read
    from autograder.grading.grade import grade_file  # the judge and torch: only where grading happens

    components = fingerprint_components(rubric, limits)
    result = grade_file(path, rubric, limits, within=within, refused=refused)
    report = gradescope(result, cells_sha256=result.cells_sha256, assignment_fingerprint=fingerprint,
                        visibility=visibility)
    # which input changed, when a later run finds this result stale (autograder.grading.regrades)
    report["extra_data"]["assignment_components"] = components
    return result, report


def record(out_dir: Path, entry: Entry, result_json: dict) -> None:
    """Stores one submission's result, atomically: a rerun sees it whole or not at all.  A result it replaces
    is first kept in OUT/history/<student>/ (autograder.grading.regrades.keep_history), so that no grade is lost,
    however the run ends."""
    path = result_path(out_dir, entry.student)
    regrades.keep_history(path)
    write_json_atomic(path, result_json)


def result_line(entry: Entry, result: GradeResult) -> str:
    review = "".join(f"; to review: {r.share:.0%} of {r.function}" for r in result.resembles)
    return f"{display_name(entry.student)}: {result.score:g} / {result.max_score:g} ({result.seconds:.1f} s){review}"


def _grade_and_record(entry: Entry, out_dir: Path, rubric: Rubric, limits: Limits) -> str:
    """Runs in a worker process: the result is on disk before the worker reports back."""
    result, result_json = grade_report(entry.path, rubric, limits, within=entry.root)
    record(out_dir, entry, result_json)
    return result_line(entry, result)


@contextlib.contextmanager
def progress(total: int, log: Callable[[str], None] = stderr_log) -> Iterator[Callable[[str], None]]:
    """Yields `graded(line)`, to call once per submission graded.  On a terminal it advances a progress bar
    (count, rate, time left) and prints the line above it; elsewhere (CI logs, a pipe, a caller's own `log`)
    it is `log`: one plain line per submission, with no control characters in the log."""
    if log is not stderr_log or not total or not sys.stderr.isatty():
        yield log
        return
    from tqdm import tqdm

    with tqdm(total=total, desc="grading", unit="submission", file=sys.stderr, **_bar_size()) as bar:
        def graded(line: str) -> None:
            bar.write(line, file=sys.stderr)
            bar.update()

        yield graded


def _bar_size() -> dict[str, Any]:
    try:
        columns, lines = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        columns = lines = 0
    if columns and lines:
        return {"dynamic_ncols": True}  # follows the window as it is resized
    # a pseudo-terminal that reports no size (script, some CI runners) would make tqdm draw nothing
    return {"ncols": 80, "nrows": 24}


# In a worker process (--jobs > 1).  The main process stops a batch by sending its workers SIGTERM: a worker
# then stops the submission it is grading, which records nothing, and starts no other.
_stopping = False
_grading = False


def _worker_sigterm(signum: int, frame: Any) -> None:
    global _stopping
    _stopping = True
    if _grading:  # an idle worker raising here would die with a traceback instead of refusing new work
        raise_terminated(signum, frame)


def _init_worker(controls: list[socket.socket], taken: Any) -> None:
    """Each worker adopts one of the controls its parent attached to the batch's zygote (`taken` counts the
    ones adopted) and closes the others."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the main process decides
    signal.signal(signal.SIGTERM, _worker_sigterm)
    from autograder.host.sandbox import Zygote

    with taken.get_lock():
        mine = taken.value
        taken.value += 1
    for index, control in enumerate(controls):
        if index != mine:
            control.close()
    if mine < len(controls):
        Zygote.adopt(controls[mine])
    else:  # a worker beyond those planned: a zygote of its own
        Zygote.shared()


def grade_in_worker(entry: Entry, out_dir: Path, rubric: Rubric, limits: Limits) -> str:
    """One submission graded and recorded in a process of `worker_pool`: its line for the log."""
    global _grading
    if _stopping:
        raise JudgingInterrupted(f"{display_name(entry.student)}: not started, the batch was stopped")
    _grading = True
    try:
        return _grade_and_record(entry, out_dir, rubric, limits)
    finally:
        _grading = False


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """`jobs` grading processes.  Each submission's grading waits mostly on its own child, so a few run side by
    side.  They are forked from a server that imported the judge and torch once, not from this process, so
    none inherits another's threads or sandboxes; their sandboxes all come from one zygote, started here
    while that server imports."""
    from autograder.host.sandbox import Zygote, ZygoteFailed

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["autograder.grading.grade"])
    try:
        zygote = Zygote.shared()
        controls = [zygote.attach() for _ in range(jobs)]
    except ZygoteFailed as exc:  # the grader's own failure: nothing graded, nothing recorded
        raise JudgingInterrupted(f"could not start the zygote of the workers ({exc})") from exc
    try:
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker,
                                 initargs=(controls, context.Value("i", 0))) as pool:
            yield pool
    finally:
        for control in controls:
            control.close()


def stop_workers(pool: ProcessPoolExecutor, futures: Iterable[Future]) -> None:
    """Nothing more starts, and what is being graded stops (recording nothing)."""
    for future in futures:
        future.cancel()
    for process in list(pool._processes.values()):  # the executor cannot stop a running task
        process.terminate()


def grade_all(folder: Path, out_dir: Path, rubric: Rubric, limits: Limits, jobs: int = 1,
              log: Callable[[str], None] = stderr_log, duplicates: str = "refuse",
              only: list[str] | None = None) -> list[Entry]:
    """Raises DuplicateSubmissions or UnknownStudents before grading (see choose, pending_entries);
    JudgingInterrupted or KeyboardInterrupt when stopped, every result written so far staying."""
    entries, pending = pending_entries(folder, out_dir, rubric, limits, log, duplicates, only)
    if jobs <= 1:
        with progress(len(pending), log) as graded:
            for entry in pending:
                graded(_grade_and_record(entry, out_dir, rubric, limits))
    else:
        with worker_pool(jobs) as pool, progress(len(pending), log) as graded:
            futures = [pool.submit(grade_in_worker, entry, out_dir, rubric, limits) for entry in pending]
            try:
                for future in as_completed(futures):
                    graded(future.result())
            except BaseException:  # a signal here, or a worker's submission stopped: stop the whole batch
                stop_workers(pool, futures)
                raise
    finish(out_dir, entries, rubric, log)
    return entries


def finish(out_dir: Path, entries: list[Entry], rubric: Rubric, log: Callable[[str], None] = stderr_log) -> None:
    """The end of a completed run: grades.csv and what it leaves to the instructor (the written answers, graded
    by hand), if anything; then changes.csv and its summary line (autograder.grading.regrades), the run's last word."""
    write_grades_csv(out_dir, entries, rubric)
    if rubric.graded_by_hand:
        log(by_hand_line(rubric))
    line = regrades.report(out_dir, [(e.student, result_path(out_dir, e.student)) for e in entries],
                           suite_names(rubric))
    if line:
        log(line)


def by_hand_line(rubric: Rubric) -> str:
    """grade-all's last word on the cells it does not grade: which, and where they are graded."""
    count = len(rubric.graded_by_hand)
    return (f"grades.csv holds the autograded points only (max {rubric.max_score:g}): each notebook's {count} "
            f"written answer{'s' if count != 1 else ''} ({rubric.points_by_hand:g} points: "
            f"{', '.join(rubric.graded_by_hand)}) are graded by hand, e.g. in nbgrader's formgrader")


def grades_rows(out_dir: Path, entries: list[Entry], rubric: Rubric) -> Iterator[list[str]]:
    parts = [p.name for p in rubric.parts]
    yield ["student", "score", "max_score", *parts]
    for student, result in stored_results(out_dir, entries, rubric):
        by_part = {p.part.name: p.score for p in result.parts}
        yield [csv_cell(display_name(student)), f"{result.score:g}", f"{result.max_score:g}",
               *(f"{rounded(by_part[p]):g}" for p in parts)]


def stored_results(out_dir: Path, entries: list[Entry], rubric: Rubric) -> Iterator[tuple[str, GradeResult]]:
    """(student, GradeResult) of every submission, rebuilt from its stored result like grades.csv: those graded
    by an earlier run count as much as those graded by this one."""
    for entry in entries:
        yield entry.student, read_result(result_path(out_dir, entry.student), rubric)


def write_grades_csv(out_dir: Path, entries: list[Entry], rubric: Rubric) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(grades_rows(out_dir, entries, rubric))
    target = out_dir / "grades.csv"
    tmp = target.with_name(".grades.csv.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    tmp.replace(target)
