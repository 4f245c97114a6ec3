"""The source notebook is checked against the rubric before a release is generated: every autograded check
cell's grade_id names a rubric part with the same points, and every part has exactly one such cell.  The cells
the rubric lets grading skip (`skip_when_unchanged`) must be locked code cells of the release."""
from __future__ import annotations

import json
import shutil

import pytest

from autograder.authoring import release
from autograder.authoring.assignment import Assignment
from autograder.grading import rubric as rubric_module
from autograder.grading.rubric import Part, RubricError, load_rubric

TB = Assignment("transformer_block")

PARTS = [Part("layer_norm", "Layer normalisation", 20, "test_layer_norm.py"),
         Part("attention", "Attention", 25, "test_attention.py")]


def _cell(grade_id: str, points: float, *, grade: bool = True, solution: bool = False) -> dict:
    return {"cell_type": "code", "source": "", "metadata": {"nbgrader": {
        "grade": grade, "solution": solution, "grade_id": grade_id, "points": points}}}


def test_matching_notebook_has_no_problems():
    notebook = {"cells": [_cell("layer_norm", 20), _cell("layer_norm_function", 0, grade=False, solution=True),
                          _cell("attention", 25)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == []


def _answer(grade_id: str, points: float = 2) -> dict:
    """A written answer: a markdown cell nbgrader leaves for manual grading (grade and solution)."""
    return {"cell_type": "markdown", "source": "model answer", "metadata": {"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": grade_id, "points": points}}}


def test_written_answers_are_outside_the_rubric_whatever_their_points():
    notebook = {"cells": [_cell("layer_norm", 20), _answer("layer_norm_answer"), _cell("attention", 25),
                          _answer("attention_answer", 7)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == []


def test_a_written_answer_carrying_a_parts_name_is_named():
    notebook = {"cells": [_answer("layer_norm", 20), _cell("attention", 25)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == [
        "nb.ipynb: grade_id 'layer_norm' is a rubric part, yet its cell is graded by hand (grade and solution); "
        "a part's verdict needs an autograded test cell",
        "nb.ipynb: rubric part 'layer_norm' has no autograded test cell (grade_id 'layer_norm')"]


def test_the_rubric_knows_the_releases_cells_graded_by_hand_and_keeps_them_out_of_max_score(tmp_path):
    released = json.loads(TB.release_notebook.read_text(encoding="utf-8"))
    answers = {c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"]["points"])
               for c in released["cells"] if c["metadata"]["nbgrader"].get("solution")
               and c["metadata"]["nbgrader"].get("grade")}
    assert len(answers) == 11 and sum(answers.values()) == 22
    rubric = load_rubric(TB.name)
    assert rubric.graded_by_hand == answers and rubric.points_by_hand == 22 and rubric.max_score == 100
    without = {**released, "cells": [c for c in released["cells"] if c["metadata"]["nbgrader"]["grade_id"]
                                     not in answers]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(without), encoding="utf-8")
    assert load_rubric(TB.name, path).graded_by_hand == {} and load_rubric(TB.name, path).max_score == 100


def test_unknown_grade_id_is_named():
    notebook = {"cells": [_cell("layer_norm", 20), _cell("attention", 25), _cell("layer_nrom", 5)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == [
        "nb.ipynb: grade_id 'layer_nrom' matches no rubric part (parts: layer_norm, attention)"]


def test_wrong_points_are_named():
    notebook = {"cells": [_cell("layer_norm", 15), _cell("attention", 25)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == [
        "nb.ipynb: grade_id 'layer_norm' has 15 points, the rubric gives 20"]


def test_part_without_a_cell_and_part_with_two_cells_are_named():
    notebook = {"cells": [_cell("layer_norm", 20), _cell("layer_norm", 20)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == [
        "nb.ipynb: grade_id 'layer_norm' has more than one autograded test cell",
        "nb.ipynb: rubric part 'attention' has no autograded test cell (grade_id 'attention')"]


def test_the_real_source_notebook_matches_the_rubric():
    source = TB.source_notebook
    notebook = json.loads(source.read_text(encoding="utf-8"))
    rubric = load_rubric(TB.name)
    assert len(rubric.parts) == 11
    assert release.rubric_mismatches(notebook, rubric.parts, str(source)) == []


def test_the_shipped_rubric_skips_the_plots_and_the_device_cells_as_released():
    skippable = load_rubric(TB.name).skip_when_unchanged
    assert set(skippable) == {"setup", "heads_plot", "gradient_plot", "placement_plot", "gpu_check"}
    released = json.loads((TB.release_notebook).read_text(encoding="utf-8"))
    by_id = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in released["cells"]}
    assert skippable == {k: by_id[k] for k in skippable}


@pytest.fixture
def assignment_copy(tmp_path, monkeypatch):
    """A copy of the assignment's rubric and suites whose rubric.toml a test rewrites; returns a function
    that sets skip_when_unchanged and loads the rubric."""
    folder = tmp_path / "assignments" / TB.name
    shutil.copytree(TB.folder, folder,
                    ignore=shutil.ignore_patterns("catalogue", "__pycache__"))
    monkeypatch.setattr(rubric_module, "ASSIGNMENTS", folder.parent)
    shipped = (folder / "rubric.toml").read_text(encoding="utf-8")
    assert "\nskip_when_unchanged = " in shipped

    def load(names: str, notebook=None):
        text = "\n".join(f"skip_when_unchanged = {names}" if line.startswith("skip_when_unchanged =") else line
                         for line in shipped.split("\n"))
        (folder / "rubric.toml").write_text(text, encoding="utf-8")
        return load_rubric(TB.name, notebook)

    return load


@pytest.mark.parametrize("names, message", [
    ('["heads_plot", "heads_plott"]', "skip_when_unchanged names 'heads_plott', but .*transformer_block.ipynb has "
                                      "no cells with that grade_id"),
    ('["layer_norm_function"]', "skip_when_unchanged names 'layer_norm_function', which is not a locked cell in "
                                ".*transformer_block.ipynb"),
    ('["heads_plot_intro"]', "skip_when_unchanged names 'heads_plot_intro', which is not a code cell"),
    ('"heads_plot"', "must be lists of names"),
])
def test_a_listed_cell_that_is_missing_or_not_locked_in_the_release_is_a_one_line_error(assignment_copy, names,
                                                                                        message):
    with pytest.raises(RubricError, match=message) as info:
        assignment_copy(names)
    assert "\n" not in str(info.value) and "rubric.toml" in str(info.value)


def test_the_release_generator_checks_the_list_against_the_notebook_it_releases(assignment_copy, tmp_path):
    """A plot added to the source and to the list at once is not refused for missing from the old release."""
    source = json.loads((TB.source_notebook).read_text())
    plot = next(c for c in source["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "gradient_plot")
    plot["metadata"]["nbgrader"]["grade_id"] = "new_plot"
    path = tmp_path / TB.source_notebook.name
    path.write_text(json.dumps(source), encoding="utf-8")
    assert set(assignment_copy('["heads_plot", "new_plot"]', path).skip_when_unchanged) == {"heads_plot", "new_plot"}
    release._require_rubric_match(TB, path)  # what `python -m autograder.authoring.release write` checks first
    with pytest.raises(RubricError, match="'new_plot', but .*release/transformer_block/transformer_block.ipynb"):
        assignment_copy('["heads_plot", "new_plot"]')
    plot["metadata"]["nbgrader"]["locked"] = False
    path.write_text(json.dumps(source), encoding="utf-8")
    with pytest.raises(RubricError, match="'new_plot', which is not a locked cell"):
        assignment_copy('["new_plot"]', path)
