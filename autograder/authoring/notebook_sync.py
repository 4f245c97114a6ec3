"""Keep what is generated in sync, for every assignment: solutions/<name>.py from the source notebook's
solution cells, the source notebook's policy cell (what torch students may use) from the manifest, and its
table of parts (a markdown cell with grade_id `parts`, where it has one) from the manifest and the notebook.

The source notebook is the single place the reference code is edited; the module is rendered from it:

    a fixed header docstring + the imports cell + every solution cell (solution-region marker lines removed,
    indentation kept), joined with blank lines.

The manifest (assignments/<name>/rubric.toml) is the single place the off-limits policy is edited (it also
decides what the sandbox disables); the markdown cell with grade_id `policy` is rendered from it.  After
`write`, regenerate the release (`python -m autograder.authoring.release write`).

    python -m autograder.authoring.notebook_sync check [--assignment NAME ...]   # exit 1 if anything is stale
    python -m autograder.authoring.notebook_sync write [--assignment NAME ...]   # regenerate it
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from autograder.authoring.assignment import (Assignment, check_or_write_command, nbgrader_meta, source_text,
                                             strip_solution_markers)

# PEP 8 spacing between top-level definitions.
SEPARATOR = "\n\n\n"


def _header(assignment: Assignment) -> str:
    return (f'"""Reference solution for the {assignment.name} assignment.\n\n'
            f"GENERATED from the solution cells of {assignment.relative(assignment.source_notebook)} by\n"
            "autograder/authoring/notebook_sync.py: edit the notebook, then run "
            '`python -m autograder.authoring.notebook_sync write`.\n"""')


def render_solutions_module(assignment: Assignment) -> str:
    """The text solutions/<name>.py must have, rendered from the source notebook."""
    notebook = json.loads(assignment.source_notebook.read_text(encoding="utf-8"))
    solutions = [cell for cell in notebook["cells"] if cell["cell_type"] == "code" and nbgrader_meta(cell).get("solution")]
    if not solutions:
        raise ValueError(f"{assignment.relative(assignment.source_notebook)} has no solution cells")
    parts = [_header(assignment), assignment.imports_cell(notebook).strip()]
    parts += [strip_solution_markers(source_text(cell)).strip() for cell in solutions]
    return SEPARATOR.join(parts) + "\n"


_PART_HEADING = re.compile(r"^#+\s*Part\s+(\w+)\b", re.MULTILINE)


def part_numbers(notebook: dict[str, Any]) -> dict[str, str]:
    """grade_id of each check cell -> the number of the "## Part <number> — ..." heading above it ("2b" for a
    sub-part), so that the policy table names a part as the notebook does."""
    numbers, heading = {}, None
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown" and (found := _PART_HEADING.search(source_text(cell))):
            heading = found.group(1)
        meta = nbgrader_meta(cell)
        if heading is not None and meta.get("grade") and not meta.get("solution"):
            numbers[meta["grade_id"]] = heading
    return numbers


def render_policy(rubric: Any, notebook: dict[str, Any] | None = None) -> str:
    """The notebook's policy cell, in the manifest's words; parts numbered as the notebook's headings number
    them (by their place in the manifest without a notebook, or for a part without a heading)."""
    numbers = part_numbers(notebook) if notebook is not None else {}
    rows = [f"| {numbers.get(part.name, index)} {part.title} | {', '.join(f'`{name}`' for name in part.off_limits)} |"
            for index, part in enumerate(rubric.parts, start=1) if part.off_limits]
    return "\n".join([
        "### What you may use from torch",
        "",
        "Each part asks you to build something torch already has. Torch's own version is **off-limits in the whole",
        "notebook**: when your notebook is graded, calling one raises `ForbiddenOperation`, so the check that called",
        "it fails, and a part in which one was reached scores 0. The visible check cells compare your code with",
        "some of them; that is fine, because check cells are not run when grading.",
        "",
        "| Part | Off-limits |",
        "|---|---|",
        *rows,
        "",
        "Fine to use anywhere: " + ", ".join(f"`{name}`" for name in rubric.fine) + ".",
    ])


_TIME = re.compile(r"\*\*Time:\*\*\s*about\s+(\d+)\s+minutes")
_DEFINED = re.compile(r"^(?:def|class)\s+(\w+)", re.MULTILINE)


