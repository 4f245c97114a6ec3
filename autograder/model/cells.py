"""What a notebook cell is to the grader: its nbgrader metadata, whether it is an autograded check cell, the
grade_id it carries, which cell of a grade_id is the notebook's own, and its source as one text.  The rubric
(which cells of the release grading skips), the intake (which cells of a submission run) and the authoring
tools all read cells through these, so that they agree on what a cell is.

`ReleaseText` is how a cell is known to be the release's when its metadata does not say so (Colab strips it,
VS Code and jupytext never had it, a fresh copy lost it): by its text.  Two texts match when they have the
same non-blank lines in the same order, each compared without its trailing whitespace, after the byte-order
mark is dropped and line ends are unified (`text_key`): the whitespace editors add or strip never decides,
and any other change does.  A locked release cell split by the student into consecutive code cells is
matched when the pieces, in order, make up exactly its lines.  Only whole cells are matched: a cell holding
a locked cell's text and code of the student's own is the student's, and runs whole (its code must run; the
release's text in it runs too, as the student's).  Matching is by text alone, so a student cell that is
character for character a locked check cell is that check cell: it could only run the release's own code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

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


def text_key(text: str) -> tuple[str, ...]:
    """A cell's text as it is matched with the release's: its non-blank lines without trailing whitespace,
    after the byte-order mark is dropped and line ends are unified."""
    return tuple(line.rstrip() for line in unix_newlines(text.lstrip("\ufeff")).split("\n") if line.strip())


@dataclass(frozen=True)
class ReleaseText:
    """The release's locked code cells that never run as a student's, by text: each `text_key` -> the stand-in
    that runs in its place (CHECK_CELL_STANDIN for an autograded test cell, UNCHANGED_CELL_STANDIN for a
    cell of `skip_when_unchanged`)."""
    standin_of: Mapping[tuple[str, ...], str] = field(default_factory=dict)

    def standins(self, texts: Sequence[str | None]) -> dict[int, str]:
        """index -> stand-in of each of `texts` (a notebook's code cells in order; None for a cell that is
        already a stand-in) that is a release cell, whole or one of the consecutive pieces it was split into."""
        by_first: dict[str, list[tuple[str, ...]]] = {}
        for key in self.standin_of:
            by_first.setdefault(key[0], []).append(key)
        keys = [None if text is None else text_key(text) for text in texts]
        found: dict[int, str] = {}
        start = 0
        while start < len(keys):
            first = keys[start]
            best: tuple[int, str] | None = None
            for release_key in by_first.get(first[0], []) if first else []:
                end = _pieces_end(keys, start, release_key)
                if end is not None and (best is None or end > best[0]):
                    best = (end, self.standin_of[release_key])
            if best is None:
                start += 1
                continue
            found.update({index: best[1] for index in range(start, best[0])})
            start = best[0]
        return found


def _pieces_end(keys: Sequence[tuple[str, ...] | None], start: int, release_key: tuple[str, ...]) -> int | None:
    """The end of the run of cells from `start` whose lines, in order, are exactly `release_key`'s; None when
    there is no such run."""
    filled, index = 0, start
    while filled < len(release_key) and index < len(keys):
        piece = keys[index]
        if not piece or release_key[filled:filled + len(piece)] != piece:
            return None
        filled, index = filled + len(piece), index + 1
    return index if filled == len(release_key) else None
