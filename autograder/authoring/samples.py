"""Sample submissions built from an assignment's release notebook: what a student who solved every part,
who made one mistake, or who changed nothing would hand in.  Used by the demo and by the kit's own tests.

A buggy sample is the reference with mutations applied by the catalogue's one mechanism
(autograder/authoring/catalogue.py): each (find, replace) must occur exactly once in the solution cells.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from autograder.authoring.catalogue import REFERENCE, Entry, Mutation, load


def student_notebook(assignment: str, mutations: Iterable[tuple[str, str]] = (), solved: bool = True
                     ) -> dict[str, Any]:
    """The release notebook with its solution cells filled in from the reference, after `mutations`; with
    `solved=False`, the release as handed out."""
    catalogue = load(assignment)
    if not solved:
        return catalogue.notebook()
    return catalogue.notebook(Entry("sample", "a sample submission",
                                    mutations=tuple(Mutation(*m) for m in mutations)))


def write_notebook(notebook: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
    return path


def demo_class_work(assignment: str) -> dict[str, str]:
    """What each demo student handed in, in words: the demo prints it beside the grades."""
    catalogue = load(assignment)
    bob = catalogue.entry(catalogue.demo) if catalogue.demo else REFERENCE
    return {"alice": "correct (the reference solution)",
            "bob": f"one bug in {bob.part}: {bob.description}" if bob.part else "correct",
            "carol": "the release untouched (nothing implemented)"}


def write_demo_class(assignment: str, folder: Path) -> dict[str, Path]:
    """Three students: one correct, one with the mistake the manifest chose for the demo, one who submitted
    the release untouched."""
    catalogue = load(assignment)
    bob = catalogue.entry(catalogue.demo) if catalogue.demo else REFERENCE
    return {
        "alice": write_notebook(catalogue.notebook(REFERENCE), folder / "alice.ipynb"),
        "bob": write_notebook(catalogue.notebook(bob), folder / "bob.ipynb"),
        "carol": write_notebook(catalogue.notebook(), folder / "carol.ipynb"),
    }
