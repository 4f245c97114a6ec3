"""Grades as an LMS imports them: Canvas's gradebook-import CSV and Moodle's grade-import CSV, with a column per
rubric part besides the assignment's total.  Pure functions from grade rows to CSV text; where the rows come
from (nbgrader's gradebook, grade-all's folder) is autograder.nbgrader.lms's and autograder.commands.lms's business.

Canvas (Grades > Import; what its GradebookImporter reads): a header row `Student, ID, SIS User ID, SIS Login
ID, Section`, then one column per assignment.  A column named `Title (12345)` updates the assignment whose id
is 12345; any other name creates a new assignment of that name.  The row under the header whose first cell
reads `Points Possible` gives each new assignment its points.  Then one row per student: Canvas finds the
student by `ID` (its own user id, nbgrader's lms_user_id when LTI filled it in), else by `SIS User ID` or
`SIS Login ID`, else by name.  A blank cell changes nothing.

Moodle (Grades > Import > CSV file): a header row and one row per user.  On import "Identify user by" maps one
column (here `Username`, `Email address` or `ID number`) to the user field of that name, and each other column
to a grade item, or to "new grade item" (created with the column's name and a maximum grade of 100: set the
maximum before importing a part worth less, or Moodle keeps 100).  There is no points row.

Each part's column carries the part's score before any late penalty; the total column carries the grade the
gradebook keeps (after the penalty).  Student ids and names are the students' own text: every text cell that a
spreadsheet would read as a formula (starting with = + - @, a tab or a carriage return) gets a leading single
quote, a tab or line break is written as \\t, \\r or \\n, other control characters become U+FFFD, and two
students who would be written alike are refused.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from autograder.protocol import clean_text

FORMATS = ("canvas", "moodle")
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
CANVAS_ID_COLUMNS = ("SIS Login ID", "SIS User ID")  # where the kit's student id goes
MOODLE_ID_COLUMNS = {"username": "Username", "email": "Email address", "idnumber": "ID number"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MAX_CELL = 255


@dataclass(frozen=True)
class GradeRow:
    """One student's grade in one assignment: the total the gradebook keeps, and each part's score."""
    student: str  # the id nbgrader or grade-all knows the student by
    total: float
    parts: Mapping[str, float] = field(default_factory=dict)
    name: str = ""  # display name (default: the id)
    email: str = ""
    lms_user_id: str = ""  # Canvas's own user id


@dataclass(frozen=True)
class AssignmentGrades:
    name: str  # the LMS column's name
    max_total: float
    parts: Sequence[tuple[str, float]]  # (part, points), in the rubric's order
    rows: Sequence[GradeRow]
    lms_id: str = ""  # Canvas: the existing assignment to update (its column becomes `name (lms_id)`)
    part_ids: Mapping[str, str] = field(default_factory=dict)  # the same, per part


def safe_cell(value: object) -> str:
    """Text from a student (an id, a name) as a CSV cell no spreadsheet or LMS runs as a formula: one line (a
    tab, CR or LF is written \\t, \\r, \\n, so that ids differing only there stay apart), other control
    characters U+FFFD, and a leading single quote where it would start with = + - @, a tab, a CR or a quote."""
    text = value if isinstance(value, str) else str(value)
    formula = text.startswith((*FORMULA_STARTS, "'"))  # a quote too: `=x` and `'=x` stay two students
    text = clean_text(text.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n"), MAX_CELL)
    return "'" + text if formula else text


def number(value: float) -> str:
    """A score as both LMSs parse it: a plain decimal, no exponent or thousands separator, at most 4 places."""
    if not math.isfinite(value):
        raise ValueError(f"score {value!r} is not a number")
    text = f"{round(value, 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def part_column(assignment: str, part: str) -> str:
    return f"{assignment}: {part}"


def _columns(assignment: AssignmentGrades, with_parts: bool, canvas_ids: bool) -> list[tuple[str, float]]:
    def named(title: str, lms_id: str) -> str:
        title = safe_cell(title)
        return f"{title} ({lms_id})" if canvas_ids and lms_id else title

    columns = [(named(assignment.name, assignment.lms_id), assignment.max_total)]
    if with_parts:
        columns += [(named(part_column(assignment.name, part), assignment.part_ids.get(part, "")), points)
                    for part, points in assignment.parts]
    return columns


def _scores(assignment: AssignmentGrades, row: GradeRow | None, with_parts: bool) -> list[str]:
    if row is None:  # not in this assignment's rows: blank, which changes nothing in either LMS
        return [""] * (1 + (len(assignment.parts) if with_parts else 0))
    cells = [number(row.total)]
    if with_parts:
        cells += [number(row.parts[part]) if part in row.parts else "" for part, _ in assignment.parts]
    return cells


def _students(assignments: Sequence[AssignmentGrades]) -> list[GradeRow]:
    """Every student of any assignment, once, in id order (the first row seen gives the name and email)."""
    seen: dict[str, GradeRow] = {}
    for assignment in assignments:
        for row in assignment.rows:
            seen.setdefault(row.student, row)
    return [seen[s] for s in sorted(seen)]


def _by_student(assignment: AssignmentGrades) -> dict[str, GradeRow]:
    rows: dict[str, GradeRow] = {}
    for row in assignment.rows:
        if row.student in rows:
            raise ValueError(f"student {row.student!r} has two rows in {assignment.name!r}")
        rows[row.student] = row
    return rows


def _unique(cells: list[str], what: str) -> None:
    """Two students written alike would get each other's grades: refused, naming them."""
    seen: set[str] = set()
    for cell in cells:
        if cell in seen:
            raise ValueError(f"two students would both be written {cell!r} in the {what} column")
        seen.add(cell)


