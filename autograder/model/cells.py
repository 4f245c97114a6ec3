"""What a notebook cell is to the grader: its nbgrader metadata, whether it is an autograded check cell, the
grade_id it carries, which cell of a grade_id is the notebook's own, and its source as one text.  The rubric
(which cells of the release grading skips), the intake (which cells of a submission run) and the authoring
tools all read cells through these, so that they agree on what a cell is."""
from __future__ import annotations

from typing import Any

# what grading runs in place of a cell it does not need, so that cell numbers stay the notebook's own
CHECK_CELL_STANDIN = "pass  # a check cell: the hidden suite takes its place when grading\n"
UNCHANGED_CELL_STANDIN = "pass  # an instructor's locked cell that grading does not need\n"


def nbgrader_of(cell: Any) -> dict[str, Any]:
    """The cell's nbgrader metadata; {} when it has none or it is not a mapping."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return nbgrader if isinstance(nbgrader, dict) else {}


def is_check_cell(cell: Any) -> bool:
    """A cell marked as an nbgrader autograded test cell, of whatever type: its visible checks compare with
    torch's own implementations, which the sandbox disables, and the hidden suite takes its place when
    grading, so it is not run.  The mark decides, on every front end: a test cell the student added or
    copied from elsewhere is not run either, and earns nothing (the rubric's parts are what is scored)."""
    nbgrader = nbgrader_of(cell)
    return nbgrader.get("grade") is True and nbgrader.get("solution") is not True


def grade_id_of(cell: Any) -> str | None:
    """The nbgrader grade_id the cell carries, if it carries one."""
    grade_id = nbgrader_of(cell).get("grade_id")
    return grade_id if isinstance(grade_id, str) and grade_id else None


def last_carriers(cells: list) -> dict[str, int]:
    """grade_id -> the index of the last cell carrying it.  That cell is the notebook's cell of that grade_id;
    earlier ones (JupyterLab copies a cell's metadata with it when it is pasted) are the student's own cells.
    nbgrader's rule (its DeduplicateIds keeps the last), here for every cell that carries a grade_id."""
    return {grade_id: i for i, cell in enumerate(cells) if (grade_id := grade_id_of(cell)) is not None}


def unix_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def code_text(cell: dict[str, Any]) -> str | None:
    """A notebook code cell's source as one text with Unix line ends, as it is compared and run; None when
    its source is not text."""
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return unix_newlines(source) if isinstance(source, str) else None
