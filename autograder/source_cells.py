"""Reads a submission file into the list of code cells the child will run, without running anything.

A notebook contributes its code cells in order; a .py file is one cell, or several where it uses `# %%`
cell markers.  IPython-only syntax is neutralised here, on the trusted side: line magics and shell escapes
become `pass`, and cells whose cell magic means "this is not Python" are dropped.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

MAX_SUBMISSION_BYTES = 20 << 20
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}  # body is still Python
LINE_MAGIC = re.compile(r"^(\s*)(?:[%!]|\w+\s*=\s*[%!](?!=)).*$")
CELL_MARKER = re.compile(r"^# %%.*$", re.MULTILINE)


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


def _notebook_sources(path: Path, text: str) -> list[str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnreadableSubmission(f"{path.name} is not valid JSON (line {exc.lineno}): not a notebook") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UnreadableSubmission(f"{path.name} is JSON but not a Jupyter notebook (no list of cells)")
    sources = []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if isinstance(source, str):
            sources.append(source)
    if not sources:
        raise UnreadableSubmission(f"{path.name} is a notebook without code cells")
    return sources


def read_cells(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnreadableSubmission(f"{path.name} cannot be read: {exc.strerror}") from None
    if not raw.strip():
        raise UnreadableSubmission(f"{path.name} is empty")
    if len(raw) > MAX_SUBMISSION_BYTES:
        raise UnreadableSubmission(f"{path.name} is larger than {MAX_SUBMISSION_BYTES >> 20} MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableSubmission(f"{path.name} is not UTF-8 text (a binary file?)") from None
    if "\x00" in text:
        raise UnreadableSubmission(f"{path.name} contains NUL bytes (a binary file?)")
    if path.suffix == ".ipynb":
        sources = _notebook_sources(path, text)
    elif path.suffix == ".py":
        sources = [s for s in CELL_MARKER.split(text) if s.strip()] or [text]
    else:
        raise UnreadableSubmission(f"{path.name}: a submission is a .ipynb notebook or a .py file")
    cells = [c for c in (neutralise(s) for s in sources) if c is not None]
    if not any(_compiles(c) for c in cells):
        raise UnreadableSubmission(f"{path.name} has no cell that is valid Python")
    return cells


def _compiles(source: str) -> bool:
    try:
        compile(source, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True
