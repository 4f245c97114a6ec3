"""Grades into the LMS: Canvas's and Moodle's grade-import CSV, read back by parsers written to the LMSs' own
rules; from grade-all's folder (the `lms` command) and from nbgrader's gradebook (the export plugin); the
per-hour late penalty and extensions.  Nothing is graded here: results and gradebooks are made by hand."""
from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.commands import main as cli
from autograder.grading.batch import Entry, result_path, write_grades_csv
from autograder.grading.rubric import PartScore, load_rubric
from autograder.grading.results_json import gradescope
from autograder.grading.result import GradeResult
from autograder.nbgrader.lms import LmsExport, PerHourPenalty, assignment_grades, grant_extension, main
from autograder.reports import lms

ASSIGNMENT = "transformer_block"
HOSTILE = ["=HYPERLINK(\"http://evil\",\"x\")", "+1+1", "-2", "@SUM(A1)", "\tcmd", "\rcmd", "a,b\"c\nd",
           "=1\r\n=2"]
FORMULA = ("=", "+", "-", "@", "\t", "\r")


# --- parsers written to each LMS's documented format, not to the writer -------------------------------------

def read_canvas(text: str) -> dict:
    """What Canvas's gradebook import reads: the header (Student, ID, [SIS User ID, SIS Login ID,] Section, then
    assignment columns, `Title (id)` for an existing one), the `Points Possible` row, one row per student."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = rows[0]
    assert header[0] == "Student" and header[1] == "ID"
    assert header[2] == "SIS User ID" and header[3] == "SIS Login ID" and header[4] == "Section"
    columns = []
    for title in header[5:]:
        match = re.fullmatch(r"(.*)\s\((\d+)\)", title)
        columns.append((match[1], match[2]) if match else (title, None))
        assert not re.search(r"Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade",
                             title)  # Canvas would drop such a column as one of its own read-only ones
    assert re.search("Points Possible", rows[1][0]) and rows[1][1:5] == ["", "", "", ""]
    points = [float(p) for p in rows[1][5:]]
    students = {}
    for row in rows[2:]:
        assert len(row) == len(header)
        assert not all(c.strip() in ("", "Muted") for c in row)  # Canvas skips such a row
        key = row[3] or row[2] or row[1]
        assert key not in students
        students[key] = {"name": row[0], "id": row[1], "sis_user": row[2], "sis_login": row[3],
                         "scores": [float(c) if c else None for c in row[5:]]}
    return {"columns": columns, "points": points, "students": students}


def read_moodle(text: str, identifier: str = "Username") -> dict:
    """What Moodle's CSV grade import reads: a header, one row per user; the identifier column is mapped to a
    user field, every other column to a grade item (numbers with a decimal point)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = rows[0]
    assert header[0] == identifier and len(set(header)) == len(header)
    users = {}
    for row in rows[1:]:
        assert len(row) == len(header) and row[0] not in users
        users[row[0]] = dict(zip(header[1:], row[1:]))
    return {"items": header[2:], "users": users}


def sample(rows: list[lms.GradeRow] | None = None, **kw) -> lms.AssignmentGrades:
    rows = rows or [lms.GradeRow("bob", 62.5, {"layer_norm": 12.5, "attention": 20}, name="Bob Builder"),
                    lms.GradeRow("alice", 100, {"layer_norm": 20, "attention": 20}, lms_user_id="4711")]
    return lms.AssignmentGrades(ASSIGNMENT, 100, [("layer_norm", 20), ("attention", 20)], rows, **kw)


def test_canvas_csv_reads_back_with_a_points_row_and_a_column_per_part():
    text = lms.canvas_csv([sample(lms_id="12345", part_ids={"attention": "678"})])
    assert text.endswith("\r\n")
    sheet = read_canvas(text)
    assert sheet["columns"] == [(ASSIGNMENT, "12345"), (f"{ASSIGNMENT}: layer_norm", None),
                                (f"{ASSIGNMENT}: attention", "678")]
    assert sheet["points"] == [100, 20, 20]
    assert list(sheet["students"]) == ["alice", "bob"]  # by id
    assert sheet["students"]["bob"] == {"name": "Bob Builder", "id": "", "sis_user": "", "sis_login": "bob",
                                        "scores": [62.5, 12.5, 20]}
    assert sheet["students"]["alice"]["id"] == "4711" and sheet["students"]["alice"]["name"] == "alice"
    by_user = read_canvas(lms.canvas_csv([sample()], id_column="SIS User ID", with_parts=False))
    assert by_user["columns"] == [(ASSIGNMENT, None)] and by_user["points"] == [100]
    assert by_user["students"]["bob"]["sis_user"] == "bob" and by_user["students"]["bob"]["sis_login"] == ""


