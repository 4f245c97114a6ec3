"""One assignment's files, found by its name.  nbgrader's course layout puts the instructor notebook in
source/<name>/ and the student release in release/<name>/; the kit adds assignments/<name>/ (the manifest
rubric.toml, the hidden suites, the catalogue) and solutions/<name>.py (the reference as a module).  All four
are under one root: the course's when it holds the assignment's manifest, else the kit checkout's
(autograder.model.course)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

from autograder import REPO_ROOT
from autograder.grading.rubric import RubricError
from autograder.model import course

BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"


def nbgrader_meta(cell: dict[str, Any]) -> dict[str, Any]:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution_code(cell: dict[str, Any]) -> bool:
    """A code cell the student completes (nbgrader solution): the reference code in the source notebook, a stub
    in the release."""
    return cell.get("cell_type") == "code" and bool(nbgrader_meta(cell).get("solution"))


def is_written_answer(cell: dict[str, Any]) -> bool:
    """A cell nbgrader leaves for manual grading (grade and solution, a markdown answer here): the model answer
    in the source notebook, "YOUR ANSWER HERE" in the release.  Never run, never autograded."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and bool(meta.get("solution"))


def source_text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def code_cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


def strip_solution_markers(code: str) -> str:
    """Drop the marker lines, keeping the solution lines (and their indentation) between them."""
    kept: list[str] = []
    inside = False
    for line in code.split("\n"):
        marker = line.strip()
        if marker == BEGIN_MARKER and not inside:
            inside = True
        elif marker == END_MARKER and inside:
            inside = False
        elif "BEGIN SOLUTION" in line or "END SOLUTION" in line:
            # nbgrader treats any line containing these words as a marker, so such a line would silently
            # disagree between the release and the solutions module.
            raise ValueError(f"malformed or nested solution marker: {line!r}")
        else:
            kept.append(line)
    if inside:
        raise ValueError("solution region without a closing marker")
    return "\n".join(kept)


def assignment_names(root: Path | None = None) -> list[str]:
    """Every assignment of `root` (the folders of its assignments/ that hold a manifest); without a root, every
    one of the course and the checkout (autograder.model.course)."""
    if root is None:
        return course.assignment_names()
    folder = root / "assignments"
    return sorted(p.name for p in folder.iterdir() if (p / "rubric.toml").is_file()) if folder.is_dir() else []


def chosen_assignment(chosen: str | None) -> str:
    """The assignment a command works on: --assignment, else $AUTOGRADER_ASSIGNMENT, else the only one of the
    course and the checkout.  Raises RubricError (a usage error) when that leaves a choice."""
    if chosen or os.environ.get("AUTOGRADER_ASSIGNMENT"):
        return chosen or os.environ["AUTOGRADER_ASSIGNMENT"]
    names = assignment_names()
    if len(names) != 1:
        raise RubricError(f"the course and the kit hold {len(names)} assignments ({', '.join(names) or 'none'}): "
                          "name one with --assignment or AUTOGRADER_ASSIGNMENT")
    return names[0]


@dataclass(frozen=True)
class Assignment:
    name: str
    root: Path = None  # type: ignore[assignment]  # None: the course's when it holds the manifest, else the checkout

    def __post_init__(self) -> None:
        if self.root is None:
            object.__setattr__(self, "root", course.assignment_root(self.name))

    IMPORTS_GRADE_ID: ClassVar[str] = "imports"  # the locked code cell every solution module starts with
    POLICY_GRADE_ID: ClassVar[str] = "policy"    # the markdown cell generated from the manifest's policy

    @property
    def folder(self) -> Path:
        return self.root / "assignments" / self.name

    @property
    def manifest(self) -> Path:
        return self.folder / "rubric.toml"

    @property
    def source_notebook(self) -> Path:
        return self.root / "source" / self.name / f"{self.name}.ipynb"

    @property
    def release_notebook(self) -> Path:
        return self.root / "release" / self.name / f"{self.name}.ipynb"

    @property
    def solutions_module(self) -> Path:
        return self.root / "solutions" / f"{self.name}.py"

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def solution_code(self) -> dict[str, str]:
        """grade_id -> the reference code of each solution code cell of the source notebook, markers removed
        (written answers are solution cells too, but text, not code)."""
        source = json.loads(self.source_notebook.read_text(encoding="utf-8"))
        return {nbgrader_meta(c)["grade_id"]: strip_solution_markers(source_text(c))
                for c in source["cells"] if is_solution_code(c)}

    def written_answers(self) -> dict[str, str]:
        """grade_id -> the model answer of each written answer (manually graded cell) of the source notebook."""
        source = json.loads(self.source_notebook.read_text(encoding="utf-8"))
        return {nbgrader_meta(c)["grade_id"]: source_text(c) for c in source["cells"] if is_written_answer(c)}

    def imports_cell(self, notebook: dict[str, Any]) -> str:
        cells = [c for c in notebook["cells"] if c["cell_type"] == "code"
                 and nbgrader_meta(c).get("grade_id") == self.IMPORTS_GRADE_ID]
        if len(cells) != 1:
            raise ValueError(f"{self.name}: expected exactly one code cell with grade_id "
                             f"{self.IMPORTS_GRADE_ID!r}, found {len(cells)}")
        return source_text(cells[0])


def check_or_write_command(prog: str, doc: str, argv: list[str] | None,
                           sync: Callable[[Assignment, bool], list[str]]) -> int:
    """The command line of a generator: `check|write [--assignment NAME ...] [--root DIR]`; `sync(assignment,
    write)` returns one line per problem, printed on stderr (exit 1 when there is one)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    parser.add_argument("command", choices=["check", "write"])
    parser.add_argument("--assignment", action="append", help="only this assignment (repeatable; default: all)")
    parser.add_argument("--root", type=Path, default=None,
                        help="the course or checkout root (default: the course's, then this checkout)")
    args = parser.parse_args(argv)
    names = args.assignment or assignment_names(args.root or REPO_ROOT)
    for name in names:  # both generators start from the source notebook
        if not (notebook := Assignment(name, args.root).source_notebook).is_file():
            parser.error(f"no assignment {name!r}: {notebook} does not exist")
    problems = [line for name in names for line in sync(Assignment(name, args.root), args.command == "write")]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0
