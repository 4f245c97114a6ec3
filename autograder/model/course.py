"""Which folder holds an assignment: the course's, else the kit checkout's.

A course that uses the kit holds its kit assignments in the kit's own layout, relative to the course root:
`source/<id>/`, `release/<id>/`, `assignments/<id>/` (rubric.toml, hidden suites, catalogue) and
`solutions/<id>.py` (`python -m autograder add-assignment` writes them).  The kit's checkout holds its own
three the same way.  An assignment is the course's when the course root holds its rubric, else the
checkout's: the demo's scratch course holds only `source/` and is graded with the checkout's rubrics.

The course root is the one nbgrader's front end passes (CourseDirectory.root), else $AUTOGRADER_COURSE_ROOT,
else the current directory.  Every tool that finds an assignment by its name asks here.
"""
from __future__ import annotations

import os
from pathlib import Path

from autograder import REPO_ROOT

COURSE_ROOT_VARIABLE = "AUTOGRADER_COURSE_ROOT"
MANIFEST = "rubric.toml"


def course_root(course: str | os.PathLike[str] | None = None) -> Path:
    """The course root: `course` when given, else $AUTOGRADER_COURSE_ROOT, else the current directory."""
    chosen = course or os.environ.get(COURSE_ROOT_VARIABLE) or os.getcwd()
    return Path(chosen).resolve()


def _one_component(assignment: str) -> bool:
    # an assignment id is one folder name: never a path that leaves assignments/
    return bool(assignment) and assignment not in (".", "..") and "/" not in assignment and "\\" not in assignment \
        and "\0" not in assignment


def holds(root: Path, assignment: str) -> bool:
    """Whether `root` (a course or the checkout) holds the assignment's manifest."""
    return _one_component(assignment) and (root / "assignments" / assignment / MANIFEST).is_file()


def roots(course: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where assignments are looked up, in order: the course root, then the checkout (once if they are one)."""
    first = course_root(course)
    return [first] if first == REPO_ROOT else [first, REPO_ROOT]


def assignment_root(assignment: str, course: str | os.PathLike[str] | None = None) -> Path:
    """The root whose assignments/<assignment>/ is the assignment's: the course's when it holds the manifest,
    else the checkout's (also when neither does: what reports it missing names the checkout's folder)."""
    for root in roots(course):
        if holds(root, assignment):
            return root
    return REPO_ROOT


def assignment_names(course: str | os.PathLike[str] | None = None) -> list[str]:
    """Every assignment the course and the checkout hold, each once (the course's first when both do)."""
    names: dict[str, None] = {}
    for root in roots(course):
        folder = root / "assignments"
        if folder.is_dir():
            names.update({p.name: None for p in sorted(folder.iterdir()) if (p / MANIFEST).is_file()})
    return sorted(names)
