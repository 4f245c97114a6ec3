"""nbgrader's autograde with the class graded ahead: which submissions (nbgrader's own order and rules), the
process that grades them (each student's own grade, and nothing left behind once the caller is done), and
CheckCellMetadata with nbgrader's schema compiled once (accepting exactly what nbgrader accepts)."""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata

from autograder.authoring.samples import student_notebook, write_notebook
from autograder.grading.batch import Entry
from autograder.model.limits import Limits
from autograder.nbgrader.ahead import GradeAhead, submissions_from
from autograder.nbgrader.cell_metadata import CheckCellMetadata
from conftest import ASSIGNMENT


# --- which submissions -------------------------------------------------------------------------------------

def converter(root: Path, force: bool = False, exclude: str = "") -> SimpleNamespace:
    """What submissions_from reads of nbgrader's Autograde: its course folder, --force, and the submission
    folders it found (BaseConverter.init_notebooks)."""
    coursedir = CourseDirectory(root=str(root), student_id_exclude=exclude)
    found = {}
    for folder in sorted((root / "submitted").glob("*/*")):
        found[str(folder)] = sorted(str(p) for p in folder.glob("*.ipynb"))
    return SimpleNamespace(coursedir=coursedir, force=force, assignments=found)


@pytest.fixture
def course(tmp_path: Path) -> Path:
    for student, notebooks in {"a": 1, "a-": 1, "b": 1, "c": 1, "two": 2, "done": 1, "left-out": 1}.items():
        folder = tmp_path / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        for n in range(notebooks):
            (folder / f"notebook{n}.ipynb").write_text("{}")
    (tmp_path / "autograded" / "done" / ASSIGNMENT).mkdir(parents=True)  # autograded before, and not resubmitted
    (tmp_path / "submitted" / "b" / "another").mkdir()  # `autograde "*"`: another assignment, graded in its turn
    (tmp_path / "submitted" / "b" / "another" / "another.ipynb").write_text("{}")
    return tmp_path


def students(chosen: list[tuple[str, Path]]) -> list[str]:
    return [student for student, _ in chosen]


def test_grading_ahead_takes_what_autograde_converts_from_its_current_notebook_on_in_its_order(course):
    # nbgrader goes through the submission folders sorted as paths: "a-/..." before "a/..." ('-' < '/')
    assert students(submissions_from(converter(course), "a-", ASSIGNMENT)) == ["a-", "a", "b", "c", "left-out"]
    assert students(submissions_from(converter(course), "b", ASSIGNMENT)) == ["b", "c", "left-out"]
    # a student with two notebooks is graded in autograde's turn: one result stands for one notebook
    assert students(submissions_from(converter(course), "c", ASSIGNMENT)) == ["c", "left-out"]
    chosen = dict(submissions_from(converter(course), "c", ASSIGNMENT))
    assert chosen["c"] == course / "submitted" / "c" / ASSIGNMENT / "notebook0.ipynb"


def test_grading_ahead_skips_whom_autograde_skips_unless_forced(course):
    assert "done" not in students(submissions_from(converter(course), "a-", ASSIGNMENT))
    assert "done" in students(submissions_from(converter(course, force=True), "a-", ASSIGNMENT))
    assert "left-out" not in students(submissions_from(converter(course, exclude="left-out,x"), "a-", ASSIGNMENT))
    # resubmitted since it was autograded: nbgrader converts it again
    (course / "autograded" / "done" / ASSIGNMENT / "timestamp.txt").write_text("2026-01-01 10:00:00")
    (course / "submitted" / "done" / ASSIGNMENT / "timestamp.txt").write_text("2026-01-02 10:00:00")
    assert "done" in students(submissions_from(converter(course), "a-", ASSIGNMENT))


# --- the process that grades them ------------------------------------------------------------------------

def test_each_student_gets_their_own_grade_ahead_and_nothing_is_left_behind(tmp_path):
    from autograder.grading.results_json import from_gradescope
    from autograder.grading.rubric import load_rubric

    root = tmp_path / "submitted"
    entries = [Entry("full", write_notebook(student_notebook(ASSIGNMENT), root / "full" / "nb.ipynb"), root),
               Entry("blank", write_notebook(student_notebook(ASSIGNMENT, solved=False), root / "blank" / "nb.ipynb"),
                     root)]
    ahead = GradeAhead.of_kit(entries, ASSIGNMENT, Limits(), jobs=2)
    helpers = []
    try:
        with ahead.result("nobody") as stored:  # not graded ahead: at once, without waiting
            assert stored is None
        rubric = load_rubric(ASSIGNMENT)
        scores = {}
        for student in ("full", "blank"):
            helpers = helpers or psutil.Process(ahead.process.pid).children(recursive=True)
            with ahead.result(student) as stored:
                assert stored is not None, (ahead.folder / "ahead.log").read_text()
                scores[student] = from_gradescope(json.loads(stored.read_text()), rubric).score
        assert scores == {"full": 100, "blank": 0}
        # every result taken: the process has ended and no grade stays behind on disk
        assert ahead.stopped and ahead.process.returncode == 0 and not ahead.folder.exists()
    finally:
        ahead.stop()
    assert helpers and not [p for p in helpers if _running(p)]  # the workers, the zygote, its children: all gone


def _running(process: psutil.Process, within: float = 10) -> bool:
    try:
        process.wait(timeout=within)
    except psutil.TimeoutExpired:
        return True
    return False


