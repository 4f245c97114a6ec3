"""The real nbgrader CLI in a temporary course and exchange, graded by the kit's preprocessor, and reusing
what grade-all graded."""
from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from autograder.authoring.demo import Course
from autograder.judging.rubric import load_rubric
from autograder.authoring.samples import student_notebook, write_notebook
from autograder.authoring.assignment import Assignment
from conftest import ASSIGNMENT, UNBIASED_VARIANCE
from conftest import leaked_hidden_source, run_cli


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    notebooks = root / "notebooks"
    students = {
        "alice": write_notebook(student_notebook("transformer_block"), notebooks / "alice.ipynb"),
        "bob": write_notebook(student_notebook("transformer_block", [UNBIASED_VARIANCE]), notebooks / "bob.ipynb"),
        "carol": write_notebook(student_notebook("transformer_block", solved=False), notebooks / "carol.ipynb"),
    }
    course = Course(root / "course", ASSIGNMENT)
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


@pytest.fixture(scope="module")
def cli_results(graded_course, tmp_path_factory) -> Path:
    """grade-all's results for the course's submissions (nbgrader's layout), graded by the CLI alone."""
    course, _, _ = graded_course
    out = tmp_path_factory.mktemp("cli") / "results"
    done = run_cli("grade-all", course.root, "-o", out, "--jobs", "2")
    assert done.returncode == 0, done.stderr
    return out


def scores(grades_csv: Path, student_column: str = "student_id") -> dict[str, float]:
    with grades_csv.open(newline="") as handle:
        return {r[student_column]: float(r["score"]) for r in csv.DictReader(handle)}


def test_nbgraders_log_says_which_tier_of_the_sandbox_graded_each_student(graded_course, cli_results):
    course, students, _ = graded_course
    tier = json.loads((cli_results / "alice.json").read_text())["extra_data"]["isolation"]
    assert tier.startswith("tier ")
    for student in [*students, "dave"]:
        assert re.search(rf"{student} graded: .* isolation {re.escape(tier)}", course.autograde_log), student


def test_gradebook_holds_exactly_the_cli_scores(graded_course, cli_results):
    _, _, grades_csv = graded_course
    nbgrader_scores, cli_scores = scores(grades_csv), scores(cli_results / "grades.csv", "student")
    assert nbgrader_scores["alice"] == cli_scores["alice"] == 100
    assert nbgrader_scores["carol"] == cli_scores["carol"] == 0
    assert 0 < nbgrader_scores["bob"] < 100
    assert nbgrader_scores["bob"] == pytest.approx(cli_scores["bob"], abs=1e-3)
    assert nbgrader_scores["dave"] == nbgrader_scores["bob"] == cli_scores["dave"]  # same file through zip_collect


def check_cell_outputs(course_root: Path, student: str) -> dict[str, list]:
    notebook = json.loads((course_root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c["outputs"] for c in notebook["cells"]
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")}


def test_autograde_reuses_grade_all_results_and_writes_what_a_fresh_grade_writes(graded_course, cli_results,
                                                                                  tmp_path):
    course, _, fresh_grades = graded_course
    reuse, broken = tmp_path / "reuse", tmp_path / "broken"
    shutil.copytree(cli_results, reuse)
    broken.mkdir()
    (broken / "dave.json").write_text('{"extra_data": ')  # first in line for dave: ignored, the next folder used
    # carol's result becomes alice's full marks, keyed on carol's cells: proof that a result is read, not redone
    planted = json.loads((reuse / "alice.json").read_text())
    planted["extra_data"]["cells_sha256"] = json.loads((reuse / "carol.json").read_text())["extra_data"]["cells_sha256"]
    (reuse / "carol.json").write_text(json.dumps(planted))
    copy = Course(tmp_path / "course", ASSIGNMENT)  # a copy, so that the other tests here see the fresh grades
    shutil.copytree(course.root, copy.root, symlinks=True)
    copy.env["AUTOGRADER_REUSE_RESULTS"] = os.pathsep.join([str(broken), str(reuse)])

    log = copy.nbgrader("autograde", ASSIGNMENT, "--force")
    for student in ("alice", "bob", "carol", "dave"):
        assert f"{student} reused: " in log, log[-3000:]
    assert " graded: " not in log  # nothing graded again
    assert f"dave: ignored {broken / 'dave.json'}" in log
    copy.nbgrader("export", "--to", str(tmp_path / "grades.csv"))
    fresh = scores(fresh_grades)
    assert fresh["carol"] == 0 and scores(tmp_path / "grades.csv") == {**fresh, "carol": 100}
    for student in ("alice", "bob", "dave"):
        assert check_cell_outputs(copy.root, student) == check_cell_outputs(course.root, student)


def test_feedback_explains_failures_without_hidden_source(graded_course):
    course, _, _ = graded_course
    feedback = (course.root / "feedback" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "unbiased variance" in feedback  # the hint for bob's bug
    assert "max abs error" in feedback
    assert "def test_" not in feedback and "student.call" not in feedback


def _sources(notebook: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])


def test_feedback_shows_the_pictures_of_failing_checks_and_never_hidden_source(graded_course):
    course, students, _ = graded_course
    release = _sources(Assignment(ASSIGNMENT).release_notebook)
    for student, notebook in {**students, "dave": students["bob"]}.items():
        feedback = (course.root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        # the student's own cells and the release are theirs to see, whatever they share with a suite
        assert leaked_hidden_source(feedback, ASSIGNMENT, _sources(notebook) + "\n" + release) == [], student
        pictures = {grade_id: [o for o in outputs if o["output_type"] == "display_data"]
                    for grade_id, outputs in check_cell_outputs(course.root, student).items()}
        if student in ("alice", "carol"):  # nothing failed, or nothing came back to draw
            assert not any(pictures.values()), student
            assert "data:image/png" not in feedback
            continue
        # bob's unbiased variance: where the error sits, in the parts it costs, shown in the feedback
        assert pictures["layer_norm"] and not pictures["attention"] and not pictures["gradient_experiment"]
        for picture in (p for shown in pictures.values() for p in shown):
            png = picture["data"]["image/png"]
            assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")
            assert f"data:image/png;base64,{png}" in feedback.replace("\n", "")
            assert "differs from the reference" in "".join(picture["data"]["text/plain"])  # a mismatch


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
