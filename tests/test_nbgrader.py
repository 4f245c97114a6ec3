"""The real nbgrader CLI in a temporary course and exchange, graded by the kit's preprocessor, and reusing
what grade-all graded; notebooks nbgrader alone fails or grades otherwise get the score every front end gives."""
from __future__ import annotations

import base64
import copy
import csv
import html
import json
import os
import re
import shutil
import stat
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from autograder.authoring.demo import Course
from autograder.grading.rubric import load_rubric
from autograder.authoring.samples import student_notebook, write_notebook
from autograder.authoring.assignment import Assignment
from autograder.host.source_cells import read_cells
from autograder.judging import evidence
from autograder.nbgrader.pictures import EVIDENCE
from autograder.reports import figures
from autograder.model.cells import CHECK_CELL_STANDIN, UNCHANGED_CELL_STANDIN
from conftest import ASSIGNMENT, NOT_REGULAR_NESTED, UNBIASED_VARIANCE, write_not_regular_nested
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
    for student, notebook in odd_notebooks(root / "odd").items():  # graded in the same autograde run
        target = course.root / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copyfile(notebook, target / f"{ASSIGNMENT}.ipynb")
    course.nbgrader("collect", ASSIGNMENT)  # alice's notebook, which the links below lead to
    write_not_regular_nested(course.root / "submitted")  # links and a FIFO where notebooks should be
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
    # the same file through zip_collect; nbgrader sums its cells' float scores, the CLI rounds the total to 4 places
    assert nbgrader_scores["dave"] == nbgrader_scores["bob"] == pytest.approx(cli_scores["dave"], abs=1e-3)


def test_the_gradebook_leaves_the_written_answers_for_manual_grading_beside_the_autograded_100(graded_course):
    """nbgrader's own rule for cells graded by hand, through the kit's plugin: an answer the student wrote needs
    a manual grade (no score until the instructor gives one), an answer left as released scores 0 by itself;
    the autograded cells score exactly what the kit gave, and the written points are nbgrader's only."""
    from nbgrader.api import Gradebook

    from autograder.authoring.demo import COURSE_ID

    course, _, _ = graded_course
    by_hand, parts = load_rubric(ASSIGNMENT).graded_by_hand, {p.name: p.points for p in load_rubric(ASSIGNMENT).parts}
    assert len(by_hand) == len(parts) and not set(by_hand) & set(parts)
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        assert gradebook.find_assignment(ASSIGNMENT).max_score == sum(parts.values()) + sum(by_hand.values()) == 100 + 2 * len(parts)
        for student, autograded_score, answered in (("alice", 100, True), ("carol", 0, False)):
            notebook = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
            grades = {grade.name: grade for grade in notebook.grades}
            assert set(grades) == set(parts) | set(by_hand), student
            assert sum(grades[name].score for name in parts) == pytest.approx(autograded_score), student
            assert not any(grades[name].needs_manual_grade for name in parts), student
            assert notebook.score == pytest.approx(autograded_score) and notebook.needs_manual_grade is answered
            for name in by_hand:
                grade = grades[name]
                assert grade.max_score == by_hand[name] and grade.manual_score is None, (student, name)
                # written: nbgrader's "needs manual grade"; left as released: 0 without anyone reading it
                assert (grade.needs_manual_grade, grade.auto_score) == ((True, None) if answered else (False, 0))
    alice = autograded(course, "alice")
    written = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in alice["cells"]
               if c["metadata"].get("nbgrader", {}).get("grade_id") in by_hand}
    assert written == Assignment(ASSIGNMENT).written_answers()  # the student's answers, kept for the grader