def test_grading_ahead_ends_when_its_caller_is_done_before_it(tmp_path):
    root = tmp_path / "submitted"
    notebook = write_notebook(student_notebook(ASSIGNMENT), root / "s" / "nb.ipynb")
    ahead = GradeAhead.of_kit([Entry(f"s{i}", notebook, root) for i in range(40)], ASSIGNMENT, Limits(), jobs=2)
    time.sleep(3)  # started, and grading
    helpers = psutil.Process(ahead.process.pid).children(recursive=True)
    started = time.monotonic()
    ahead.stop()
    assert time.monotonic() - started < 10 and ahead.process.returncode is not None
    assert not ahead.folder.exists()
    assert not [p for p in helpers if _running(p)]


def test_grading_ahead_is_decided_once_per_autograde_run_and_only_where_it_can_pay(course, monkeypatch):
    from autograder.nbgrader import ahead as ahead_module

    class Run(SimpleNamespace):  # nbgrader's converter: one object per autograde run
        __hash__ = object.__hash__

    said = []
    one = Run(**vars(converter(course)))
    one.assignments = {k: v for k, v in one.assignments.items() if "/c/" in k}
    assert ahead_module.grade_ahead(one, "c", ASSIGNMENT, ASSIGNMENT, Limits(), 2, said.append) is None  # alone
    assert ahead_module.grade_ahead(object(), "c", ASSIGNMENT, ASSIGNMENT, Limits(), 2, said.append) is None
    run = Run(**vars(converter(course)))
    assert ahead_module.grade_ahead(run, "a", ASSIGNMENT, ASSIGNMENT, Limits(), 0, said.append) is None  # off
    monkeypatch.setattr(ahead_module.sys, "executable", str(course / "no-such-python"))
    temporary = course / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(ahead_module.tempfile, "tempdir", str(temporary))
    run = Run(**vars(converter(course)))
    assert ahead_module.grade_ahead(run, "a", ASSIGNMENT, ASSIGNMENT, Limits(), 2, said.append) is None
    assert len(said) == 1 and said[0].startswith("could not grade ahead (FileNotFoundError")
    assert ahead_module.grade_ahead(run, "b", ASSIGNMENT, ASSIGNMENT, Limits(), 2, said.append) is None
    assert len(said) == 1  # decided on the run's first notebook, not tried again for each
    assert not list(temporary.iterdir())  # its folder went with it


# --- CheckCellMetadata ------------------------------------------------------------------------------------

VALID = {"schema_version": 3, "grade": True, "solution": False, "locked": True, "points": 2, "grade_id": "g1",
         "task": False}
METADATA = [
    None,  # no nbgrader metadata
    VALID,
    {**VALID, "grade": False, "points": 0, "solution": True, "locked": False},
    {**VALID, "grade": True, "solution": True, "locked": False},
    {**VALID, "schema_version": 2},
    {**VALID, "schema_version": 4},
    {**VALID, "schema_version": "3"},
    {**VALID, "schema_version": 3.0},
    {key: value for key, value in VALID.items() if key != "grade_id"},
    {key: value for key, value in VALID.items() if key != "schema_version"},
    {key: value for key, value in VALID.items() if key != "points"},
    {**VALID, "points": "two"},
    {**VALID, "points": -1},
    {**VALID, "extra": 1},
    {**VALID, "grade_id": 7},
    {**VALID, "grade_id": ""},
    {**VALID, "task": True},
    "not a mapping",
    [],
]


def cell(metadata: object, kind: str) -> nbformat.NotebookNode:
    new = nbformat.v4.new_code_cell("x = 1") if kind == "code" else nbformat.v4.new_markdown_cell("x")
    if metadata is not None:
        new.metadata["nbgrader"] = copy.deepcopy(metadata)
    return new


def outcome(step: object, notebook: nbformat.NotebookNode) -> tuple[str, str]:
    try:
        step.preprocess(copy.deepcopy(notebook), {})
    except Exception as exc:  # noqa: BLE001 - what nbgrader's step raises is what the kit's must raise
        return type(exc).__name__, str(exc)
    return "passed", ""


@pytest.mark.parametrize("kind", ["code", "markdown"])
@pytest.mark.parametrize("metadata", METADATA, ids=lambda m: json.dumps(m)[:60])
def test_the_compiled_schema_check_passes_and_fails_exactly_what_nbgraders_check_does(metadata, kind):
    other = {**VALID, "grade_id": "other"}
    notebook = nbformat.v4.new_notebook(cells=[cell(other, "code"), cell(metadata, kind)])
    assert outcome(CheckCellMetadata(), notebook) == outcome(NbgraderCheckCellMetadata(), notebook)


def test_a_release_notebook_is_checked_without_checking_the_schema_for_each_cell(monkeypatch):
    from nbgrader.nbgraderformat import common

    release = Path(__file__).resolve().parents[1] / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = nbformat.read(release, as_version=4)
    assert any("nbgrader" in c.metadata for c in notebook.cells)
    assert outcome(NbgraderCheckCellMetadata(), notebook) == ("passed", "")

    def schema_checked_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("jsonschema.validate called for a cell")
    monkeypatch.setattr(common.jsonschema, "validate", schema_checked_again)
    assert outcome(CheckCellMetadata(), notebook) == ("passed", "")
    assert outcome(NbgraderCheckCellMetadata(), notebook)[0] == "AssertionError"  # the check that is skipped
