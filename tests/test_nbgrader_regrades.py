"""Regrades through the real nbgrader say what changed (issue 23): SandboxedGrading keeps every grade in
<course root>/autograded-history/<assignment>/<student>/, and `autograde --force` after one student resubmitted
a fixed notebook and a limit changed writes <course root>/<assignment>-changes.csv listing exactly that student,
with the checks that moved and why.  Two students, graded twice."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from autograder.nbgrader.regrades import HISTORY_FOLDER, NOTEBOOK, changes_path
from autograder.grading.regrades import CHANGES_HEADER
from conftest import ASSIGNMENT, two_student_course

TIMEOUT = 170  # the default is 180: a limit that changes the fingerprint and no verdict


def verdicts(path: Path) -> dict[str, bool]:
    parts = json.loads(path.read_text())["extra_data"]["parts"]
    return {f"{part}: {test[0]}": test[3] is True for part, stored in parts.items() for test in stored["tests"]}


@pytest.fixture(scope="module")
def regraded(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("regrades")
    course = two_student_course(root)
    course.nbgrader("collect", ASSIGNMENT)
    first_log = course.nbgrader("autograde", ASSIGNMENT, "--force")
    first_changes = changes_path(course.root, ASSIGNMENT).exists()
    # bob resubmits, fixed; the instructor lowers a limit
    fixed = write_notebook(student_notebook(ASSIGNMENT), root / "notebooks" / "bob-fixed.ipynb")
    shutil.copyfile(fixed, course.root / "submitted" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    again_log = course.nbgrader("autograde", ASSIGNMENT, "--force", f"--SandboxedGrading.timeout={TIMEOUT}")
    with changes_path(course.root, ASSIGNMENT).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    history = course.root / HISTORY_FOLDER / ASSIGNMENT
    kept = {s: sorted((history / s).glob("*.json")) for s in ("alice", "bob")}
    # nothing changed: a regrade on request, which moves nobody
    third_log = course.nbgrader("autograde", ASSIGNMENT, "--force", f"--SandboxedGrading.timeout={TIMEOUT}")
    return SimpleNamespace(course=course, logs=(first_log, again_log, third_log), first_changes=first_changes,
                           rows=rows, history=kept, third_changes=changes_path(course.root, ASSIGNMENT).read_text(),
                           third_history={s: sorted((history / s).glob("*.json")) for s in ("alice", "bob")})


def test_the_history_keeps_every_grade_with_its_verdicts(regraded):
    for student, kept in regraded.history.items():
        assert len(kept) == 2, kept  # one per grade, none overwritten
        for path in kept:
            extra = json.loads(path.read_text())["extra_data"]
            assert extra[NOTEBOOK] == ASSIGNMENT and extra["cells_sha256"] and extra["assignment_components"]
            assert path.name.endswith(f"-{extra['assignment_fingerprint'][:12]}.json")
    bob_before, bob_after = (verdicts(p) for p in regraded.history["bob"])
    assert not all(bob_before.values()) and all(bob_after.values())  # the old verdicts: the unbiased variance
    assert all(verdicts(regraded.history["alice"][0]).values())
    old = json.loads(regraded.history["bob"][0].read_text())
    assert 0 < old["score"] < 100
    assert old["extra_data"]["assignment_components"]["limits"]["timeout"] == 180


def test_the_changes_file_lists_exactly_the_student_whose_verdicts_moved_with_the_checks_and_why(regraded):
    assert not regraded.first_changes  # first grades are no regrades
    header, *rows = regraded.rows
    assert header == CHANGES_HEADER
    assert [row[0] for row in rows] == ["bob"]
    student, old_score, new_score, moved_checks, why = rows[0]
    old = json.loads(regraded.history["bob"][0].read_text())
    assert float(old_score) == pytest.approx(old["score"]) and float(new_score) == 100
    failed_before = [name for name, passed in verdicts(regraded.history["bob"][0]).items() if not passed]
    assert any(name.startswith("layer_norm: ") for name in failed_before)  # the unbiased variance's own part
    assert moved_checks.split("; ") == [f"{name} failed->passed" for name in failed_before]
    assert why.split("; ") == ["the submission changed", f"the limit timeout changed (180 -> {TIMEOUT})"]


def test_nbgraders_log_has_a_line_for_the_changed_student_and_a_summary(regraded):
    first_log, again_log, _ = regraded.logs
    assert ": regraded, " not in first_log and "regraded 2" not in first_log
    changed = [line for line in again_log.splitlines() if ": regraded, " in line]
    assert len(changed) == 2, again_log[-3000:]
    bob = next(line for line in changed if "bob: regraded, " in line)
    assert "-> 100; moved: layer_norm: " in bob and "the submission changed" in bob
    alice = next(line for line in changed if "alice: regraded, " in line)
    assert "unchanged at 100" in alice and f"the limit timeout changed (180 -> {TIMEOUT})" in alice
    summary = f"regraded 2: 1 changed, 1 unchanged; see {changes_path(regraded.course.root, ASSIGNMENT)}"
    assert summary in again_log, again_log[-3000:]


def test_a_regrade_that_changes_nothing_lists_nobody_and_still_keeps_the_grade(regraded):
    third_log = regraded.logs[2]
    assert regraded.third_changes == ",".join(CHANGES_HEADER) + "\n"
    for student in ("alice", "bob"):
        assert len(regraded.third_history[student]) == 3
        assert f"{student}: regraded, unchanged at 100 (why: regraded on request" in third_log, third_log[-3000:]
    assert "regraded 2: 0 changed, 2 unchanged; see " in third_log