def test_moodle_csv_reads_back_with_an_identifier_column_and_a_column_per_part():
    users = read_moodle(lms.moodle_csv([sample()]))
    assert users["items"] == [ASSIGNMENT, f"{ASSIGNMENT}: layer_norm", f"{ASSIGNMENT}: attention"]
    assert users["users"]["bob"] == {"Full name": "Bob Builder", ASSIGNMENT: "62.5",
                                     f"{ASSIGNMENT}: layer_norm": "12.5", f"{ASSIGNMENT}: attention": "20"}
    assert float(users["users"]["alice"][ASSIGNMENT]) == 100
    emails = [lms.GradeRow("bob", 1, {}, email="bob@example.org")]
    assert list(read_moodle(lms.moodle_csv([sample(emails)], id_column="email"), "Email address")["users"]) == [
        "bob@example.org"]
    with pytest.raises(ValueError, match="no email"):
        lms.moodle_csv([sample()], id_column="email")


def test_two_assignments_share_one_row_per_student_and_a_missing_grade_is_blank():
    other = lms.AssignmentGrades("gpt_decoder", 50, [], [lms.GradeRow("carol", 25.25)])
    sheet = read_canvas(lms.canvas_csv([sample(), other]))
    assert [c for c, _ in sheet["columns"]][-1] == "gpt_decoder" and sheet["points"][-1] == 50
    assert sheet["students"]["carol"]["scores"] == [None, None, None, 25.25]
    assert sheet["students"]["bob"]["scores"][-1] is None


def test_numbers_are_plain_decimals_both_lms_parse():
    assert [lms.number(v) for v in (100, 62.5, 1 / 3, 1e-7, -0.0, 12345678.0)] == [
        "100", "62.5", "0.3333", "0", "0", "12345678"]
    with pytest.raises(ValueError):
        lms.number(float("nan"))


def test_hostile_student_ids_and_names_never_start_a_formula():
    rows = [lms.GradeRow(student, 10, {"layer_norm": 1}, name=student) for student in HOSTILE]
    canvas = read_canvas(lms.canvas_csv([sample(rows)]))
    moodle = read_moodle(lms.moodle_csv([sample(rows)]))
    assert len(canvas["students"]) == len(moodle["users"]) == len(HOSTILE)  # one row each, nothing split
    cells = [c for s in canvas["students"].values() for c in (s["name"], s["sis_login"])]
    cells += [c for user, fields in moodle["users"].items() for c in (user, fields["Full name"])]
    for cell in cells:
        assert cell.startswith("'") or not cell.startswith(FORMULA), cell
        assert "\n" not in cell and "\r" not in cell and "\t" not in cell
    assert "'=HYPERLINK(\"http://evil\",\"x\")" in canvas["students"]
    assert lms.safe_cell("alice") == "alice" and lms.safe_cell("o'neil-2") == "o'neil-2"
    assert lms.safe_cell("'=x") == "''=x"  # and `=x` is '=x: two students, written apart
    assert lms.safe_cell("\tcmd") == "'\\tcmd" and lms.safe_cell("\rcmd") == "'\\rcmd"
    twins = [lms.GradeRow("a\x01", 1), lms.GradeRow("a\x02", 2)]  # both written a\ufffd: refused
    for write in (lms.canvas_csv, lms.moodle_csv):
        with pytest.raises(ValueError, match="two students would both be written"):
            write([sample(twins)])
    # scores are the kit's own numbers: never quoted, so they stay numbers
    assert all(s["scores"] == [10, 1, None] for s in canvas["students"].values())


# --- from grade-all's output folder ---------------------------------------------------------------------------

