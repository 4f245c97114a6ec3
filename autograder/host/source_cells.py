"""Reads a submission file into the list of code cells the child will run, without running anything.

A notebook contributes its code cells in order; a .py file is one cell, or several where it uses `# %%`
cell markers.  IPython-only syntax is neutralised here, on the trusted side: line magics and shell escapes
become `pass`, and cells whose cell magic means "this is not Python" are dropped.

Nothing here compiles the student's code: compile() of a hostile file can take gigabytes or overflow the
parser's stack, so syntax errors are found by the sandboxed child and reported as errors of their cells.
Every step here is linear in the file's size, and the size, the amount of code and the number of cells
are bounded.

Cells that need not run when grading are replaced by a `pass` stand-in, so cell numbers stay the notebook's
own: nbgrader's autograded check cells (the hidden suite takes their place), and the instructor's cells that
the rubric lists in `skip_when_unchanged` (plots, say) while they are exactly the release's.  Whether such a
cell is unchanged is decided here against the trusted release's source, never from the submission's
metadata: a student who edits one gets it run, because it is their code then.
"""
from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any, Mapping

from autograder.protocol import clean_text, loads

MAX_SUBMISSION_BYTES = 20 << 20  # a notebook with its outputs (plots are base64 text)
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


CHECK_CELL_STANDIN = "pass  # a check cell: the hidden suite takes its place when grading\n"
UNCHANGED_CELL_STANDIN = "pass  # an instructor's cell, unchanged from the release, that grading does not need\n"


class UnreadableSubmission(Exception):
    """The file cannot be read as a submission; the message is the student-facing reason."""


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


def _unix_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


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


def _is_check_cell(cell: dict) -> bool:
    """An nbgrader autograded test cell: its visible checks compare with torch's own implementations, which
    the sandbox disables, and the hidden suite takes its place when grading, so it is not run."""
    metadata = cell.get("metadata")
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return isinstance(nbgrader, dict) and nbgrader.get("grade") is True and nbgrader.get("solution") is not True


def code_text(cell: dict[str, Any]) -> str | None:
    """A notebook code cell's source as one text with Unix line ends, as it is compared and run; None when
    its source is not text."""
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return _unix_newlines(source) if isinstance(source, str) else None


def _is_unchanged(cell: dict, source: str, unchanged_may_skip: Mapping[str, str]) -> bool:
    """The cell carries the grade_id of a cell that may be skipped and exactly that cell's released source.
    The grade_id alone proves nothing (the student wrote the metadata too), the source match does: a cell
    skipped this way is the instructor's code, wherever it sits."""
    metadata = cell.get("metadata")
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return isinstance(grade_id, str) and unchanged_may_skip.get(grade_id) == source


def _notebook_sources(name: str, text: str, unchanged_may_skip: Mapping[str, str]) -> list[str]:
    _check_json_size(name, text)
    try:
        data = loads(text, MAX_NOTEBOOK_DEPTH, MAX_NOTEBOOK_INT_DIGITS)
    except json.JSONDecodeError as exc:
        raise UnreadableSubmission(f"{name} is not valid JSON (line {exc.lineno}): not a notebook") from None
    except ValueError as exc:  # valid JSON beyond the limits: too deep, huge numbers, lone surrogates
        raise UnreadableSubmission(f"{name} is not a readable notebook: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UnreadableSubmission(f"{name} is JSON but not a Jupyter notebook (no list of cells)")
    sources, chars = [], 0
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = code_text(cell)
        if _is_check_cell(cell):  # kept as a cell, so cell numbers stay the notebook's own
            source = CHECK_CELL_STANDIN
        elif source is not None and _is_unchanged(cell, source, unchanged_may_skip):
            source = UNCHANGED_CELL_STANDIN
        if source is not None:
            sources.append(source)
            chars += len(sources[-1])
            _check_amount(name, len(sources), chars)
    if not sources:
        raise UnreadableSubmission(f"{name} is a notebook without code cells")
    return sources


def _python_sources(name: str, text: str) -> list[str]:
    text = _unix_newlines(text)
    _check_amount(name, 1, len(text))  # before splitting, so a huge file costs no more work than this
    sources = [s for s in CELL_MARKER.split(text) if s.strip()] or [text]
    _check_amount(name, len(sources), len(text))
    return sources


def _check_amount(name: str, cells: int, chars: int) -> None:
    """Bounds the work that reading and running the cells can cost the trusted side and the child."""
    if cells > MAX_CODE_CELLS:
        raise UnreadableSubmission(f"{name} has more than {MAX_CODE_CELLS} code cells")
    if chars > MAX_CODE_CHARS:
        raise UnreadableSubmission(f"{name} holds more than {MAX_CODE_CHARS:,} characters of code")


def _read_text(path: Path, name: str) -> str:
    try:
        # a FIFO would block the read and /dev/zero would never end
        if not stat.S_ISREG(path.stat().st_mode):
            raise UnreadableSubmission(f"{name} is not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_SUBMISSION_BYTES + 1)  # a bigger file is refused without reading it all
    except OSError as exc:
        raise UnreadableSubmission(f"{name} cannot be read: {clean_text(exc.strerror or exc, 200)}") from None
    if len(raw) > MAX_SUBMISSION_BYTES:
        raise UnreadableSubmission(f"{name} is larger than {MAX_SUBMISSION_BYTES >> 20} MB")
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


def read_cells(path: Path, unchanged_may_skip: Mapping[str, str] | None = None) -> list[str]:
    """The code cells the child runs.  `unchanged_may_skip` maps grade_ids to the release's source of cells
    that grading does not need (`Rubric.skip_when_unchanged`); a notebook cell with that grade_id and exactly
    that source becomes a stand-in.  A .py file has no grade_ids, so every cell of it runs."""
    # a file name can hold bytes that are not UTF-8, escape sequences, line breaks
    name = clean_text(path.name, 200).replace("\n", " ").replace("\t", " ")
    if path.suffix not in (".ipynb", ".py"):
        raise UnreadableSubmission(f"{name}: a submission is a .ipynb notebook or a .py file")
    text = _read_text(path, name)
    if path.suffix == ".ipynb":
        sources = _notebook_sources(name, text, unchanged_may_skip or {})
    else:
        sources = _python_sources(name, text)
    cells = [c for c in (neutralise(s) for s in sources) if c is not None]
    if not cells:
        raise UnreadableSubmission(f"{name} has no code cells in Python (only cell magics such as %%bash)")
    return cells
