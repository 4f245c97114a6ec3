"""The shape every assignment's notebook gives its students, checked alike for each assignment (by
test_notebook_sources.py for transformer_block, test_norms_and_gates.py for norms_and_gates): per part a goals
cell after its heading, staged hints before its check cell and a written question after it, graded by hand and
kept out of the autograded total; a `how_to_work` cell after the policy cell; the generated table of parts
after the intro."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from autograder.authoring import notebook_sync
from autograder.authoring.assignment import Assignment, nbgrader_meta, source_text
from autograder.grading.rubric import load_rubric

LOCKED_MARKDOWN = {"grade": False, "locked": True, "schema_version": 3, "solution": False, "task": False}
ANSWER_META = {"grade": True, "locked": False, "points": 2, "schema_version": 3, "solution": True, "task": False}
GOALS = re.compile(r"\*\*You will:\*\* \S.*?\n\n\*\*Time:\*\* about (\d+) minutes · "
                   r"\*\*Difficulty:\*\* (warm-up|core|stretch)", re.S)
HINT = re.compile(r"<details><summary>Hint (\d): [^<\n]+</summary>\n\n(.+?)</details>", re.S)


def cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def by_id(notebook_cells: list[dict[str, Any]]) -> dict[str, int]:
    return {nbgrader_meta(c)["grade_id"]: i for i, c in enumerate(notebook_cells)}


def grade_cells(path: Path) -> list[dict[str, Any]]:
    """The autograded test cells (the written answers are grade cells too, graded by hand)."""
    return [c for c in cells(path) if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]


def answer_cells(path: Path) -> list[dict[str, Any]]:
    return [c for c in cells(path) if nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("solution")]


def reference_lines(assignment: Assignment) -> set[str]:
    """The reference's code lines that say something (not `else:` or a bare `return x`)."""
    return {line.strip() for code in assignment.solution_code().values() for line in code.split("\n")
            if len(line.strip()) >= 16 and not line.strip().startswith(('"""', "#"))}


def assert_part_steps(assignment: Assignment, part: str, pictures: set[str] = frozenset()) -> None:
    """`part`'s goals right after its heading, its hints right before its check cell (after its last solution
    cell), its question and answer cells right after the check cell (or after the part's picture, named in
    `pictures`, when the question asks about it), each in the kit's format."""
    nb = cells(assignment.source_notebook)
    at = by_id(nb)
    check = at[part]
    heading = max(i for i, c in enumerate(nb[:check]) if source_text(c).startswith("## Part "))
    assert nb[heading + 1]["id"] == f"{part}_goals", "the goals come right after the part's heading"
    assert nbgrader_meta(nb[check - 1])["grade_id"] == f"{part}_hints", "the hints come right before the check cell"
    assert nb[check - 2]["cell_type"] == "code" and nbgrader_meta(nb[check - 2]).get("solution"), \
        "the hints follow the part's last solution cell"
    after = check + 1
    while nbgrader_meta(nb[after]).get("grade_id") in pictures \
            or nbgrader_meta(nb[after]).get("grade_id", "").endswith("_intro") \
            and nbgrader_meta(nb[after + 1]).get("grade_id") in pictures:
        after += 1
    assert [c["id"] for c in nb[after:after + 2]] == [f"{part}_question_prompt", f"{part}_answer"]
    for suffix in ("goals", "hints", "question_prompt"):
        cell = nb[at[f"{part}_{suffix}"]]
        assert cell["cell_type"] == "markdown" and cell["id"] == f"{part}_{suffix}"
        assert nbgrader_meta(cell) == {**LOCKED_MARKDOWN, "grade_id": f"{part}_{suffix}"}

    goals = GOALS.fullmatch(source_text(nb[at[f"{part}_goals"]]))
    assert goals and 10 <= int(goals.group(1)) <= 60, source_text(nb[at[f"{part}_goals"]])
    hints = source_text(nb[at[f"{part}_hints"]])
    staged = HINT.findall(hints)
    assert 2 <= len(staged) <= 3 and [int(n) for n, _ in staged] == list(range(1, len(staged) + 1)), hints
    assert hints.count("<details>") == hints.count("</details>") == len(staged)
    assert "```" not in hints, "hints give ideas, never code blocks"
    leaked = {line for line in reference_lines(assignment) if line in hints}
    assert not leaked, f"the hints of {part} quote the reference: {leaked}"
    assert source_text(nb[at[f"{part}_question_prompt"]]).startswith(
        "**Question (2 points, read by your instructor).** ")


def assert_written_answers(assignment: Assignment) -> None:
    """One answer cell per part, in the rubric's order: graded by hand, a model answer in the source only, and
    outside the autograded total, which the rubric's parts alone make up."""
    rubric = load_rubric(assignment.name)
    source, released = answer_cells(assignment.source_notebook), answer_cells(assignment.release_notebook)
    assert [c["id"] for c in source] == [f"{part.name}_answer" for part in rubric.parts]
    for cell in source:
        assert cell["cell_type"] == "markdown" and nbgrader_meta(cell) == {**ANSWER_META, "grade_id": cell["id"]}
        assert 150 < len(source_text(cell)) < 900, f"{cell['id']}: a model answer is a few sentences"
    release_text = assignment.release_notebook.read_text(encoding="utf-8")
    assert [c["id"] for c in released] == [c["id"] for c in source]
    for cell in released:
        assert source_text(cell) == "YOUR ANSWER HERE" and nbgrader_meta(cell)["points"] == 2 \
            and not nbgrader_meta(cell)["locked"]
    for model in (source_text(c) for c in source):
        assert not [line for line in model.split("\n") if len(line) > 30 and line in release_text], \
            "a model answer leaked into the release"
    autograded = sum(nbgrader_meta(c)["points"] for c in grade_cells(assignment.release_notebook))
    assert autograded == sum(part.points for part in rubric.parts) == rubric.max_score
    assert rubric.graded_by_hand == {c["id"]: 2.0 for c in released}


def assert_how_to_work_and_parts(assignment: Assignment) -> None:
    """`how_to_work` right after the policy cell and the generated table of parts right after the intro, in
    the source and in the release."""
    rubric = load_rubric(assignment.name)
    for path in (assignment.source_notebook, assignment.release_notebook):
        nb = cells(path)
        at = by_id(nb)
        assert at["how_to_work"] == at[Assignment.POLICY_GRADE_ID] + 1
        cell = nb[at["how_to_work"]]
        assert cell["cell_type"] == "markdown" and nbgrader_meta(cell)["locked"] and not nbgrader_meta(cell)["grade"]
        for says in ("You will:", "one at a time", "by hand", f"{rubric.max_score:g}"):
            assert says in source_text(cell), says
        assert at[notebook_sync.PARTS_GRADE_ID] == at["intro"] + 1
    notebook = json.loads(assignment.source_notebook.read_text(encoding="utf-8"))
    parts = source_text(notebook["cells"][by_id(notebook["cells"])[notebook_sync.PARTS_GRADE_ID]])
    assert parts == notebook_sync.render_parts(load_rubric(assignment.name, assignment.source_notebook), notebook)
    assert "| Points |" not in source_text(notebook["cells"][0]), "the intro keeps no table of its own"
