"""Keep what is generated in sync: solutions/transformer_block.py from the source notebook's solution cells,
and the source notebook's policy cell (what torch students may use) from the rubric.

The source notebook is the single place the reference code is edited; the module is rendered from it:

    a fixed header docstring + the imports cell + every solution cell (solution-region marker lines removed,
    indentation kept), joined with blank lines.

The rubric is the single place the off-limits policy is edited (it also decides what the sandbox disables);
the markdown cell with grade_id `policy` is rendered from it.  After `write`, regenerate the release
(`python -m autograder.authoring.release write`).

    python -m autograder.authoring.notebook_sync check   # exit 1 if solutions/transformer_block.py is stale
    python -m autograder.authoring.notebook_sync write   # regenerate it
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from autograder import REPO_ROOT

SOURCE_NOTEBOOK = Path("source/transformer_block/transformer_block.ipynb")
SOLUTIONS_MODULE = Path("solutions/transformer_block.py")
IMPORTS_GRADE_ID = "imports"
POLICY_GRADE_ID = "policy"
ASSIGNMENT = "transformer_block"

BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"

HEADER = '''"""Reference solution for the transformer_block assignment.

GENERATED from the solution cells of source/transformer_block/transformer_block.ipynb by
autograder/authoring/notebook_sync.py: edit the notebook, then run `python -m autograder.authoring.notebook_sync write`.
"""'''

# PEP 8 spacing between top-level definitions.
SEPARATOR = "\n\n\n"


def _nbgrader(cell: dict[str, Any]) -> dict[str, Any]:
    return cell.get("metadata", {}).get("nbgrader", {})


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


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
            # disagree between the release and this module.
            raise ValueError(f"malformed or nested solution marker: {line!r}")
        else:
            kept.append(line)
    if inside:
        raise ValueError("solution region without a closing marker")
    return "\n".join(kept)


def render_solutions_module(source_nb_path: str | Path) -> str:
    """The text solutions/transformer_block.py must have, rendered from the source notebook."""
    notebook = json.loads(Path(source_nb_path).read_text(encoding="utf-8"))
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    imports = [cell for cell in code_cells if _nbgrader(cell).get("grade_id") == IMPORTS_GRADE_ID]
    if len(imports) != 1:
        raise ValueError(f"expected exactly one code cell with grade_id {IMPORTS_GRADE_ID!r}, found {len(imports)}")
    solutions = [cell for cell in code_cells if _nbgrader(cell).get("solution")]
    if not solutions:
        raise ValueError("the notebook has no solution cells")
    parts = [HEADER, _source(imports[0]).strip()]
    parts += [strip_solution_markers(_source(cell)).strip() for cell in solutions]
    return SEPARATOR.join(parts) + "\n"


def render_policy(rubric: Any) -> str:
    """The notebook's policy cell, in the rubric's words."""
    rows = [f"| {number} {part.title} | {', '.join(f'`{name}`' for name in part.off_limits)} |"
            for number, part in enumerate(rubric.parts, start=1) if part.off_limits]
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


def _policy_cell(notebook: dict[str, Any]) -> dict[str, Any]:
    cells = [c for c in notebook["cells"] if _nbgrader(c).get("grade_id") == POLICY_GRADE_ID]
    if len(cells) != 1:
        raise ValueError(f"expected exactly one cell with grade_id {POLICY_GRADE_ID!r}, found {len(cells)}")
    return cells[0]


def sync_policy(notebook_path: Path, write: bool) -> bool:
    """Whether the notebook's policy cell matches the rubric; with `write`, make it match."""
    from autograder.judging.rubric import load_rubric

    notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
    cell, rendered = _policy_cell(notebook), render_policy(load_rubric(ASSIGNMENT))
    if _source(cell) == rendered:
        return True
    if write:
        cell["source"] = rendered.splitlines(keepends=True)
        notebook_path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.notebook_sync", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["check", "write"])
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)

    if not sync_policy(args.root / SOURCE_NOTEBOOK, args.command == "write"):
        print(f"{SOURCE_NOTEBOOK}: its policy cell differs from the rubric's forbidden operations; "
              f"run `python -m autograder.authoring.notebook_sync write`", file=sys.stderr)
        return 1
    rendered = render_solutions_module(args.root / SOURCE_NOTEBOOK)
    module_path = args.root / SOLUTIONS_MODULE
    if args.command == "write":
        module_path.write_text(rendered, encoding="utf-8")
        return 0
    current = module_path.read_text(encoding="utf-8") if module_path.exists() else None
    if current != rendered:
        print(f"{SOLUTIONS_MODULE} is stale: it differs from the solution cells of {SOURCE_NOTEBOOK}; "
              f"run `python -m autograder.authoring.notebook_sync write`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
