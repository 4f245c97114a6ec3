"""Reads a submission file into the list of code cells the child will run, without running anything.

A notebook contributes its code cells in order; a .py file is one cell, or several where it uses `# %%`
cell markers.  IPython-only syntax is neutralised here, on the trusted side: line magics and shell escapes
become `pass`, and cells whose cell magic means "this is not Python" are dropped.

Nothing here compiles the student's code: compile() of a hostile file can take gigabytes or overflow the
parser's stack, so syntax errors are found by the sandboxed child and reported as errors of their cells.
Every step here is linear in the file's size, and the size, the amount of code and the number of cells
are bounded.

Cells that need not run when grading are replaced by a `pass` stand-in, so cell numbers stay the notebook's
own: cells marked as nbgrader autograded test cells (the hidden suite takes their place), and the locked
cells that the rubric lists in `skip_when_unchanged` (plots, say).  Locked cells are the instructor's on
every front end: nbgrader's autograde restores an edited one from its gradebook, so a cell carrying such a
grade_id is the release's cell whatever its source says, and what a student writes in it is not graded.
Of several cells carrying one grade_id (a cell pasted twice), only the last is that cell, as in nbgrader;
the others are the student's own and run.  Written answers (markdown cells nbgrader grades by hand) are text
like every other markdown cell: never run, and no part of what is graded.  docs/instructors.md, "Which cells
are graded", states the whole rule.

A cell is the release's by its text too, whatever its metadata says or lacks (Colab strips nbgrader's
metadata, VS Code and jupytext never keep it, cells get reordered or split): a code cell, or a run of
consecutive code cells, of a notebook or a .py whose text matches a locked check cell of the release, or a
locked cell of `skip_when_unchanged`, becomes that cell's stand-in (`ReleaseText`, built by the rubric from
the release notebook on the trusted side; autograder/model/cells.py says exactly what "matches" means).  So
the release's own check cells, which call torch's implementations to compare with, never run as the
student's code, and never produce an error blamed on the student.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from autograder.host.intake import UnreadableSubmission, read_submission, shown_name
from autograder.model.cells import (CHECK_CELL_STANDIN, UNCHANGED_CELL_STANDIN, ReleaseText, code_text, grade_id_of,
                                    is_check_cell, last_carriers, unix_newlines)
from autograder.protocol import loads

MAX_CODE_CHARS = 2_000_000  # all code cells together; the reference solution has 5,000 characters
MAX_CODE_CELLS = 2000
MAX_NOTEBOOK_DEPTH = 64  # nbformat nests about 6 levels; widget and plot outputs a few more
MAX_NOTEBOOK_INT_DIGITS = 30
# json.loads builds every value of the file at once: 20 MB of `{},` is 7 million dicts, about 1 GB.  The
# release notebook has about 250 objects and lists and 1,700 values; these bounds are far above any notebook
# a student writes, and its outputs (printed text, base64 plots) barely count towards them.
MAX_NOTEBOOK_CONTAINERS = 500_000
MAX_NOTEBOOK_VALUES = 2_000_000
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}  # body is still Python
LINE_MAGIC = re.compile(r"^(\s*)(?:[%!]|\w+\s*=\s*[%!](?!=)).*$")
CELL_MARKER = re.compile(r"^# %%.*$", re.MULTILINE)




def neutralise(source: str) -> str | None:
    """Python for a cell's source, or None for a cell that is not Python at all."""
    first, _, rest = source.lstrip("\n").partition("\n")
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            return None
        source = rest
    return "\n".join(LINE_MAGIC.sub(r"\1pass  # IPython syntax removed by the grader", line)
                     for line in source.split("\n"))


def _check_json_size(name: str, text: str) -> None:
    """Bounds the memory json.loads will take, by counting before parsing.  Brackets and commas inside
    strings count too, so these are overestimates."""
    containers = text.count("{") + text.count("[")
    if containers > MAX_NOTEBOOK_CONTAINERS:
        raise UnreadableSubmission(f"{name} is not a readable notebook: more than {MAX_NOTEBOOK_CONTAINERS:,} "
                                   "JSON objects and lists (clear its outputs and submit it again)")
    if containers + text.count(",") > MAX_NOTEBOOK_VALUES:  # every value but a container's first follows a comma
        raise UnreadableSubmission(f"{name} is not a readable notebook: more than {MAX_NOTEBOOK_VALUES:,} "
                                   "JSON values (clear its outputs and submit it again)")


def _is_skipped_locked_cell(cell: dict, index: int, last: Mapping[str, int],
                            locked_may_skip: Mapping[str, str]) -> bool:
    """The cell is the release's locked cell of a grade_id in `skip_when_unchanged` (each a locked code cell
    of the release that grading does not need): it carries that grade_id and is the last cell to carry it.
    Locked cells are the instructor's: nbgrader restores one the student edited, or turned into another
    type, from its gradebook, so what a student writes in one is never graded, here either."""
    grade_id = grade_id_of(cell)
    return grade_id is not None and grade_id in locked_may_skip and last.get(grade_id) == index