def check_cell_outputs(course_root: Path, student: str) -> dict[str, list]:
    notebook = json.loads((course_root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c["outputs"] for c in notebook["cells"]
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")}


def _copy_keeping_fifos(source: str, target: str) -> None:
    if stat.S_ISFIFO(os.lstat(source).st_mode):
        os.mkfifo(target)
    else:
        shutil.copy2(source, target)


@pytest.fixture(scope="module")
def reused_course(graded_course, cli_results, tmp_path_factory) -> SimpleNamespace:
    """A copy of the graded course (so that the other tests here see the fresh grades) autograded again,
    reusing grade-all's results."""
    course, _, _ = graded_course
    root = tmp_path_factory.mktemp("reuse")
    reuse, broken = root / "reuse", root / "broken"
    shutil.copytree(cli_results, reuse)
    broken.mkdir()
    (broken / "dave.json").write_text('{"extra_data": ')  # first in line for dave: ignored, the next folder used
    # carol's result becomes alice's full marks, keyed on carol's cells: proof that a result is read, not redone
    planted = json.loads((reuse / "alice.json").read_text())
    planted["extra_data"]["cells_sha256"] = json.loads((reuse / "carol.json").read_text())["extra_data"]["cells_sha256"]
    (reuse / "carol.json").write_text(json.dumps(planted))
    again = Course(root / "course", ASSIGNMENT)
    shutil.copytree(course.root, again.root, symlinks=True, copy_function=_copy_keeping_fifos)
    again.env["AUTOGRADER_REUSE_RESULTS"] = os.pathsep.join([str(broken), str(reuse)])
    log = again.nbgrader("autograde", ASSIGNMENT, "--force")
    again.nbgrader("export", "--to", str(root / "grades.csv"))
    return SimpleNamespace(course=again, log=log, broken=broken, scores=scores(root / "grades.csv"))


@pytest.fixture(scope="module")
def one_at_a_time_course(graded_course, tmp_path_factory) -> SimpleNamespace:
    """A copy of the graded course autograded again with nothing graded ahead: each notebook in its turn."""
    course, _, _ = graded_course
    root = tmp_path_factory.mktemp("one-at-a-time")
    again = Course(root / "course", ASSIGNMENT)
    shutil.copytree(course.root, again.root, symlinks=True, copy_function=_copy_keeping_fifos)
    log = again.nbgrader("autograde", ASSIGNMENT, "--force", "--SandboxedGrading.grade_ahead=0")
    again.nbgrader("export", "--to", str(root / "grades.csv"))
    return SimpleNamespace(course=again, log=log, scores=scores(root / "grades.csv"))


def test_grading_the_class_ahead_changes_when_a_grade_is_made_never_what_it_is(graded_course, one_at_a_time_course):
    from autograder.nbgrader.ahead import cores

    course, students, grades_csv = graded_course
    ahead = cores() >= 2  # grade_ahead's default: one process per core, when there are two or more
    assert ("submissions ahead, 2 at a time" in course.autograde_log) is ahead, course.autograde_log[-3000:]
    for student in [*students, "dave"]:
        line = re.search(rf"\] {student} graded: .*", course.autograde_log)
        assert line and line[0].endswith("(ahead, in parallel)") is ahead, (student, course.autograde_log[-3000:])
    assert "ahead" not in one_at_a_time_course.log
    assert scores(grades_csv) == one_at_a_time_course.scores
    autograded = sorted(p.name for p in (course.root / "autograded").iterdir())
    assert set(students) | {"dave"} <= set(autograded)
    for student in autograded:
        assert (check_cell_outputs(one_at_a_time_course.course.root, student)
                == check_cell_outputs(course.root, student)), student


GRADED_AGAIN = re.compile(r"\] [\w.-]+ graded: ")  # SandboxedGrading's line for a notebook it graded


def test_autograde_reuses_grade_all_results_and_writes_what_a_fresh_grade_writes(graded_course, reused_course):
    course, _, fresh_grades = graded_course
    log = reused_course.log
    for student in ("alice", "bob", "carol", "dave"):
        assert f"{student} reused: " in log, log[-3000:]
    assert not GRADED_AGAIN.search(log)  # nothing graded again
    assert f"dave: ignored {reused_course.broken / 'dave.json'}" in log
    fresh = scores(fresh_grades)
    assert fresh["carol"] == 0 and reused_course.scores == {**fresh, "carol": 100}
    for student in ("alice", "bob", "dave"):
        assert check_cell_outputs(reused_course.course.root, student) == check_cell_outputs(course.root, student)


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
        # bob's unbiased variance: where the error sits, in the parts it costs, shown in the feedback (autograde
        # writes the evidence, generate_feedback draws it: nbgrader.pictures)
        assert pictures["layer_norm"] and not pictures["attention"] and not pictures["gradient_experiment"]
        drawn = {grade_id: set() for grade_id in pictures}  # a cell shows each distinct picture once
        for grade_id, picture in ((g, p) for g, shown in pictures.items() for p in shown):
            assert "image/png" not in picture["data"]
            png = base64.b64encode(figures.png(evidence.from_json(picture["data"][EVIDENCE]))).decode("ascii")
            assert f"data:image/png;base64,{png}" in feedback.replace("\n", "")
            assert "differs from the reference" in "".join(picture["data"]["text/plain"])  # a mismatch
            drawn[grade_id].add(png)
        assert feedback.count("data:image/png;base64,") == sum(map(len, drawn.values()))


def test_test_cells_carry_nbgraders_partial_credit(graded_course):
    course, _, _ = graded_course
    notebook = json.loads((course.root / "autograded" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    outputs = {c["metadata"]["nbgrader"]["grade_id"]: c["outputs"] for c in notebook["cells"]
               if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"}
    # bob's one layer-norm bug: no value check of layer norm passes (zero, an error carrying the feedback), and
    # the block is carried forward from it (partial credit)
    assert outputs["layer_norm"][0]["output_type"] == "error"
    assert outputs["transformer_block"][0]["output_type"] == "execute_result"
    assert 0 < float("".join(outputs["transformer_block"][0]["data"]["text/plain"])) < 20
    assert [o["output_type"] for o in outputs["gradient_experiment"]] == ["stream"]  # full marks
    carol = json.loads((course.root / "autograded" / "carol" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    checks = [(c["metadata"]["nbgrader"]["grade_id"], c["outputs"]) for c in carol["cells"]
              if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"]
    # exactly one autograded check cell per rubric part, or the loop below could pass over no cells at all
    grade_ids = sorted(grade_id for grade_id, _ in checks)
    parts = sorted(p.name for p in load_rubric(ASSIGNMENT).parts)
    assert len(checks) == len(parts) and grade_ids == parts, grade_ids
    for grade_id, outputs in checks:
        assert outputs and outputs[0]["output_type"] == "error", (grade_id, outputs)


# --- notebooks nbgrader 0.9 alone fails or grades otherwise: one score on every front end ---------------------

ODD = ("odd-pasted", "odd-marked", "odd-bom", "odd-locked", "odd-deleted", "odd-bare", "odd-broken")
NOT_JSON = f"{ASSIGNMENT}.ipynb is not valid JSON (line 1): not a notebook"
# the work left in the locked plot cell is not graded: gradient_experiment, which it holds, scores 0
GRADIENT_POINTS = next(p.points for p in load_rubric(ASSIGNMENT).parts if p.name == "gradient_experiment")


def _grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _at(notebook: dict, grade_id: str) -> int:
    return [_grade_id(c) for c in notebook["cells"]].index(grade_id)


def odd_notebooks(folder: Path) -> dict[str, Path]:
    """What students hand in that nbgrader 0.9 with add_missing_cells failed (0) or graded otherwise than
    `grade` (the locked cell), and two more: a test cell deleted, a file that is not JSON."""
    folder.mkdir(parents=True)
    solved = student_notebook(ASSIGNMENT)
    pasted = copy.deepcopy(solved)  # pasted twice in JupyterLab (new cell id, same metadata); the last one counts
    first = _at(pasted, "layer_norm_function")
    pasted["cells"].insert(first + 1, {**copy.deepcopy(pasted["cells"][first]), "id": "pasted-copy"})
    buggy = "".join(pasted["cells"][first]["source"]).replace(*UNBIASED_VARIANCE)
    assert buggy != "".join(pasted["cells"][first]["source"])
    pasted["cells"][first]["source"] = buggy
    marked = copy.deepcopy(solved)  # marked "Autograded tests" with the Create Assignment toolbar
    marked["cells"].insert(_at(marked, "layer_norm_module") + 1, nbformat.v4.new_code_cell(
        "LayerNorm = None  # would cost every check of LayerNorm, were this cell run\n", metadata={"nbgrader": {
            "grade": True, "grade_id": "cell-5f3a9c0e2b1d4c6a", "locked": True, "points": 0, "schema_version": 3,
            "solution": False, "task": False}}))
    locked = copy.deepcopy(solved)  # the work in the locked plot cell, the solution cell as released
    release = student_notebook(ASSIGNMENT, solved=False)
    function, plot = (locked["cells"][_at(locked, name)] for name in ("input_grad_norm_function", "gradient_plot"))
    plot["source"] = "".join(function["source"]) + "\n\n" + "".join(plot["source"])
    function["source"] = release["cells"][_at(release, "input_grad_norm_function")]["source"]
    deleted = student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE])  # bob's mistake, and the part's test cell deleted
    del deleted["cells"][_at(deleted, "layer_norm")]
    bare = {"cells": solved["cells"]}  # no format version: nbformat alone would read every source as empty
    paths = {student: folder / f"{student}.ipynb" for student in ODD}
    for student, notebook in [("odd-pasted", pasted), ("odd-marked", marked), ("odd-locked", locked),
                              ("odd-deleted", deleted), ("odd-bare", bare)]:
        write_notebook(notebook, paths[student])
    paths["odd-bom"].write_bytes(b"\xef\xbb\xbf" + (json.dumps(solved, indent=1) + "\n").encode("utf-8"))
    paths["odd-broken"].write_text(json.dumps(solved)[:4000], encoding="utf-8")
    return paths


def autograded(course: Course, student: str) -> dict:
    return json.loads((course.root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())


def test_odd_notebooks_score_the_same_fresh_reusing_and_through_grade_all(graded_course, cli_results,
                                                                          reused_course):
    _, _, grades = graded_course
    fresh, batch = scores(grades), scores(cli_results / "grades.csv", "student")
    assert 0 < fresh["bob"] < 100  # the same mistake, with its test cell in place
    expected = {"odd-pasted": 100, "odd-marked": 100, "odd-bom": 100, "odd-locked": 100 - GRADIENT_POINTS, "odd-deleted": fresh["bob"],
                "odd-bare": 100, "odd-broken": 0}
    assert set(expected) == set(ODD)
    for student, score in expected.items():
        got = (fresh[student], reused_course.scores[student], batch[student])
        assert got == pytest.approx((score,) * 3, abs=1e-3), student


def test_every_odd_notebook_nbgrader_reads_is_reused_and_the_rest_are_refused_with_the_reason(graded_course,
                                                                                              reused_course):
    course, _, _ = graded_course
    log = reused_course.log
    for student in ODD[:-1]:  # grade-all graded the very cells nbgrader grades
        assert f"{student} reused: " in log, (student, log[-3000:])
    assert f"odd-broken not graded: {NOT_JSON}" in log and f"odd-broken not graded: {NOT_JSON}" in course.autograde_log
    assert "Traceback" not in log + course.autograde_log
    copy = _at(student_notebook(ASSIGNMENT), "layer_norm_function") + 1  # the earlier of the two, numbered from 1
    assert (f"odd-pasted: cell {copy} is the student's own, not the release's (it is a copy of cell "
            "layer_norm_function" in course.autograde_log)


def test_a_link_or_a_fifo_where_a_notebook_should_be_scores_0_with_its_reason_as_in_grade_all(graded_course,
                                                                                              cli_results):
    """nbgrader finds submissions following links; the kit's reader refuses them from the submitted folder
    down (a linked student folder, a linked assignment folder, a notebook linked to a classmate's or to the
    instructor's source, which is three folders up), and never opens a FIFO: autograde carries on."""
    course, _, grades = graded_course
    fresh, batch = scores(grades), scores(cli_results / "grades.csv", "student")
    assert fresh["alice"] == batch["alice"] == 100
    for student, says in NOT_REGULAR_NESTED.items():
        assert fresh[student] == batch[student] == 0, student
        assert f"{student} not graded: {says}" in course.autograde_log, (student, course.autograde_log[-3000:])
        feedback = (course.root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert says in html.unescape(feedback), student


def test_nbgrader_keeps_the_last_copy_restores_locked_cells_and_adds_deleted_test_cells_back(graded_course):
    course, _, _ = graded_course
    pasted = [c for c in autograded(course, "odd-pasted")["cells"] if "def layer_norm(" in "".join(c["source"])]
    assert [_grade_id(c) for c in pasted] == [None, "layer_norm_function"]  # the earlier copy is the student's own
    marked = autograded(course, "odd-marked")
    extra = next(c for c in marked["cells"] if "LayerNorm = None" in "".join(c["source"]))
    assert "nbgrader" not in extra["metadata"] and "autograder" not in extra["metadata"]
    assert "earns no points" in "".join(extra["outputs"][0]["text"])
    release, locked = student_notebook(ASSIGNMENT, solved=False), autograded(course, "odd-locked")
    plot = locked["cells"][_at(locked, "gradient_plot")]
    assert "".join(plot["source"]) == "".join(release["cells"][_at(release, "gradient_plot")]["source"])
    deleted, bob = autograded(course, "odd-deleted"), autograded(course, "bob")
    added = deleted["cells"][_at(deleted, "layer_norm")]
    assert "".join(added["source"]).startswith("# This cell (id:layer_norm) was missing from the submission.")
    before = _grade_id(release["cells"][_at(release, "layer_norm") - 1])  # where the release has it
    assert _at(deleted, "layer_norm") == _at(deleted, before) + 1
    assert added["outputs"][0] == bob["cells"][_at(bob, "layer_norm")]["outputs"][0]  # bob's partial credit


def test_a_notebook_nothing_can_read_scores_0_with_the_reason_in_each_test_cell_and_the_feedback(graded_course):
    course, _, _ = graded_course
    checks = [c for c in autograded(course, "odd-broken")["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    assert sorted(_grade_id(c) for c in checks) == sorted(p.name for p in load_rubric(ASSIGNMENT).parts)
    for cell in checks:
        error = cell["outputs"][0]
        assert error["output_type"] == "error" and error["ename"] == "NotGraded", cell
        assert NOT_JSON in "\n".join(error["traceback"])
    feedback = course.root / "feedback" / "odd-broken" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert NOT_JSON in html.unescape(feedback.read_text())


def test_the_cell_rules_of_grade_are_nbgraders_locked_cells_copies_and_test_marks(tmp_path):
    """`grade` reads the cells nbgrader would leave: the last cell carrying a grade_id is that cell, a locked
    plot cell is the release's whatever was written in it or its type, and a cell marked as a test cell is
    never run, whatever its type or grade_id."""
    skippable = load_rubric(ASSIGNMENT).skip_when_unchanged
    notebook = student_notebook(ASSIGNMENT)
    plot = notebook["cells"][_at(notebook, "heads_plot")]
    earlier = {**copy.deepcopy(plot), "source": "EARLIER = 1\n"}  # a copy pasted above, then edited
    plot.update(cell_type="markdown", source="my notes")  # the locked plot itself, edited and made markdown
    del plot["outputs"], plot["execution_count"]
    marked = nbformat.v4.new_markdown_cell("MARKED = 1", metadata={"nbgrader": {"grade": True, "grade_id": "x"}})
    notebook["cells"][_at(notebook, "heads_plot"):_at(notebook, "heads_plot")] = [earlier]
    notebook["cells"].append(marked)
    path = write_notebook(notebook, tmp_path / "n.ipynb")
    cells = read_cells(path, skippable)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code" or c is plot or c is marked]
    assert cells[code.index(earlier)] == "EARLIER = 1\n"
    assert cells[code.index(plot)] == UNCHANGED_CELL_STANDIN
    assert cells[code.index(marked)] == CHECK_CELL_STANDIN and len(cells) == len(code)
