"""Sample submissions built from the release notebook: what a student who solved every part, who got one
thing wrong, or who changed nothing would hand in.  Used by the demo and by the kit's own tests.

A mutation is a (find, replace) pair applied to the reference code before it is pasted into the release
notebook's solution cells, so a buggy sample is the reference with exactly one realistic mistake.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from autograder.authoring.notebook_sync import REPO_ROOT, SOURCE_NOTEBOOK, _nbgrader, _source, strip_solution_markers

RELEASE_NOTEBOOK = REPO_ROOT / "release" / "transformer_block" / "transformer_block.ipynb"

Mutation = tuple[str, str]

# one bug a demo class can show: the unbiased variance (divides by d - 1), loses points in layer_norm only
UNBIASED_VARIANCE: Mutation = ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
                               "var = x.var(dim=-1, keepdim=True)")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def solution_code() -> dict[str, str]:
    """grade_id -> the reference code of each solution cell, markers removed."""
    source = _load(REPO_ROOT / SOURCE_NOTEBOOK)
    return {_nbgrader(c)["grade_id"]: strip_solution_markers(_source(c))
            for c in source["cells"] if _nbgrader(c).get("solution")}


def student_notebook(mutations: list[Mutation] = (), solved: bool = True) -> dict[str, Any]:
    """The release notebook with its solution cells filled in from the reference, after `mutations`."""
    notebook = copy.deepcopy(_load(RELEASE_NOTEBOOK))
    if not solved:
        return notebook
    code = solution_code()
    unused = list(mutations)
    for cell in notebook["cells"]:
        grade_id = _nbgrader(cell).get("grade_id")
        if not _nbgrader(cell).get("solution") or grade_id not in code:
            continue
        text = code[grade_id]
        for find, replace in mutations:
            if find in text:
                text = text.replace(find, replace)
                unused = [m for m in unused if m != (find, replace)]
        cell["source"] = text
    if unused:
        raise ValueError(f"mutation does not apply to the reference code: {unused[0][0]!r}")
    return notebook


def write_notebook(notebook: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
    return path


def write_demo_class(folder: Path) -> dict[str, Path]:
    """Three students: one correct, one with a single bug, one who submitted the release untouched."""
    return {
        "alice": write_notebook(student_notebook(), folder / "alice.ipynb"),
        "bob": write_notebook(student_notebook([UNBIASED_VARIANCE]), folder / "bob.ipynb"),
        "carol": write_notebook(student_notebook(solved=False), folder / "carol.ipynb"),
    }
