"""Every hand-in accounted for by nbgrader's autograde: a submission folder without the notebook nbgrader
looks for is still converted, so that the student gets a recorded outcome in the gradebook.

nbgrader's autograde converts, in each submitted/<student>/<assignment>/ folder, the notebooks named like the
assignment's; a folder holding only a .py, or a notebook under another name, is skipped with a warning (or
fails the run with "No notebooks found"), its exit code 0, and the student is missing from the gradebook.
`account_hand_ins` runs when autograde builds its exporter (after nbgrader has listed what it will convert,
before it converts anything) and lists each such folder with the notebook nbgrader expects, standing in for
what the folder holds (`HandIn`): the kit's own assignments grade it where the kit can (another notebook, a
.py: grading.batch.hand_in_of chooses, as grade-all does), and the log says so; otherwise, and for an
ordinary assignment, every cell scores 0 with the reason.  An empty folder is not a hand-in.
"""
from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nbgrader.api import Gradebook, MissingEntry

from autograder.grading.batch import hand_in_of
from autograder.grading.result import display_name


@dataclass(frozen=True)
class HandIn:
    """What stands where autograde expects a notebook it did not find."""
    path: Path  # the file handed in instead (read as every submission is read)
    instead: str  # in words, for the log and the reason
    gradable: bool  # whether the kit grades it; if not, every cell scores 0 with `instead` as the reason


def _notebooks(coursedir: Any, assignment_id: str) -> list[str]:
    """The assignment's notebooks that autograde converts (the gradebook's, filtered by --notebook)."""
    try:
        with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
            names = [n.name for n in gradebook.find_assignment(assignment_id).notebooks]
    except MissingEntry:
        return []  # nbgrader says so itself when it reaches the folder
    return [name for name in names if fnmatch.fnmatchcase(name, coursedir.notebook_id)]


def account_hand_ins(converter: Any, kit_grades: Callable[[str], bool]) -> dict[str, HandIn]:
    """Adds to `converter.assignments` (nbgrader's BaseConverter: folder -> notebooks to convert) each
    submission folder that holds something yet no notebook autograde would convert, with the path of the
    notebook it expects; returns that path -> the HandIn read in its place.  `kit_grades(assignment_id)`: whether
    the assignment is the kit's own (which grades a .py or a notebook under another name)."""
    coursedir = converter.coursedir
    pattern = re.compile(coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>.*)",
                                               "(?P<assignment_id>.*)", escape=True))
    stand_ins: dict[str, HandIn] = {}
    notebooks: dict[str, list[str]] = {}  # assignment id -> its notebooks, one gradebook look-up each
    for folder in glob.glob(converter._format_source(coursedir.assignment_id, coursedir.student_id)):
        match = pattern.match(folder)
        if match is None or not os.path.isdir(folder):
            continue
        if match["assignment_id"] not in notebooks:
            notebooks[match["assignment_id"]] = _notebooks(coursedir, match["assignment_id"])
        expected = notebooks[match["assignment_id"]]
        converted = {Path(path).stem for path in converter.assignments.get(folder, [])}
        if not expected or converted & set(expected):
            continue  # nbgrader converts a notebook of it (and records the others as missing, 0)
        notebook = expected[0]
        hand_in = hand_in_of(Path(folder), notebook)
        if hand_in is None:
            continue
        path, instead = hand_in
        kit = kit_grades(match["assignment_id"])
        gradable = kit and path.suffix in (".ipynb", ".py")
        if not kit:
            instead = (f"no {notebook}.ipynb was handed in, only {display_name(path.name)}: scored 0 "
                       "(nbgrader grades this assignment from its notebook)")
        stand_in = os.path.join(folder, f"{notebook}.ipynb")
        converter.assignments[folder] = [stand_in]
        stand_ins[stand_in] = HandIn(path, instead, gradable)
        converter.log.warning("%s: %s", display_name(match["student_id"]), instead)
    return stand_ins
