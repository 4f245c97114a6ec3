"""What every assignment of the kit must do, checked alike for each (`assignment_names()`, so a new assignment
is covered with no edit here): its generated files are fresh, its manifest and catalogue have the kit's shape,
every catalogue entry builds from the reference, the command line and nbgrader grade its demo class alike
(transformer_block's in tests/test_nbgrader.py), and its sandbox shows none of any assignment's hidden files.
Its catalogue is graded in tests/test_assignment_catalogues.py, once per test run; what only one assignment has
stays in its own file (tests/test_<name>.py; tests/test_catalogue.py for transformer_block's catalogue)."""
from __future__ import annotations

import json

import pytest

from autograder.authoring import notebook_sync, release
from autograder.authoring.assignment import Assignment, assignment_names
from autograder.authoring.catalogue import REFERENCE, EveryPart, load
from autograder.authoring.demo import Course
from autograder.authoring.samples import write_demo_class
from autograder.grading.rubric import load_rubric
from autograder.host.remote import RemoteSubmission
from autograder.host.source_cells import read_cells
from autograder.model.limits import Limits
from conftest import ASSIGNMENT, grade_class_both_ways

NAMES = assignment_names()
by_name = pytest.mark.parametrize("name", NAMES)
ENTRIES = [pytest.param(name, entry.name, id=f"{name}-{entry.name}") for name in NAMES for entry in load(name).entries()]

# bob's score where it is known exactly (elsewhere only strictly between 0 and 100): a regression guard
BOB_SCORES = {"norms_and_gates": 50}  # the demo mistake costs the whole rms_norm part, and nothing else


def _mistakes(name: str) -> list:
    return [e for e in load(name).entries() if e.part is not None]


@by_name
def test_its_generated_files_are_fresh(name):
    assert notebook_sync.main(["check", "--assignment", name]) == 0
    assert release.main(["check", "--assignment", name]) == 0


@by_name
def test_its_manifest_and_catalogue(name):
    """Every part has a mistake, most mistakes a hint, the catalogue a variant, four determinism entries and a
    demo mistake; the autograded total is 100."""
    rubric = load_rubric(name)  # its parts agree with the notebook's check cells: the release check above
    assert rubric.max_score == 100
    catalogue = load(name)
    mistakes = _mistakes(name)
    variants = [e for e in catalogue.entries() if e.part is None and e.name != "reference"]
    assert mistakes and variants, (len(mistakes), len(variants))
    assert {str(e.part) for e in mistakes if not isinstance(e.part, EveryPart)} == {p.name for p in rubric.parts}
    assert {e.part for e in mistakes} == set(catalogue.built_on)
    assert sum(e.hint is not None for e in mistakes) > 0.75 * len(mistakes)
    assert len(catalogue.determinism) == 4 and catalogue.entry(catalogue.demo).part is not None


@pytest.mark.parametrize("name, entry", ENTRIES)
def test_entry_builds_from_the_reference(name, entry, tmp_path):
    catalogue = load(name)
    built = catalogue.entry(entry)
    path = catalogue.write(built, tmp_path)
    for number, cell in enumerate(read_cells(path), 1):
        compile(cell, f"{path.name} cell {number}", "exec")
    if built.mutations or built.replace:
        assert catalogue.solution_cells(built) != catalogue.solution_cells(REFERENCE)


# transformer_block's demo class (alice the reference, bob its demo mistake, the unbiased variance, and carol the
# release) is test_nbgrader.py's course, which nbgrader and grade-all grade with these same expectations, nbgrader
# writing each student's feedback: not graded a second time here
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.skip(reason="graded by test_nbgrader.py"))
                                  if name == ASSIGNMENT else name for name in NAMES])
def test_the_command_line_and_nbgrader_grade_it_alike(name, tmp_path):
    """alice (the reference) gets 100, bob (the demo mistake) strictly between 0 and 100, carol (the release
    untouched) 0, the same through the command line and nbgrader, which gives each of them feedback."""
    students = write_demo_class(name, tmp_path / "class")
    done, nbgrader = grade_class_both_ways(tmp_path / "class", tmp_path / "out", tmp_path / "course", list(students),
                                           assignment=name)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = {s: json.loads((tmp_path / "out" / f"{s}.json").read_text())["score"] for s in students}
    assert cli["alice"] == 100 and 0 < cli["bob"] < 100 and cli["carol"] == 0, cli
    assert cli["bob"] == BOB_SCORES.get(name, cli["bob"]), cli
    assert nbgrader == pytest.approx(cli, abs=1e-3)

    course = Course(tmp_path / "course", name)  # the course nbgrader graded: its feedback, for every student
    course.nbgrader("generate_feedback", name, "--force")
    for student in students:
        assert (course.root / "feedback" / student / name / f"{name}.html").is_file(), student


@by_name
def test_its_sandbox_shows_none_of_the_hidden_files(name):
    """Not its own nor any other assignment's: solutions, manifests, source notebooks, suites, catalogues."""
    hidden = []
    for other in map(Assignment, NAMES):
        hidden += [other.solutions_module, other.manifest, other.source_notebook]
        hidden += [p for p in sorted(other.folder.rglob("*.py")) if "__pycache__" not in p.parts]
    assert all(path.is_file() for path in hidden)
    cell = f"import os\n\ndef visible():\n    return [p for p in {list(map(str, hidden))!r} if os.path.exists(p)]\n"
    submission = RemoteSubmission([cell], Limits(), load_rubric(name).forbidden_ops)
    try:
        assert submission.call("visible") == []
    finally:
        submission.close()
