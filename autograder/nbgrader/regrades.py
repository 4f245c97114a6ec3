"""Regrades that show what changed, on nbgrader's side: `nbgrader autograde` keeps every grade the kit makes
and says whose grade moved, which checks moved, and why, as grade-all does (autograder.grading.regrades).

nbgrader itself keeps nothing to compare with: `autograde --force` (and a resubmission newer than the
autograded copy) removes autograded/<student>/<assignment>/ before grading, and its gradebook holds points per
cell, not the kit's verdict per check.  So SandboxedGrading keeps its own history, beside the gradebook:

    <course root>/autograded-history/<assignment>/<student>/<UTC time>-<fingerprint prefix>.json

one file per grade, written (atomically, never over another) right after the kit graded or reused a grade and
before nbgrader saves it: the grade in grade-all's results.json form (score, every check's verdict, the graded
cells' cells_sha256, the assignment_fingerprint and its per-input digests, assignment_components).  The kit
never rewrites or removes a history file.  The newest file of a student's folder (for the notebook being
graded) is the previous grade.

<course root>/<assignment>-changes.csv.  When an autograde run grades a student who has a previous grade, the
new grade is compared with it: the run's changes file lists every such student whose score or any check's
verdict moved, with grade-all's changes.csv columns (student, old_score, new_score, moved_checks, why).  Why
names what changed: "the submission changed" (the graded cells' cells_sha256 differ: a resubmission, or a cell
nbgrader no longer restores), which hidden suite or helper module, the rubric, the engine or which limit
changed, or "regraded on request" (autograde --force with nothing changed).  The file is rewritten after each
regraded student, so a stopped run leaves the rows it got to; a run that regrades nobody (only first grades,
or nothing) leaves it as it was.  nbgrader's log gets one line per changed student and, at the end of the run,
the summary line ("regraded 2: 1 changed, 1 unchanged; see .../ASSIGNMENT-changes.csv").
"""
from __future__ import annotations

import atexit
import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autograder.grading import regrades
from autograder.grading.batch import result_path
from autograder.grading.results_json import write_text_atomic
from autograder.grading.result import display_name

HISTORY_FOLDER = "autograded-history"
NOTEBOOK = "nbgrader_notebook"  # extra_data's key for the notebook a kept grade is of
REQUESTED = "regraded on request (autograde --force, nothing changed)"


def assignment_history(course_root: Path, assignment: str) -> Path:
    return course_root / HISTORY_FOLDER / assignment


def changes_path(course_root: Path, assignment: str) -> Path:
    return course_root / f"{assignment}-changes.csv"


def student_history(folder: Path, student: str) -> Path:
    """folder/<student>/, the name made safe as grade-all names results and their history (. and .. as %2e)."""
    return folder / regrades.history_folder(result_path(folder, student)).name


def previous(folder: Path, notebook: str) -> bytes | None:
    """The newest grade kept in a student's folder for the notebook `notebook` (nbgrader's notebook id), if
    any."""
    for path in reversed(regrades._kept(folder)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        try:
            stored = json.loads(data)["extra_data"][NOTEBOOK]
        except (ValueError, KeyError, TypeError, RecursionError):
            return data  # unreadable: still the previous grade (its row says so)
        if stored == notebook:
            return data
    return None


def keep(folder: Path, report: dict[str, Any]) -> Path:
    """Writes `report` as a new history file of the student's folder: a name no file holds, atomically."""
    text = json.dumps(report, indent=1, sort_keys=True) + "\n"
    base = f"{regrades.stamp()}-{regrades._fingerprint_prefix(text.encode('utf-8'))}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for n in range(1000):
        target = folder / (f"{base}.json" if n == 0 else f"{base}-{n}.json")
        if not target.exists():
            write_text_atomic(target, text)
            return target
    raise FileExistsError(f"{folder}: no free history name for {base}")


def _cells_as_submission(data: Any) -> Any:
    """nbgrader's submission is the cells it graded (the file is nbgrader's own rewrite of the student's):
    `data` with its cells_sha256 where regrades.why compares submission_sha256."""
    if isinstance(data, dict) and isinstance(data.get("extra_data"), dict):
        return {**data, "extra_data": {**data["extra_data"], "submission_sha256": data["extra_data"].get("cells_sha256")}}
    return data


def compare(student: str, old: bytes, new: dict[str, Any], suites: frozenset[str]) -> regrades.Change:
    """regrades.compare, the submission being the graded cells."""
    try:
        old_data = json.loads(old)
    except (ValueError, RecursionError):
        old_data = None
    change = regrades.compare(student, json.dumps(_cells_as_submission(old_data)).encode("utf-8"),
                              _cells_as_submission(new), suites)
    change.why = [REQUESTED if reason == regrades.ON_REQUEST else reason for reason in change.why]
    return change


@dataclass
class RunReport:
    """One autograde run's regrades for one changes file."""
    target: Path
    log: Callable[[str], None]
    found: list[regrades.Change] = field(default_factory=list)

    def add(self, change: regrades.Change) -> None:
        self.found.append(change)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(regrades.CHANGES_HEADER)
        writer.writerows(c.row() for c in self.found if c.changed)
        write_text_atomic(self.target, buffer.getvalue())

    def summary(self) -> None:
        self.log(regrades.summary_line(self.found, self.target))


_RUNS: dict[Path, RunReport] = {}  # this process's (one autograde run's), by changes file


def run_report(target: Path, log: Callable[[str], None]) -> RunReport:
    if target not in _RUNS:
        _RUNS[target] = RunReport(target, log)
        # nbgrader has no end-of-run hook; registered after logging's own exit handler, so it runs first
        atexit.register(_RUNS[target].summary)
    return _RUNS[target]


def record(course_root: Path, assignment: str, student: str, notebook: str, report: dict[str, Any],
           suites: frozenset[str], log: Callable[[str], None]) -> regrades.Change | None:
    """Keeps the new grade `report` (results.json form) of the student's `notebook` in the student's history
    and, when there was a grade before, reports the regrade in the run's changes file: the Change, or None for
    a first grade."""
    folder = student_history(assignment_history(course_root, assignment), student)
    before = previous(folder, notebook)
    report = {**report, "extra_data": {**report["extra_data"], NOTEBOOK: notebook}}
    keep(folder, report)
    if before is None:
        return None
    change = compare(student, before, report, suites)
    run_report(changes_path(course_root, assignment), log).add(change)
    return change


def change_line(change: regrades.Change) -> str:
    old = "?" if change.old_score is None else f"{change.old_score:g}"
    moved = f"; moved: {'; '.join(change.moved)}" if change.moved else ""
    return (f"{display_name(change.student)}: regraded, {old} -> {change.new_score:g}{moved} "
            f"(why: {'; '.join(change.why)})")


def unchanged_line(change: regrades.Change) -> str:
    return f"{display_name(change.student)}: regraded, unchanged at {change.new_score:g} (why: {'; '.join(change.why)})"
