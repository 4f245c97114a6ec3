"""The source notebook is checked against the rubric before a release is generated: every autograded check
cell's grade_id names a rubric part with the same points, and every part has exactly one such cell."""
from __future__ import annotations

import json

from autograder import release
from autograder.rubric import Part, load_rubric

PARTS = [Part("layer_norm", "Layer normalisation", 20, "test_layer_norm.py"),
         Part("attention", "Attention", 25, "test_attention.py")]


def _cell(grade_id: str, points: float, *, grade: bool = True, solution: bool = False) -> dict:
    return {"cell_type": "code", "source": "", "metadata": {"nbgrader": {
        "grade": grade, "solution": solution, "grade_id": grade_id, "points": points}}}


def test_matching_notebook_has_no_problems():
    notebook = {"cells": [_cell("layer_norm", 20), _cell("layer_norm_function", 0, grade=False, solution=True),
                          _cell("attention", 25)]}
    assert release.rubric_mismatches(notebook, PARTS, "nb.ipynb") == []


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
    source = release.REPO_ROOT / "source" / release.ASSIGNMENT / release.NOTEBOOK_NAME
    notebook = json.loads(source.read_text(encoding="utf-8"))
    rubric = load_rubric(release.ASSIGNMENT)
    assert len(rubric.parts) == 5
    assert release.rubric_mismatches(notebook, rubric.parts, str(source)) == []