def results_folder(folder: Path, students: dict[str, tuple[float, dict[str, float]]]) -> Path:
    """A grade-all output folder as grade-all writes it: <student>.json (Gradescope's score and extra_data's
    parts) and grades.csv (written by grade-all's own function)."""
    rubric = load_rubric(ASSIGNMENT)
    folder.mkdir(parents=True)
    for student, (total, parts) in students.items():
        scores = [PartScore(p, parts.get(p.name, p.points), [], ()) for p in rubric.parts]
        assert sum(s.score for s in scores) == total
        result = GradeResult(f"{student}.ipynb", "", ASSIGNMENT, scores, rubric.max_score)
        result_path(folder, student).write_text(json.dumps(gradescope(result), sort_keys=True))
    write_grades_csv(folder, [Entry(s, folder / f"{s}.ipynb", folder) for s in students], rubric)
    return folder


def test_the_lms_command_writes_grade_alls_results_for_canvas_and_moodle(tmp_path, capsys):
    rubric = load_rubric(ASSIGNMENT)
    folder = results_folder(tmp_path / "results", {"alice": (100, {}), "bob": (96.25, {"layer_norm": 11.25}),
                                                   "=cmd|' -C calc'!A0": (0, {p.name: 0 for p in rubric.parts})})
    out = tmp_path / "canvas.csv"
    assert cli.main(["lms", str(folder), "--format", "canvas", "-o", str(out), "--title", "Transformer block",
                     "--canvas-id", "98765", "--canvas-part-id", "layer_norm=111"]) == 0
    sheet = read_canvas(out.read_text(encoding="utf-8"))
    assert sheet["columns"] == [("Transformer block", "98765"), ("Transformer block: layer_norm", "111"),
                                *((f"Transformer block: {p.name}", None) for p in rubric.parts[1:])]
    assert sheet["points"] == [rubric.max_score, *(p.points for p in rubric.parts)]
    assert sheet["students"]["bob"]["scores"] == [96.25, 11.25, *(p.points for p in rubric.parts[1:])]
    assert sheet["students"]["'=cmd|' -C calc'!A0"]["scores"] == [0] * (1 + len(rubric.parts))
    assert "3 students, canvas" in capsys.readouterr().err
    moodle = tmp_path / "moodle.csv"
    assert cli.main(["lms", str(folder), "--format", "moodle", "-o", str(moodle), "--no-parts"]) == 0
    users = read_moodle(moodle.read_text(encoding="utf-8"))
    assert users["items"] == [ASSIGNMENT] and users["users"]["bob"][ASSIGNMENT] == "96.25"