def _release_standins(sources: list[str], plain: list[bool], release: ReleaseText | None) -> list[str]:
    """`sources` with each code cell (`plain`: not already a stand-in) that is a release cell by its text
    replaced by that cell's stand-in."""
    if release is None or not release.standin_of:
        return sources
    found = release.standins([text if own else None for text, own in zip(sources, plain)])
    return [found.get(index, text) for index, text in enumerate(sources)]


def _notebook_sources(name: str, text: str, unchanged_may_skip: Mapping[str, str],
                      release: ReleaseText | None = None) -> list[str]:
    _check_json_size(name, text)
    try:
        data = loads(text, MAX_NOTEBOOK_DEPTH, MAX_NOTEBOOK_INT_DIGITS)
    except json.JSONDecodeError as exc:
        raise UnreadableSubmission(f"{name} is not valid JSON (line {exc.lineno}): not a notebook") from None
    except ValueError as exc:  # valid JSON beyond the limits: too deep, huge numbers, lone surrogates
        raise UnreadableSubmission(f"{name} is not a readable notebook: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UnreadableSubmission(f"{name} is JSON but not a Jupyter notebook (no list of cells)")
    sources, plain, chars = [], [], 0
    last = last_carriers(data["cells"])
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            continue
        # stand-ins are kept as cells, whatever the cell's type, so cell numbers stay the ones nbgrader grades
        own = False
        if is_check_cell(cell):
            source = CHECK_CELL_STANDIN
        elif _is_skipped_locked_cell(cell, index, last, unchanged_may_skip):
            source = UNCHANGED_CELL_STANDIN
        elif cell.get("cell_type") == "code":
            source, own = code_text(cell), True
        else:
            continue
        if source is not None:
            sources.append(source)
            plain.append(own)
            chars += len(sources[-1])
            _check_amount(name, len(sources), chars)
    if not sources:
        raise UnreadableSubmission(f"{name} is a notebook without code cells")
    return _release_standins(sources, plain, release)


def _python_sources(name: str, text: str, release: ReleaseText | None = None) -> list[str]:
    text = unix_newlines(text)
    _check_amount(name, 1, len(text))  # before splitting, so a huge file costs no more work than this
    sources = [s for s in CELL_MARKER.split(text) if s.strip()] or [text]
    _check_amount(name, len(sources), len(text))
    return _release_standins(sources, [True] * len(sources), release)


def _check_amount(name: str, cells: int, chars: int) -> None:
    """Bounds the work that reading and running the cells can cost the trusted side and the child."""
    if cells > MAX_CODE_CELLS:
        raise UnreadableSubmission(f"{name} has more than {MAX_CODE_CELLS} code cells")
    if chars > MAX_CODE_CHARS:
        raise UnreadableSubmission(f"{name} holds more than {MAX_CODE_CHARS:,} characters of code")


def _text(raw: bytes, name: str) -> str:
    if not raw.strip():
        raise UnreadableSubmission(f"{name} is empty")
    try:
        text = raw.decode("utf-8-sig")  # editors on Windows start files with a byte-order mark
    except UnicodeDecodeError:
        raise UnreadableSubmission(f"{name} is not UTF-8 text (a binary file?)") from None
    if not text.strip():
        raise UnreadableSubmission(f"{name} is empty")
    if "\x00" in text:
        raise UnreadableSubmission(f"{name} contains NUL bytes (a binary file?)")
    return text


def read_cells(path: Path, unchanged_may_skip: Mapping[str, str] | None = None, within: Path | None = None,
               release: ReleaseText | None = None) -> list[str]:
    """The code cells the child runs, of the submission at `path` inside the folder `within` (read as
    autograder.host.intake reads every submission).  `unchanged_may_skip` maps grade_ids to the release's
    source of locked cells that grading does not need (`Rubric.skip_when_unchanged`); the last notebook cell
    carrying one of them is that cell, whatever its source, and becomes a stand-in.  A .py file has no
    grade_ids: only its cells that are release cells by their text (`release`, `Rubric.release_text`) do not
    run, as in a notebook."""
    return cells_from(path, read_submission(path, within), unchanged_may_skip, release)


def cells_from(path: Path, raw: bytes, unchanged_may_skip: Mapping[str, str] | None = None,
               release: ReleaseText | None = None) -> list[str]:
    """`read_cells` of the bytes `raw` read from `path`."""
    name = shown_name(path.name)
    if path.suffix not in (".ipynb", ".py"):
        raise UnreadableSubmission(f"{name}: a submission is a .ipynb notebook or a .py file")
    text = _text(raw, name)
    if path.suffix == ".ipynb":
        sources = _notebook_sources(name, text, unchanged_may_skip or {}, release)
    else:
        sources = _python_sources(name, text, release)
    cells = [c for c in (neutralise(s) for s in sources) if c is not None]
    if not cells:
        raise UnreadableSubmission(f"{name} has no code cells in Python (only cell magics such as %%bash)")
    return cells
