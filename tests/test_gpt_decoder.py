"""The second assignment, gpt_decoder, written only through the authoring path: its generated files are
fresh, its catalogue is caught at 100 %, and the command line and nbgrader grade it alike."""
from __future__ import annotations

import json

import pytest

from autograder.authoring import check_suite, notebook_sync, release
from autograder.authoring.assignment import Assignment, assignment_names
from autograder.authoring.catalogue import EveryPart, load
from autograder.authoring.demo import Course
from autograder.authoring.samples import write_demo_class
from autograder.model.limits import Limits
from autograder.host.remote import RemoteSubmission
from autograder.judging.rubric import load_rubric
from conftest import grade_class_both_ways

NAME = "gpt_decoder"


def test_its_generated_files_are_fresh():
    assert notebook_sync.main(["check", "--assignment", NAME]) == 0
    assert release.main(["check", "--assignment", NAME]) == 0


def test_its_manifest_and_catalogue():
    rubric = load_rubric(NAME)  # its parts agree with the notebook's check cells: the release check above
    assert len(rubric.parts) == 5 and rubric.max_score == 100
    catalogue = load(NAME)
    mistakes = [e for e in catalogue.entries() if e.part is not None]
    variants = [e for e in catalogue.entries() if e.part is None and e.name != "reference"]
    assert len(mistakes) >= 30 and len(variants) >= 10, (len(mistakes), len(variants))
    assert {str(e.part) for e in mistakes if not isinstance(e.part, EveryPart)} == {p.name for p in rubric.parts}
    assert len(catalogue.determinism) == 4 and catalogue.entry(catalogue.demo).part is not None


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    return check_suite.run_catalogue(NAME, workers=2, folder=tmp_path_factory.mktemp("gpt-catalogue"))


def test_check_suite_catches_every_mistake_and_passes_every_variant(graded):
    text, ok = check_suite.summarise(NAME, graded, 0.0, 2)
    assert ok, text
    assert graded["reference"]["score"] == 100


def test_the_command_line_and_nbgrader_grade_it_alike(tmp_path):
    students = write_demo_class(NAME, tmp_path / "class")
    done, nbgrader = grade_class_both_ways(tmp_path / "class", tmp_path / "out", tmp_path / "course", list(students),
                                           assignment=NAME)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = {s: json.loads((tmp_path / "out" / f"{s}.json").read_text())["score"] for s in students}
    assert cli["alice"] == 100 and 0 < cli["bob"] < 100 and cli["carol"] == 0, cli
    assert nbgrader == pytest.approx(cli, abs=1e-3)

    course = Course(tmp_path / "course", NAME)  # the course nbgrader graded: its feedback, for every student
    course.nbgrader("generate_feedback", NAME, "--force")
    for student in students:
        assert (course.root / "feedback" / student / NAME / f"{NAME}.html").is_file(), student


def test_no_assignments_hidden_files_are_visible_in_its_sandbox():
    hidden = [str(path) for name in assignment_names() for path in
              (Assignment(name).solutions_module, Assignment(name).manifest, Assignment(name).source_notebook)]
    cell = f"import os\n\ndef visible():\n    return [p for p in {hidden!r} if os.path.exists(p)]\n"
    submission = RemoteSubmission([cell], Limits(), load_rubric(NAME).forbidden_ops)
    try:
        assert submission.call("visible") == []
    finally:
        submission.close()