def _text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)  # RFC 4180, as both LMSs write their exports
    return buffer.getvalue()


def canvas_csv(assignments: Sequence[AssignmentGrades], *, id_column: str = "SIS Login ID",
               with_parts: bool = True) -> str:
    """Canvas's gradebook-import CSV.  `id_column` is where each student's id goes: "SIS Login ID" (a login,
    as JupyterHub's user names usually are) or "SIS User ID"; Canvas's own user id goes in `ID` when known."""
    if id_column not in CANVAS_ID_COLUMNS:
        raise ValueError(f"id_column {id_column!r} is not one of {', '.join(CANVAS_ID_COLUMNS)}")
    columns = [c for a in assignments for c in _columns(a, with_parts, canvas_ids=True)]
    _unique([safe_cell(s.student) for s in _students(assignments)], id_column)
    rows = [[*CANVAS_STUDENT_COLUMNS, *(title for title, _ in columns)],
            [CANVAS_POINTS_ROW, "", "", "", "", *(number(points) for _, points in columns)]]
    by_student = [_by_student(a) for a in assignments]
    for student in _students(assignments):
        ids = {id_column: safe_cell(student.student)}
        rows.append([safe_cell(student.name or student.student), safe_cell(student.lms_user_id),
                     ids.get("SIS User ID", ""), ids.get("SIS Login ID", ""), "",
                     *(cell for a, rows_of in zip(assignments, by_student)
                       for cell in _scores(a, rows_of.get(student.student), with_parts))])
    return _text(rows)


def moodle_csv(assignments: Sequence[AssignmentGrades], *, id_column: str = "username",
               with_parts: bool = True) -> str:
    """Moodle's grade-import CSV: the identifier column (`id_column`: username = the student's id, email or
    idnumber = the student's id too, for a site whose ID numbers are the logins), the full name, then a column
    per grade item."""
    if id_column not in MOODLE_ID_COLUMNS:
        raise ValueError(f"id_column {id_column!r} is not one of {', '.join(MOODLE_ID_COLUMNS)}")
    columns = [c for a in assignments for c in _columns(a, with_parts, canvas_ids=False)]
    students = _students(assignments)
    if id_column == "email" and (unknown := [s.student for s in students if not s.email]):
        raise ValueError(f"no email address to identify {', '.join(map(repr, unknown))} by")
    _unique([safe_cell(s.email if id_column == "email" else s.student) for s in students],
            MOODLE_ID_COLUMNS[id_column])
    rows = [[MOODLE_ID_COLUMNS[id_column], "Full name", *(title for title, _ in columns)]]
    by_student = [_by_student(a) for a in assignments]
    for student in students:
        identifier = student.email if id_column == "email" else student.student
        rows.append([safe_cell(identifier), safe_cell(student.name or student.student),
                     *(cell for a, rows_of in zip(assignments, by_student)
                       for cell in _scores(a, rows_of.get(student.student), with_parts))])
    return _text(rows)


def render(fmt: str, assignments: Sequence[AssignmentGrades], *, id_column: str = "",
           with_parts: bool = True) -> str:
    """`fmt` (one of FORMATS) as CSV text; `id_column` "" is the format's default."""
    if fmt == "canvas":
        return canvas_csv(assignments, id_column=id_column or "SIS Login ID", with_parts=with_parts)
    if fmt == "moodle":
        return moodle_csv(assignments, id_column=id_column or "username", with_parts=with_parts)
    raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
