"""The transformer_block catalogue: known mistakes and correct-but-different submissions, as data.

Every entry is a complete submission built from the reference solution cells of the source notebook
(`autograder.samples.solution_code`):

* `mutations`: (find, replace) edits of the reference code.  Each find-string must occur in the solution
  cells exactly `count` times (default once), or building the entry fails loudly, so the catalogue cannot
  silently rot when the reference changes;
* `replace`: solution cells replaced as a whole ({grade_id: code});
* `before` / `after`: extra cells run before the first / after the last solution cell (prints, helpers,
  redefinitions in later cells, global-RNG use).

A mistake declares the part in which it must lose points; it may also cost the parts built on that part
(`BUILT_ON`) and nothing else, unless the part is declared `EveryPart(name)`: a submission broken as a whole
(constructors only, or nothing implemented) must lose points in that part and may lose them in every part.
A variant must get full marks.  `hint` is a substring that the failure output of the mistake's own part must
contain (found by the suites by comparing outputs, never by reading code).  Entries are written as `.py`
files (cells separated by `# %%`) or, with `notebook=True`, as the release notebook with its solution cells
filled in.

`python -m autograder check-suite` grades every entry through the real sandboxed grader.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from autograder.authoring.notebook_sync import _nbgrader, _source
from autograder.authoring.samples import RELEASE_NOTEBOOK, solution_code

ASSIGNMENT = "transformer_block"

# part -> parts whose code it calls (a bug in one of those may legitimately cost it points too)
BUILT_ON: dict[str, frozenset[str]] = {
    "layer_norm": frozenset(),
    "attention": frozenset(),
    "multi_head_attention": frozenset({"attention"}),
    "transformer_block": frozenset({"layer_norm", "attention", "multi_head_attention"}),
    "gradient_experiment": frozenset(),
}


class EveryPart(str):
    """The `part` of a mistake that breaks every part at once.  It is the part's own name (so the mistake must
    lose points there, and is counted there, like any other), marked so that `may_cost` allows every part;
    a subclass of str rather than a new Entry field so that everything reading `entry.part` keeps working."""


def may_cost(part: str) -> frozenset[str]:
    """The parts a bug in `part` may lose points in: its own and every part built on it (all, for EveryPart)."""
    if isinstance(part, EveryPart):
        return frozenset(BUILT_ON)
    return frozenset({part} | {other for other, bases in BUILT_ON.items() if part in bases})


class Mutation(NamedTuple):
    find: str
    replace: str
    count: int = 1  # exact number of occurrences expected in the reference solution cells


class CatalogueError(Exception):
    """An entry does not apply to the current reference code."""


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


def M(find: str, replace: str, count: int = 1) -> Mutation:  # noqa: N802 (reads as data)
    return Mutation(find, replace, count)


def solution_cells(entry: Entry) -> dict[str, str]:
    """grade_id -> code of each solution cell after the entry's replacements and mutations."""
    cells = solution_code()
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


def _imports() -> str:
    for cell in _release()["cells"]:
        if _nbgrader(cell).get("grade_id") == "imports":
            return _source(cell)
    raise CatalogueError("the release notebook has no imports cell")


def _release() -> dict[str, Any]:
    return json.loads(RELEASE_NOTEBOOK.read_text(encoding="utf-8"))


def release_cells() -> dict[str, str]:
    """grade_id -> code of each solution cell as released: the stubs that raise NotImplementedError."""
    return {_nbgrader(c)["grade_id"]: _source(c) for c in _release()["cells"] if _nbgrader(c).get("solution")}


def python_source(entry: Entry) -> str:
    """The entry as a .py submission: one `# %%` cell per notebook cell."""
    cells = [_imports(), *entry.before, *solution_cells(entry).values(), *entry.after]
    return "\n\n".join(f"# %%\n{cell.strip()}\n" for cell in cells)


def _code_cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


def notebook(entry: Entry) -> dict[str, Any]:
    """The entry as the release notebook with its solution cells filled in (visible checks and plots kept)."""
    nb = copy.deepcopy(_release())
    code = solution_cells(entry)
    cells = []
    for cell in nb["cells"]:
        grade_id = _nbgrader(cell).get("grade_id")
        if _nbgrader(cell).get("solution") and grade_id in code:
            cell["source"] = code[grade_id]
        cells.append(cell)
        if grade_id == "imports":
            cells.extend(_code_cell(c) for c in entry.before)
    cells.extend(_code_cell(c) for c in entry.after)
    nb["cells"] = cells
    return nb


def write(entry: Entry, folder: Path) -> Path:
    path = folder / entry.filename
    folder.mkdir(parents=True, exist_ok=True)
    if entry.notebook:
        path.write_text(json.dumps(notebook(entry), indent=1) + "\n", encoding="utf-8")
    else:
        path.write_text(python_source(entry), encoding="utf-8")
    return path


def entries() -> list[Entry]:
    """The whole catalogue: the reference itself, then the variants, then the mistakes."""
    from assignments.transformer_block.catalogue.mistakes import MISTAKES
    from assignments.transformer_block.catalogue.variants import VARIANTS

    everything = [REFERENCE, *VARIANTS, *MISTAKES]
    names = [e.name for e in everything]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CatalogueError(f"duplicate entry names: {duplicates}")
    for e in everything:
        if e.part is not None and e.part not in BUILT_ON:
            raise CatalogueError(f"{e.name}: unknown part {e.part!r}")
    return everything


REFERENCE = Entry("reference", "the reference solution, unchanged")

# graded again and again by `check-suite --reruns` (the determinism check): the reference, a numeric bug in
# one part, a bug costing two parts, and a submission whose values come from its own process's unseeded
# global RNG (input_grad_norm without torch.manual_seed): its messages are reproducible only if the child
# seeds the global RNG before running the submission
DETERMINISM = ("reference", "ln-unbiased-variance", "mha-heads-view-without-transpose", "grad-no-seed")
