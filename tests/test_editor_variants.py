"""One correct submission, saved as editors save it (autograder/authoring/editor_samples.py: Colab, a fresh copy,
VS Code, the classic Notebook, JupyterLab with 4 MB of outputs, cells reordered, a solution and a check cell split
plus %timeit cells, one-string sources, an R or no kernelspec, CRLF with a BOM, jupytext's .py, a notebook under
another name), graded through `grade`, `grade-all` and nbgrader's autograde: each scores 100 and no line shown to
the student blames them.  A folder holding only a file nobody can grade is accounted for with 0 and the reason;
written answers left as released score 0 with nothing to review whatever the editor did to their metadata.  One
autograde run and one grade-all run."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from autograder.authoring.demo import COURSE_ID, Course
from autograder.authoring.editor_samples import editor_variants
from autograder.authoring.samples import student_notebook
from autograder.grading.batch import grade_report
from autograder.grading.results_json import from_gradescope, summary
from autograder.grading.rubric import load_rubric
from autograder.model.cells import is_check_cell, nbgrader_of
from autograder.model.limits import Limits
from conftest import ASSIGNMENT, run_cli

NOTHING_GRADABLE = "notes-only"  # a folder holding only a text file: accounted for, 0 with the reason
RENAMED = "renamed"  # the notebook under another name


def correct_with_answers_as_released() -> dict:
    """The reference solution, its written answers left reading as released ("YOUR ANSWER HERE")."""
    solved, release = student_notebook(ASSIGNMENT), student_notebook(ASSIGNMENT, solved=False)
    released = {nbgrader_of(c).get("grade_id"): c["source"] for c in release["cells"]}
    for cell in solved["cells"]:
        meta = nbgrader_of(cell)
        if meta.get("grade") and meta.get("solution"):
            cell["source"] = released[meta["grade_id"]]
    return solved


@pytest.fixture(scope="module")
def hand_ins(tmp_path_factory) -> dict[str, Path]:
    """student -> the file handed in, with the name it has in submitted/<student>/<assignment>/."""
    root = tmp_path_factory.mktemp("variants")
    nb = correct_with_answers_as_released()
    files = {name: (f"{ASSIGNMENT}{suffix}", data) for name, (suffix, data) in editor_variants(nb).items()}
    files[RENAMED] = (f"{ASSIGNMENT} (1).ipynb", (json.dumps(nb) + "\n").encode())
    files[NOTHING_GRADABLE] = ("notes.txt", b"I ran out of time.\n")
    paths = {}
    for student, (name, data) in files.items():
        (root / student).mkdir()
        paths[student] = root / student / name
        paths[student].write_bytes(data)
    return paths


@pytest.fixture(scope="module")
def course(hand_ins, tmp_path_factory) -> Course:
    """A course whose submitted/ holds every hand-in, and an empty folder (not a hand-in), autograded once."""
    course = Course(tmp_path_factory.mktemp("course") / "course", ASSIGNMENT)
    course.create()
    course.release()
    for student, path in hand_ins.items():
        target = course.root / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        (target / path.name).write_bytes(path.read_bytes())
    (course.root / "submitted" / "empty" / ASSIGNMENT).mkdir(parents=True)
    course.grades_csv = course.grade(list(hand_ins), feedback=False)  # the texts are read from autograded/
    return course


@pytest.fixture(scope="module")
def grade_all_run(course, tmp_path_factory):
    out = tmp_path_factory.mktemp("grade-all") / "results"
    done = run_cli("grade-all", course.root, "-o", out, "--jobs", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stderr


SHOWN_AS_FINE = [re.compile(p) for p in (
    rf"^{ASSIGNMENT}: [\d.]+ / 100$", r"^Graded by hand: 11 written answers \(22 points\), not included",
    r"^Isolation: ", r"^  .+: ([\d.]+) / \1$",  # a part with full marks
    r"^.+: ([\d.]+) / \1 points$", r"^\[ok  \] ")]  # nbgrader's test cells: the part's title and its checks


def blaming(text: str) -> list[str]:
    """The lines of what a student is shown that are not a score, a passed check or where the grade ran."""
    return [line for line in text.splitlines() if line.strip() and not any(p.search(line) for p in SHOWN_AS_FINE)]


def scores(grades_csv: Path, column: str) -> dict[str, float]:
    with grades_csv.open(newline="") as handle:
        return {row[column]: float(row["score"]) for row in csv.DictReader(handle)}


def autograded_lines(course: Course, student: str) -> str:
    """Every text output of the autograded notebook: what generate_feedback shows the student."""
    nb = json.loads((course.root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    texts = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")) or "\n".join(output.get("traceback", [])) or
                         "".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(texts)


def test_every_editor_variant_scores_100_through_grade_with_nothing_blamed(hand_ins):
    """`grade`: the two calls commands/grade.py makes (grade_report, then summary printed), in one process."""
    rubric, table = load_rubric(ASSIGNMENT), {}
    for student, path in hand_ins.items():
        if student != NOTHING_GRADABLE:
            result, _ = grade_report(path, rubric, Limits(), within=path.parent)
            table[student] = (result.score, blaming(summary(result)))
    print("\n".join(f"grade      {s:<12} {score:>5g}  {len(lines)} {lines[:1]}" for s, (score, lines) in table.items()))
    assert table == {student: (100, []) for student in hand_ins if student != NOTHING_GRADABLE}


def test_every_hand_in_is_in_grade_alls_csv_graded_where_the_kit_can(course, grade_all_run, hand_ins):
    out, log = grade_all_run
    got = scores(out / "grades.csv", "student")
    assert got == {**{s: 100 for s in hand_ins}, NOTHING_GRADABLE: 0}  # the empty folder is no hand-in
    rubric = load_rubric(ASSIGNMENT)
    shown = {s: blaming(summary(from_gradescope(json.loads((out / f"{s}.json").read_text()), rubric)))
             for s in hand_ins}
    print("\n".join(f"grade-all  {s:<12} {got[s]:>5g}  {len(lines)} {lines[:1]}" for s, lines in shown.items()))
    assert all(not lines for s, lines in shown.items() if s != NOTHING_GRADABLE)
    assert shown[NOTHING_GRADABLE][0] == "Not graded: notes.txt: a submission is a .ipynb notebook or a .py file"
    assert f"{NOTHING_GRADABLE}: no {ASSIGNMENT}.ipynb was handed in, nor any notebook or .py" in log
    assert f"jupytext: no {ASSIGNMENT}.ipynb was handed in: {ASSIGNMENT}.py graded instead" in log
    assert f"{RENAMED}: no {ASSIGNMENT}.ipynb was handed in: {ASSIGNMENT} (1).ipynb graded instead" in log


def test_every_hand_in_is_in_nbgraders_gradebook_with_nothing_blamed(course, hand_ins):
    got = scores(course.grades_csv, "student_id")
    students = {s: got[s] for s in hand_ins}
    shown = {s: blaming(autograded_lines(course, s)) for s in hand_ins}
    print("\n".join(f"nbgrader   {s:<12} {students[s]:>5g}  {len(shown[s])} {shown[s][:1]}" for s in hand_ins))
    assert students == {**{s: 100 for s in hand_ins}, NOTHING_GRADABLE: 0}
    assert all(not lines for s, lines in shown.items() if s != NOTHING_GRADABLE)
    assert shown[NOTHING_GRADABLE] and all("notes.txt" in line for line in shown[NOTHING_GRADABLE]
                                           if "Not graded" in line)
    log = course.autograde_log
    for student, name in (("jupytext", f"{ASSIGNMENT}.py"), (RENAMED, f"{ASSIGNMENT} (1).ipynb")):
        assert f"{student}: no {ASSIGNMENT}.ipynb was handed in: {name} graded instead" in log


def test_untouched_written_answers_score_0_with_nothing_to_review_whatever_the_editor_did(course, hand_ins):
    """nbgrader's rule for an answer left as released, for every variant: Colab's and a fresh copy's answers have
    no metadata left, and are known by their text."""
    from nbgrader.api import Gradebook

    by_hand = load_rubric(ASSIGNMENT).graded_by_hand
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student in hand_ins:
            notebook = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
            answers = [(g.needs_manual_grade, g.auto_score) for g in notebook.grades if g.name in by_hand]
            assert answers == [(False, 0)] * len(by_hand), student
            assert not notebook.needs_manual_grade, student


def test_a_colab_notebooks_check_cells_are_the_releases_in_the_autograded_notebook(course):
    """Restored by their text: each check cell carries its part's verdict, none was added back."""
    nb = json.loads((course.root / "autograded" / "colab" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    checks = [c for c in nb["cells"] if is_check_cell(c)]
    assert len(checks) == len(load_rubric(ASSIGNMENT).parts)
    assert not any("was missing from the submission" in "".join(c["source"]) for c in checks)