def test_the_lms_command_refuses_what_is_not_a_finished_grade_all_run(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "x.csv"
    assert cli.main(["lms", str(tmp_path / "empty"), "--format", "canvas", "-o", str(out)]) == 2
    assert "no grades.csv" in capsys.readouterr().err
    folder = results_folder(tmp_path / "results", {"alice": (100, {})})
    assert cli.main(["lms", str(folder), "--format", "moodle", "-o", str(out), "--id-column", "SIS Login ID"]) == 2
    assert cli.main(["lms", str(folder), "--format", "canvas", "-o", str(out), "--canvas-part-id", "nope=1"]) == 2
    (folder / "alice.json").write_text("{")
    assert cli.main(["lms", str(folder), "--format", "canvas", "-o", str(out)]) == 2
    assert "alice.json: not a result of grade-all" in capsys.readouterr().err
    assert not out.exists()


# --- from nbgrader's gradebook ----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def alembic_on_path(monkeypatch):
    """nbgrader's Gradebook runs the `alembic` program by name: the environment's bin folder must be on PATH."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


DUE = datetime.datetime(2025, 3, 1, 12, 0)


def gradebook(path: Path) -> str:
    """A gradebook as autograde leaves it: the kit's assignment with its five test cells, alice graded in full
    and 2 hours late with a penalty of 40, bob partly, on time, carol with nothing handed in."""
    rubric = load_rubric(ASSIGNMENT)
    url = f"sqlite:///{path}"
    with Gradebook(url) as gb:
        gb.add_assignment(ASSIGNMENT, duedate=DUE)
        gb.add_notebook(ASSIGNMENT, ASSIGNMENT)
        for part in rubric.parts:
            gb.add_grade_cell(part.name, ASSIGNMENT, ASSIGNMENT, max_score=part.points, cell_type="code")
        gb.add_grade_cell("essay", ASSIGNMENT, ASSIGNMENT, max_score=0, cell_type="markdown")  # not a part
        gb.add_student("alice", first_name="Alice", last_name="Liddell", email="alice@example.org",
                       lms_user_id="4711")
        gb.add_student("bob", email="bob@example.org")
        gb.add_student("carol", email="carol@example.org")
        for student, late, scores in [("alice", 2, {}), ("bob", 0, {"layer_norm": 11.5})]:
            gb.add_submission(ASSIGNMENT, student, timestamp=DUE + datetime.timedelta(hours=late, minutes=-1))
            for part in rubric.parts:
                grade = gb.find_grade(part.name, ASSIGNMENT, ASSIGNMENT, student)
                grade.auto_score = scores.get(part.name, part.points)
            gb.find_grade("essay", ASSIGNMENT, ASSIGNMENT, student).auto_score = 0
            gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).late_submission_penalty = 40 if late else None
        gb.db.commit()
    return url


def test_the_export_plugin_writes_the_gradebook_with_its_late_penalty_and_a_column_per_part(tmp_path):
    url = gradebook(tmp_path / "gradebook.db")
    rubric = load_rubric(ASSIGNMENT)
    canvas, moodle = tmp_path / "canvas.csv", tmp_path / "moodle.csv"
    with Gradebook(url) as gb:
        LmsExport(to=str(canvas)).export(gb)
        LmsExport(to=str(moodle), lms="moodle", id_column="email", parts=False).export(gb)
        grades = assignment_grades(gb, ASSIGNMENT)
    assert [p for p, _ in grades.parts] == [p.name for p in rubric.parts]  # the rubric's, not the essay
    sheet = read_canvas(canvas.read_text(encoding="utf-8"))
    assert sheet["points"] == [rubric.max_score, *(p.points for p in rubric.parts)]
    alice, bob, carol = (sheet["students"][s] for s in ("alice", "bob", "carol"))
    assert alice["name"] == "Alice Liddell" and alice["id"] == "4711"
    assert alice["scores"] == [60, *(p.points for p in rubric.parts)]  # total after the penalty, parts before
    assert bob["scores"][:2] == [rubric.max_score - rubric.parts[0].points + 11.5, 11.5]
    assert carol["scores"] == [0] * (1 + len(rubric.parts))  # nothing handed in: 0, as nbgrader's own export
    users = read_moodle(moodle.read_text(encoding="utf-8"), "Email address")
    assert users["users"]["alice@example.org"] == {"Full name": "Alice Liddell", ASSIGNMENT: "60"}


def test_the_per_hour_penalty_counts_each_started_hour_after_the_grace_and_never_exceeds_the_score():
    penalty = PerHourPenalty(percent_per_hour=10, grace_minutes=5)
    assert penalty.late_submission_penalty("s", 80, 0) is None
    assert penalty.late_submission_penalty("s", 80, 5 * 60) is None
    assert penalty.late_submission_penalty("s", 80, 5 * 60 + 1) == pytest.approx(8)
    assert penalty.late_submission_penalty("s", 80, 3.5 * 3600) == pytest.approx(32)
    assert penalty.late_submission_penalty("s", 80, 30 * 3600) == 80


def test_an_extension_moves_one_students_due_date_in_the_gradebook(tmp_path, capsys):
    url = gradebook(tmp_path / "gradebook.db")
    with Gradebook(url) as gb:
        gb.add_student("dave")
    grant_extension(url, ASSIGNMENT, "alice", hours=3)
    assert main(["extension", ASSIGNMENT, "dave", "--days", "1", "--db", url, "--course-id", "default_course"]) == 0
    assert "dave: extension of 1 d" in capsys.readouterr().out
    with Gradebook(url) as gb:
        alice, dave = gb.find_submission(ASSIGNMENT, "alice"), gb.find_submission(ASSIGNMENT, "dave")
        assert alice.duedate == DUE + datetime.timedelta(hours=3) and alice.total_seconds_late == 0
        assert dave.duedate == DUE + datetime.timedelta(days=1)
        assert gb.find_submission(ASSIGNMENT, "bob").duedate == DUE
    assert main(["extension", "nope", "dave", "--hours", "1", "--db", url]) == 2
