"""The real nbgrader CLI in a temporary course and exchange, graded by the kit's preprocessor."""
from __future__ import annotations

import csv
import json
import zipfile

import pytest

from autograder.demo import ASSIGNMENT, Course
from autograder.rubric import load_rubric
from autograder.samples import UNBIASED_VARIANCE, student_notebook, write_notebook
from conftest import run_cli


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    notebooks = root / "notebooks"
    students = {
        "alice": write_notebook(student_notebook(), notebooks / "alice.ipynb"),
        "bob": write_notebook(student_notebook([UNBIASED_VARIANCE]), notebooks / "bob.ipynb"),
        "carol": write_notebook(student_notebook(solved=False), notebooks / "carol.ipynb"),
    }
    course = Course(root / "course")
    course.create()
    course.release()
    for student, notebook in students.items():
        course.student_submits(student, notebook)
    archive = root / "lms.zip"
    with zipfile.ZipFile(archive, "w") as bundle:  # dave hands in through the LMS instead
        bundle.write(students["bob"], f"dave_1001_2002_{ASSIGNMENT}.ipynb")
    course.zip_collect(archive)
    grades = course.grade([*students, "dave"])
    return course, students, grades


def test_gradebook_holds_exactly_the_cli_scores(graded_course, tmp_path):
    course, students, grades_csv = graded_course
    with grades_csv.open(newline="") as handle:
        nbgrader_scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(handle)}
    done = run_cli("grade-all", students["alice"].parent, "-o", tmp_path / "cli")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "cli" / "grades.csv").open(newline="") as handle:
        cli_scores = {r["student"]: float(r["score"]) for r in csv.DictReader(handle)}
    assert nbgrader_scores["alice"] == cli_scores["alice"] == 100
    assert nbgrader_scores["carol"] == cli_scores["carol"] == 0
    assert 0 < nbgrader_scores["bob"] < 100
    assert nbgrader_scores["bob"] == pytest.approx(cli_scores["bob"], abs=1e-3)
    assert nbgrader_scores["dave"] == nbgrader_scores["bob"]  # same file through zip_collect


def test_feedback_explains_failures_without_hidden_source(graded_course):
    course, _, _ = graded_course
    feedback = (course.root / "feedback" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "unbiased variance" in feedback  # the hint for bob's bug
    assert "max abs error" in feedback
    assert "def test_" not in feedback and "student.call" not in feedback


def test_test_cells_carry_nbgraders_partial_credit(graded_course):
    course, _, _ = graded_course
    notebook = json.loads((course.root / "autograded" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    outputs = {c["metadata"]["nbgrader"]["grade_id"]: c["outputs"] for c in notebook["cells"]
               if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"}
    assert outputs["layer_norm"][0]["output_type"] == "execute_result"  # partial credit
    assert 0 < float("".join(outputs["layer_norm"][0]["data"]["text/plain"])) < 20
    assert [o["output_type"] for o in outputs["gradient_experiment"]] == ["stream"]  # full marks
    carol = json.loads((course.root / "autograded" / "carol" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    checks = [(c["metadata"]["nbgrader"]["grade_id"], c["outputs"]) for c in carol["cells"]
              if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"]
    # exactly one autograded check cell per rubric part, or the loop below could pass over no cells at all
    grade_ids = sorted(grade_id for grade_id, _ in checks)
    assert len(checks) == 5 and grade_ids == sorted(p.name for p in load_rubric(ASSIGNMENT).parts), grade_ids
    for grade_id, outputs in checks:
        assert outputs and outputs[0]["output_type"] == "error", (grade_id, outputs)