def render_parts(rubric: Any, notebook: dict[str, Any]) -> str:
    """The notebook's table of parts (a markdown cell with grade_id `parts`, where a notebook has one): each part
    as its heading numbers it, its title and points from the manifest, what it asks students to write (the
    names its solution cells define) and its time (from its `<part>_goals` cell); then the written answers."""
    numbers, cells = part_numbers(notebook), notebook["cells"]
    written = [nbgrader_meta(c) for c in cells if nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("solution")
               and c["cell_type"] == "markdown"]
    names: dict[str, list[str]] = {}
    pending: list[str] = []
    minutes: dict[str, int] = {}
    for cell in cells:
        meta = nbgrader_meta(cell)
        if cell["cell_type"] == "code" and meta.get("solution"):
            pending += _DEFINED.findall(source_text(cell))
        elif meta.get("grade") and not meta.get("solution"):
            names[meta["grade_id"]], pending = pending, []
        if (grade_id := meta.get("grade_id", "")).endswith("_goals") and (found := _TIME.search(source_text(cell))):
            minutes[grade_id[:-len("_goals")]] = int(found.group(1))
    in_notebook = sorted(rubric.parts, key=lambda p: list(names).index(p.name) if p.name in names else len(names))
    rows = [f"| {numbers.get(p.name, '')} | {p.title} | {', '.join(f'`{n}`' for n in names.get(p.name, []))} | "
            f"{f'{minutes[p.name]} min' if p.name in minutes else ''} | {p.points:g} |" for p in in_notebook]
    total = sum(minutes.values())
    duration = f"{total // 60} h {total % 60:02d} min" if total >= 60 else f"{total} min"  # not "0 h 40 min"
    lines = ["### The parts", "", "| Part | What you build | What you write | Time | Points |", "|---|---|---|---|---|",
             *rows, f"| | **All parts** | | **about {duration}** | **{rubric.max_score:g}** |"]
    if written:
        points = sum(float(m.get("points", 0)) for m in written)
        lines += ["", f"Besides these, {len(written)} short questions ask for an answer in words "
                      f"({points:g} points in all). Your instructor reads and grades them by hand: they are not part of "
                      f"the {rubric.max_score:g} points the autograder gives."]
    return "\n".join(lines)


def _generated_cell(notebook: dict[str, Any], grade_id: str, required: bool = True) -> dict[str, Any] | None:
    cells = [c for c in notebook["cells"] if nbgrader_meta(c).get("grade_id") == grade_id]
    if len(cells) > 1 or (required and not cells):
        raise ValueError(f"expected exactly one cell with grade_id {grade_id!r}, found {len(cells)}")
    return cells[0] if cells else None


def _policy_cell(notebook: dict[str, Any]) -> dict[str, Any]:
    cells = [c for c in notebook["cells"] if nbgrader_meta(c).get("grade_id") == Assignment.POLICY_GRADE_ID]
    if len(cells) != 1:
        raise ValueError(f"expected exactly one cell with grade_id {Assignment.POLICY_GRADE_ID!r}, found {len(cells)}")
    return cells[0]


PARTS_GRADE_ID = "parts"  # a notebook's optional table of parts, generated like its policy cell


def sync_policy(assignment: Assignment, write: bool, notebook_path: Path | None = None) -> bool:
    """Whether the notebook's generated cells (its policy cell, and its table of parts if it has one) match the
    manifest and the notebook; with `write`, make them match."""
    from autograder.grading.rubric import load_rubric

    notebook_path = notebook_path or assignment.source_notebook
    notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
    # against the source notebook: the release may not exist yet, and is generated from this one
    rubric = load_rubric(assignment.name, assignment.source_notebook, course=assignment.root)
    generated = [(_policy_cell(notebook), render_policy(rubric, notebook))]
    if (parts := _generated_cell(notebook, PARTS_GRADE_ID, required=False)) is not None:
        generated.append((parts, render_parts(rubric, notebook)))
    stale = [(cell, rendered) for cell, rendered in generated if source_text(cell) != rendered]
    if not stale:
        return True
    if write:
        for cell, rendered in stale:
            cell["source"] = rendered.splitlines(keepends=True)
        notebook_path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return write


def sync(assignment: Assignment, write: bool) -> list[str]:
    """One line per stale file of `assignment` (after `write`, none)."""
    command = "run `python -m autograder.authoring.notebook_sync write`"
    source = assignment.relative(assignment.source_notebook)
    if not sync_policy(assignment, write):
        return [f"{source}: its policy cell or its table of parts differs from what the manifest and the notebook "
                f"say; {command}"]
    rendered = render_solutions_module(assignment)
    module = assignment.solutions_module
    if write:
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(rendered, encoding="utf-8")
        return []
    current = module.read_text(encoding="utf-8") if module.exists() else None
    if current != rendered:
        return [f"{assignment.relative(module)} is stale: it differs from the solution cells of {source}; {command}"]
    return []


def main(argv: list[str] | None = None) -> int:
    return check_or_write_command("python -m autograder.authoring.notebook_sync", __doc__, argv, sync)


if __name__ == "__main__":
    sys.exit(main())
