"""An assignment's catalogue: known mistakes and correct-but-different submissions, as data.  The one
interface check-suite, the demo, the benchmark and the kit's tests use, whatever the assignment.

Every entry is a complete submission built from the reference solution cells of the assignment's source
notebook:

* `mutations`: (find, replace) edits of the reference code.  Each find-string must occur in the solution
  cells exactly `count` times (default once), or building the entry fails loudly, so a catalogue cannot
  silently rot when the reference changes;
* `replace`: solution cells replaced as a whole ({grade_id: code});
* `before` / `after`: extra cells run before the first / after the last solution cell (prints, helpers,
  redefinitions in later cells, global-RNG use).

A mistake declares the part in which it must lose points; it may also cost the parts built on that part
(`built_on` in the manifest) and nothing else, unless the part is declared `EveryPart(name)`: a submission
broken as a whole (constructors only, or nothing implemented) must lose points in that part and may lose
them in every part.  A variant must get full marks.  `hint` is a substring that the failure output of the
mistake's own part must contain (found by the suites by comparing outputs, never by reading code).  Entries
are written as `.py` files (cells separated by `# %%`) or, with `notebook=True`, as the release notebook with
its solution cells filled in.

An assignment provides its catalogue as the package `assignments/<name>/catalogue/`, whose `__init__.py`
defines `MISTAKES` and `VARIANTS` (lists of `Entry`).  The rest comes from the manifest,
`assignments/<name>/rubric.toml`: `built_on = [...]` in each `[[parts]]` table, and a `[catalogue]` table
with `determinism` (the entries `check-suite --reruns` grades again and again) and `demo` (the mistake the
demo class shows).  `load(name)` returns the `Catalogue`.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from autograder.authoring.assignment import (Assignment, code_cell, is_solution_code, is_written_answer,
                                             nbgrader_meta, source_text)
from autograder.grading.rubric import RubricError, read_manifest
from autograder.model.course import COURSE_ROOT_VARIABLE


class Mutation(NamedTuple):
    find: str
    replace: str
    count: int = 1  # exact number of occurrences expected in the reference solution cells


def M(find: str, replace: str, count: int = 1) -> Mutation:  # noqa: N802 (reads as data)
    return Mutation(find, replace, count)


class EveryPart(str):
    """The `part` of a mistake that breaks every part at once.  It is the part's own name (so the mistake must
    lose points there, and is counted there, like any other), marked so that `may_cost` allows every part;
    a subclass of str rather than a new Entry field so that everything reading `entry.part` keeps working."""


class CatalogueError(Exception):
    """A catalogue that cannot be used: missing, inconsistent with its manifest, or rotted."""


@dataclass(frozen=True)
class Entry:
    name: str
    description: str
    part: str | None = None  # the part a mistake must lose points in; None for a correct variant
    mutations: tuple[Mutation, ...] = ()
    replace: dict[str, str] = field(default_factory=dict)
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    hint: str | None = None
    notebook: bool = False

    @property
    def kind(self) -> str:
        return "variant" if self.part is None else "mistake"

    @property
    def filename(self) -> str:
        return f"{self.kind}-{self.name}.{'ipynb' if self.notebook else 'py'}"


REFERENCE = Entry("reference", "the reference solution, unchanged")


def release_cells(assignment: str | Assignment) -> dict[str, str]:
    """grade_id -> code of each solution code cell as released: the stubs that raise NotImplementedError (for
    entries that hand in the release's cells, such as "nothing implemented")."""
    assignment = assignment if isinstance(assignment, Assignment) else Assignment(assignment)
    release = json.loads(assignment.release_notebook.read_text(encoding="utf-8"))
    return {nbgrader_meta(c)["grade_id"]: source_text(c) for c in release["cells"] if is_solution_code(c)}


class Catalogue:
    def __init__(self, assignment: Assignment, mistakes: list[Entry], variants: list[Entry]) -> None:
        self.assignment = assignment
        where = assignment.relative(assignment.manifest)
        try:
            manifest = read_manifest(assignment.manifest)
        except RubricError as exc:
            raise CatalogueError(str(exc)) from None
        self.built_on: dict[str, frozenset[str]] = {p.name: frozenset(p.built_on) for p in manifest.parts}
        table = manifest.catalogue
        self.entries_ = [REFERENCE, *variants, *mistakes]
        names = [e.name for e in self.entries_]
        if duplicates := sorted({n for n in names if names.count(n) > 1}):
            raise CatalogueError(f"{assignment.name}: duplicate entry names: {duplicates}")
        for e in self.entries_:
            if e.part is not None and e.part not in self.built_on:
                raise CatalogueError(f"{assignment.name}: {e.name}: unknown part {e.part!r}")
        self.determinism: tuple[str, ...] = tuple(table.get("determinism", ()))
        self.demo: str | None = table.get("demo")
        if unknown := sorted(set(self.determinism) - set(names)):
            raise CatalogueError(f"{where}: [catalogue] determinism names entries the catalogue does not have: {unknown}")
        if self.demo is not None and self.entry(self.demo).part is None:
            raise CatalogueError(f"{where}: [catalogue] demo must name a mistake, not {self.demo!r}")

    def entries(self) -> list[Entry]:
        """The whole catalogue: the reference itself, then the variants, then the mistakes."""
        return list(self.entries_)

    def entry(self, name: str) -> Entry:
        for e in self.entries_:
            if e.name == name:
                return e
        raise CatalogueError(f"{self.assignment.name}: no catalogue entry named {name!r}")

    def may_cost(self, part: str) -> frozenset[str]:
        """The parts a bug in `part` may lose points in: its own and every part built on it (all, for EveryPart)."""
        if isinstance(part, EveryPart):
            return frozenset(self.built_on)
        return frozenset({part} | {other for other, bases in self.built_on.items() if part in bases})

    # building entries ---------------------------------------------------------------------------------------
    def solution_cells(self, entry: Entry) -> dict[str, str]:
        """grade_id -> code of each solution cell after the entry's replacements and mutations."""
        cells = self.assignment.solution_code()
        for grade_id, code in entry.replace.items():
            if grade_id not in cells:
                raise CatalogueError(f"{entry.name}: no solution cell {grade_id!r} to replace")
            cells[grade_id] = code
        for mutation in entry.mutations:
            found = sum(text.count(mutation.find) for text in cells.values())
            if found != mutation.count:
                raise CatalogueError(f"{entry.name}: {mutation.find!r} occurs {found} times in the reference "
                                     f"solution cells, expected {mutation.count}")
            cells = {k: v.replace(mutation.find, mutation.replace) for k, v in cells.items()}
        return cells

    @cached_property
    def _release(self) -> dict[str, Any]:
        return json.loads(self.assignment.release_notebook.read_text(encoding="utf-8"))

    def python_source(self, entry: Entry) -> str:
        """The entry as a .py submission: one `# %%` cell per notebook cell."""
        imports = self.assignment.imports_cell(self._release)
        cells = [imports, *entry.before, *self.solution_cells(entry).values(), *entry.after]
        return "\n\n".join(f"# %%\n{cell.strip()}\n" for cell in cells)

    def notebook(self, entry: Entry | None = None) -> dict[str, Any]:
        """The entry as the release notebook with its solution cells filled in (visible checks and plots kept)
        and its written answers given the source's model answers (never graded here, but a student who did
        the work answered them: nbgrader leaves them for manual grading); without an entry, the release as
        handed out (nothing solved, nothing answered)."""
        nb = copy.deepcopy(self._release)
        if entry is None:
            return nb
        code = self.solution_cells(entry)
        answers = self.assignment.written_answers()
        cells = []
        for cell in nb["cells"]:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if is_solution_code(cell) and grade_id in code:
                cell["source"] = code[grade_id]
            elif is_written_answer(cell) and grade_id in answers:
                cell["source"] = answers[grade_id]
            cells.append(cell)
            if grade_id == self.assignment.IMPORTS_GRADE_ID:
                cells.extend(code_cell(c) for c in entry.before)
        cells.extend(code_cell(c) for c in entry.after)
        nb["cells"] = cells
        return nb

    def write(self, entry: Entry, folder: Path) -> Path:
        path = folder / entry.filename
        folder.mkdir(parents=True, exist_ok=True)
        if entry.notebook:
            path.write_text(json.dumps(self.notebook(entry), indent=1) + "\n", encoding="utf-8")
        else:
            path.write_text(self.python_source(entry), encoding="utf-8")
        return path


def _importable(root: Path) -> None:
    """Make `assignments.<name>` importable from `root`: on sys.path, and, when a package `assignments` was
    already imported from another root (the checkout's beside a course's), one more folder of it, so that both
    roots' assignments import under their own names."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    package = sys.modules.get("assignments")
    path = getattr(package, "__path__", None)
    if path is not None and str(root / "assignments") not in list(path):
        path.append(str(root / "assignments"))


@contextlib.contextmanager
def _course_of(assignment: Assignment) -> Iterator[None]:
    """While a catalogue imports: its assignment's root is the course root, so that what its modules look up
    by name (release_cells("hw5"), Assignment("hw5")) is found where the catalogue is, whatever the current
    directory."""
    previous = os.environ.get(COURSE_ROOT_VARIABLE)
    os.environ[COURSE_ROOT_VARIABLE] = str(assignment.root)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(COURSE_ROOT_VARIABLE, None)
        else:
            os.environ[COURSE_ROOT_VARIABLE] = previous


def load(assignment: str | Assignment) -> Catalogue:
    """The catalogue of `assignment` (a name or an Assignment)."""
    assignment = assignment if isinstance(assignment, Assignment) else Assignment(assignment)
    # The catalogue lives beside the assignment's suites (assignments/<name>/catalogue/ of the course or the
    # checkout), never in the installed package, so that root is put on sys.path: its modules import each other
    # by absolute name, and the catalogue must be the same module whether the kit's tests import it or a command
    # does.  This is trusted code; the sandboxed child never inherits this sys.path (it builds its own).
    _importable(assignment.root)
    try:
        with _course_of(assignment):
            module = importlib.import_module(f"assignments.{assignment.name}.catalogue")
    except ModuleNotFoundError as exc:
        raise CatalogueError(f"assignment {assignment.name!r} has no catalogue "
                             f"(assignments/{assignment.name}/catalogue/): {exc}") from None
    try:
        return Catalogue(assignment, list(module.MISTAKES), list(module.VARIANTS))
    except AttributeError as exc:
        raise CatalogueError(f"{module.__name__} must define MISTAKES and VARIANTS: {exc}") from None
