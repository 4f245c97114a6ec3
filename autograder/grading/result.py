"""What grading one submission produced: the one result model every writer (results.json, grades.csv,
nbgrader's cells) is fed.  Plain data, no torch: a process that only coordinates or writes grades never
imports the judge."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from autograder.judging.resemblance import Resemblance
from autograder.grading.rubric import PartScore
from autograder.model.load_report import LoadReport


@dataclass
class GradeResult:
    submission: str
    sha256: str
    assignment: str
    parts: list[PartScore]
    max_score: float
    load: LoadReport = field(default_factory=LoadReport)
    unreadable: str = ""
    cells_sha256: str = ""  # what was graded (autograder.grading.fingerprint.cells_sha256); "" when nothing could be read
    printed: str = ""
    resembles: list[Resemblance] = field(default_factory=list)  # torch's own code the source holds, for review
    seconds: float = 0.0
    # grade_id -> points of the cells left to the instructor (Rubric.graded_by_hand): in neither score nor maximum
    graded_by_hand: dict[str, float] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.parts), 4)


def as_text(name: str) -> str:
    """A file name (or text holding one) as valid UTF-8: bytes that are not UTF-8, which Python carries as
    lone surrogates, become backslash escapes such as \\xe9, so that JSON, CSV and stdout never fail on it."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def display_name(name: str, limit: int | None = None) -> str:
    """A file or student name as every writer shows it (grades.csv, results.json, JUnit, HTML, the terminal,
    logs): the name, with each character that is not printable shown as a visible escape, so that no name
    moves a cursor, sets a terminal's title, reorders a line or breaks one.  Control characters (C0, DEL,
    C1), bidi overrides and isolates, zero-width and other invisible characters become \\n, \\t, \\r, \\xNN,
    \\uNNNN or \\UNNNNNNNN; a byte that is not UTF-8 (a lone surrogate from os.fsdecode) becomes \\xNN, as in
    as_text.  Shown names are printable text: showing one again changes nothing, so a writer may clean a name
    that is already clean.  Names that differ only where one has an escape's spelling and the other the
    character (a file called `a\\x1b.py` and one called a-ESC.py) show alike: autograder.grading.batch refuses two
    such files as submissions of one student.  `limit` clips the shown name (with "…") for fields of bounded
    length."""
    text = name if type(name) is str else as_text(str(name))
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escape(c) for c in text)
    if limit is not None and len(text) > limit:
        text = text[:max(limit - 1, 0)] + "…" if limit > 0 else ""
    return text


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # how os.fsdecode carries a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_cell(text: str) -> str:
    """A cell of grades.csv that can hold a name: one a spreadsheet would read as a formula (it starts with
    =, +, -, @, a tab or a carriage return; OWASP's CSV injection advice) is prefixed with a single quote, which
    spreadsheets show as text.  A cell that already starts with a quote gets one too, so that `=x` and `'=x`
    stay two names."""
    return f"'{text}" if text.startswith(CSV_FORMULA_STARTS) else text


def name_of_csv_cell(cell: str) -> str:
    """The name a grades.csv cell holds (csv_cell undone): every cell that starts with a quote got it from
    csv_cell, so reading one back (autograder.commands.lms, a script of the course's) finds `<name>.json` again."""
    return cell[1:] if cell.startswith("'") else cell
