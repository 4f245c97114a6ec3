"""Late penalties through the real nbgrader with the kit's SandboxedGrading in place of Execute: nbgrader's
AssignLatePenalties runs after SaveAutoGrades and applies the kit's per-hour penalty once; a regrade gives the
same penalty again, not a second one; an extension (nbgrader's own, in the gradebook) moves one student's due
date.  Two students, graded twice."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.authoring.demo import Course
from autograder.grading.rubric import load_rubric
from conftest import ASSIGNMENT, two_student_course
from test_lms import read_canvas

DUE = "2025-03-01 12:00:00 UTC"
SUBMITTED = {"alice": "2025-03-01 15:30:00.000000 UTC",  # 3.5 h late: 4 started hours, 40 %
             "bob": "2025-03-01 13:10:00.000000 UTC"}  # 1 h 10 min late, with an extension of 2 h: on time
PENALTY = ["--AssignLatePenalties.plugin_class=autograder.nbgrader.lms.PerHourPenalty",
           "--PerHourPenalty.percent_per_hour=10"]


def exported(course: Course, folder: Path) -> SimpleNamespace:
    folder.mkdir(parents=True, exist_ok=True)
    course.nbgrader("export", "--to", str(folder / "grades.csv"))
    course.nbgrader("export", "--exporter=autograder.nbgrader.lms.LmsExport", "--to", str(folder / "canvas.csv"))
    with (folder / "grades.csv").open(newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    return SimpleNamespace(rows=rows, canvas=read_canvas((folder / "canvas.csv").read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def late_course(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("late")
    course = two_student_course(root)
    course.nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}")
    course.nbgrader("collect", ASSIGNMENT)
    for student, when in SUBMITTED.items():  # as if handed in then: collect copied the exchange's timestamp
        (course.root / "submitted" / student / ASSIGNMENT / "timestamp.txt").write_text(when)
    extension = subprocess.run([sys.executable, "-m", "autograder.nbgrader.lms", "extension", ASSIGNMENT, "bob",
                                "--hours", "2"], env=course.env, capture_output=True, text=True, timeout=120)
    assert extension.returncode == 0, extension.stderr
    first_log = course.nbgrader("autograde", ASSIGNMENT, "--force", *PENALTY)
    first = exported(course, root / "first")
    again_log = course.nbgrader("autograde", ASSIGNMENT, "--force", *PENALTY)
    again = exported(course, root / "again")
    return SimpleNamespace(course=course, first=first, again=again, logs=(first_log, again_log))


def test_autograde_applies_the_per_hour_penalty_once_and_a_regrade_gives_the_same(late_course):
    for log in late_course.logs:
        assert "alice graded: " in log and "bob graded: " in log, log[-3000:]  # SandboxedGrading graded both
        assert log.count("Late submission penalty: 40.0") == 1, log[-3000:]
    for grades in (late_course.first, late_course.again):
        alice = grades.rows["alice"]
        assert float(alice["raw_score"]) == 100
        assert float(alice["late_submission_penalty"]) == 40
        assert float(alice["score"]) == 60
    assert late_course.first.rows == late_course.again.rows


def test_an_extension_keeps_a_late_student_on_time(late_course):
    for grades in (late_course.first, late_course.again):
        bob = grades.rows["bob"]
        assert 0 < float(bob["raw_score"]) < 100  # the unbiased variance costs layer_norm
        assert float(bob["late_submission_penalty"] or 0) == 0
        assert float(bob["score"]) == float(bob["raw_score"])
    for log in late_course.logs:  # never reported late
        assert not [line for line in log.splitlines() if "bob" in line and "seconds late" in line]


def test_the_canvas_export_carries_the_penalised_total_and_the_parts_before_it(late_course):
    for grades in (late_course.first, late_course.again):
        canvas = grades.canvas
        assert [title for title, _ in canvas["columns"]][0] == ASSIGNMENT
        alice, bob = canvas["students"]["alice"], canvas["students"]["bob"]
        assert alice["scores"][0] == 60 and sum(alice["scores"][1:]) == pytest.approx(100)
        assert bob["scores"][0] == pytest.approx(float(grades.rows["bob"]["score"]), abs=1e-3)
        assert sum(bob["scores"][1:]) == pytest.approx(bob["scores"][0], abs=1e-3)
        # the total is nbgrader's, the written answers (graded by hand, no column of their own) included
        assert canvas["points"][0] == 100 + load_rubric(ASSIGNMENT).points_by_hand == 122
        assert sum(canvas["points"][1:]) == 100
