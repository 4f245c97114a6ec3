"""`python -m autograder add-assignment`: one of the kit's assignments copied into a course under the course's
own assignment id, with the parts and points the instructor chooses.

    python -m autograder add-assignment transformer_block --as hw5 --course COURSE \\
        [--parts layer_norm,attention,...] [--points 100 | --keep-points] [--kit CHECKOUT] [--force]

It writes, under the course root (the layout autograder.model.course looks in before the kit's checkout):

* source/<id>/<id>.ipynb: the kit's source notebook without the cells of the parts left out (their section,
  from the part's "## Part" heading to the next level-2 heading: explanation, solution cells, hints, check cell,
  question and written answer), each check cell carrying its part's new points, the headings' "(N points)" and
  the total in the notebook's text with them.  A locked instructor cell in a part's section (a plot, the GPU
  check) stays when every name it uses that a solution cell defines is still defined, and goes otherwise;
* assignments/<id>/: rubric.toml (the parts kept, re-summed, `skip_when_unchanged` limited to the cells still
  there), the hidden suites of the parts kept and every helper module beside them, and catalogue/: the kit's
  catalogue limited to the entries that still apply (their part is kept, and they build on the new notebook);
* then the kit's own generators: the policy cell and the table of parts (notebook_sync), solutions/<id>.py,
  and release/<id>/<id>.ipynb (nbgrader generate_assignment, release.py).

nbgrader releases only source/, and the sandbox never shows the course root: the hidden material stays hidden.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from autograder import REPO_ROOT
from autograder.authoring.assignment import Assignment, nbgrader_meta, source_text
from autograder.grading.rubric import Part, RubricError, read_manifest
from autograder.model.course import COURSE_ROOT_VARIABLE

HELP = "add one of the kit's assignments to a course under the course's own id, with the parts and points chosen"


class AddError(Exception):
    """What stops add-assignment: one line naming the file (or flag) and the problem."""


# --- the parts -----------------------------------------------------------------------------------------------

def chosen_parts(manifest_path: Path, parts: tuple[Part, ...], wanted: list[str] | None) -> list[Part]:
    """The parts kept, in the manifest's order; every part a kept part is built on must be kept too."""
    if wanted is None:
        return list(parts)
    known = {p.name: p for p in parts}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise AddError(f"--parts: {manifest_path} has no part {', '.join(map(repr, unknown))} "
                       f"(its parts: {', '.join(known)})")
    if not wanted:
        raise AddError("--parts: name at least one part")
    missing = {base: part for part in wanted for base in known[part].built_on if base not in wanted}
    if missing:
        base, part = next(iter(missing.items()))
        raise AddError(f"--parts: {manifest_path}: part {part!r} is built on {base!r}, which --parts leaves out "
                       f"(add {', '.join(sorted(missing))})")
    return [p for p in parts if p.name in wanted]


def new_points(parts: list[Part], total: float | None) -> dict[str, float]:
    """Each kept part's points: as they are (`total` None), or rescaled to `total` in whole points by largest
    remainders, so that they sum to `total` exactly (the check cells carry the same numbers)."""
    if total is None:
        return {p.name: p.points for p in parts}
    if total <= 0 or not float(total).is_integer():
        raise AddError(f"--points: {total:g} is not a positive whole number of points")
    old = sum(p.points for p in parts)
    exact = {p.name: p.points * total / old for p in parts}
    points = {name: math.floor(v) for name, v in exact.items()}
    for name in sorted(exact, key=lambda n: points[n] - exact[n])[:int(total) - sum(points.values())]:
        points[name] += 1
    if zero := [name for name, v in points.items() if v == 0]:
        raise AddError(f"--points: {total:g} points leave {', '.join(zero)} with none; give more points")
    return {name: float(v) for name, v in points.items()}


# --- the notebook --------------------------------------------------------------------------------------------

_SECTION = re.compile(r"^##\s")                 # a level-2 heading starts a section
_PART_SECTION = re.compile(r"^##\s*Part\b")     # ... the section of a part
_HEADING_POINTS = re.compile(r"^(##\s*Part\b[^\n]*\()(\d+(?:\.\d+)?)( points?\))")


def _is_check(cell: dict[str, Any]) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def _defined(code: str) -> set[str]:
    """The top-level names a solution cell defines."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _used(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def sections(cells: list[dict[str, Any]], where: str) -> list[str | None]:
    """The part each cell's section belongs to (None: the notebook's opening, a section of no part, the end)."""
    owners: list[str | None] = []
    starts: list[int] = []
    for index, cell in enumerate(cells):
        text = source_text(cell)
        if cell.get("cell_type") == "markdown" and _SECTION.match(text):
            starts.append(index)
    bounds = list(zip(starts, starts[1:] + [len(cells)]))
    owners = [None] * len(cells)
    for start, end in bounds:
        if not _PART_SECTION.match(source_text(cells[start])):
            continue
        checks = [nbgrader_meta(c)["grade_id"] for c in cells[start:end] if _is_check(c)]
        if len(checks) > 1:
            raise AddError(f"{where}: the section {source_text(cells[start]).splitlines()[0]!r} holds "
                           f"{len(checks)} check cells ({', '.join(checks)}); one part per section is needed")
        owners[start:end] = [checks[0] if checks else None] * (end - start)
    return owners


def shortened_notebook(notebook: dict[str, Any], where: str, kept: dict[str, float], old_total: float
                       ) -> dict[str, Any]:
    """The source notebook with only the kept parts (name -> new points), as the module docstring says."""
    cells = notebook["cells"]
    owners = sections(cells, where)
    solution_names = {index: _defined(source_text(c)) for index, c in enumerate(cells)
                      if c.get("cell_type") == "code" and nbgrader_meta(c).get("solution")}
    dropped_names = set().union(*(names for i, names in solution_names.items() if owners[i] not in (None, *kept)))
    kept_names = set().union(*(names for i, names in solution_names.items() if owners[i] in (None, *kept)))
    dropped_names -= kept_names
    new_total = sum(kept.values())
    out = []
    for index, cell in enumerate(cells):
        owner, meta = owners[index], nbgrader_meta(cell)
        instructor_code = (cell.get("cell_type") == "code" and not meta.get("solution") and not _is_check(cell))
        uses = _used(source_text(cell)) if cell.get("cell_type") == "code" else set()
        if instructor_code:
            # a plot or the GPU check: it stays when every solution name it uses is still defined
            about = uses & (dropped_names | kept_names)
            if (owner in (None, *kept) or about) and not uses & dropped_names:
                out.append(cell)
            continue
        if owner is not None and owner not in kept:
            continue
        if cell.get("cell_type") == "code" and (lost := sorted(uses & dropped_names)):
            raise AddError(f"{where}: cell {meta.get('grade_id') or index} of a part kept uses "
                           f"{', '.join(lost)}, defined by a part left out; keep that part (its manifest's "
                           "built_on should name it)")
        cell = json.loads(json.dumps(cell))
        if _is_check(cell):
            cell["metadata"]["nbgrader"]["points"] = _number(kept[meta["grade_id"]])
        elif cell.get("cell_type") == "markdown":
            text = source_text(cell)
            if owner is not None:
                text = _HEADING_POINTS.sub(lambda m: f"{m[1]}{_number(kept[owner]):g}{m[3]}", text, count=1)
            elif new_total != old_total:
                text = re.sub(rf"\bthe {old_total:g} points\b", f"the {new_total:g} points", text)
            cell["source"] = text.splitlines(keepends=True)
        out.append(cell)
    return {**notebook, "cells": out}


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


# --- the manifest --------------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(_number(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise AddError(f"rubric.toml: cannot write a value of type {type(value).__name__}")


def render_manifest(data: dict[str, Any], header: str) -> str:
    """rubric.toml from its parsed tables: the top-level keys, each [[parts]] table, then [catalogue]."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    tables = {k: v for k, v in data.items() if k in ("parts", "catalogue")}
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if k not in tables]
    for part in tables.get("parts", []):
        lines += ["", "[[parts]]", *(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in part.items())]
    if tables.get("catalogue"):
        lines += ["", "[catalogue]", *(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in tables["catalogue"].items())]
    return "\n".join(lines) + "\n"


# --- the hidden material -------------------------------------------------------------------------------------

def _renamed(text: str, kit_name: str, new_id: str) -> str:
    """A copied module with the kit's assignment named as the course's: its package (assignments.<name>) and
    the catalogue's ways of naming an assignment (release_cells, Assignment)."""
    text = text.replace(f"assignments.{kit_name}.", f"assignments.{new_id}.")
    return re.sub(rf"\b(release_cells|Assignment)\(\s*([\"']){re.escape(kit_name)}\2", rf"\1(\2{new_id}\2", text)


def copy_hidden(kit: Path, target: Path, kit_name: str, new_id: str, kept: list[Part]) -> None:
    """The suites of the parts kept, every other module beside them (helpers, __init__.py, conftest.py), and
    the catalogue's modules (its __init__ as `everything`, which the generated __init__ limits)."""
    dropped_suites = {p.suite for p in read_manifest(kit / "rubric.toml").parts} - {p.suite for p in kept}
    target.mkdir(parents=True)
    for path in sorted(kit.glob("*.py")):
        if path.name not in dropped_suites:
            (target / path.name).write_text(_renamed(path.read_text(encoding="utf-8"), kit_name, new_id),
                                            encoding="utf-8")
    catalogue = kit / "catalogue"
    if catalogue.is_dir():
        (target / "catalogue").mkdir()
        for path in sorted(catalogue.glob("*.py")):
            name = "everything.py" if path.name == "__init__.py" else path.name
            (target / "catalogue" / name).write_text(_renamed(path.read_text(encoding="utf-8"), kit_name, new_id),
                                                     encoding="utf-8")


CATALOGUE_INIT = '''"""The kit's catalogue of {kit_name}, limited to the entries that apply to this course's {new_id}:
their part is kept and they build on its notebook.  GENERATED by `python -m autograder add-assignment`."""
from assignments.{new_id}.catalogue.everything import MISTAKES as _MISTAKES, VARIANTS as _VARIANTS

KEPT = frozenset({{{kept}
}})
MISTAKES = [entry for entry in _MISTAKES if entry.name in KEPT]
VARIANTS = [entry for entry in _VARIANTS if entry.name in KEPT]
'''


def _listed(names: Any) -> str:
    return "".join(f"\n    {name!r}," for name in sorted(names))


def limit_catalogue(assignment: Assignment, kit_name: str, kept_parts: set[str]) -> set[str]:
    """Write the catalogue's __init__ keeping the entries that apply; the names kept (the reference too)."""
    import importlib

    from autograder.authoring import catalogue as catalogues

    folder = assignment.folder / "catalogue"
    if not folder.is_dir():
        return {"reference"}
    catalogues._importable(assignment.root)
    module = importlib.import_module(f"assignments.{assignment.name}.catalogue.everything")
    candidates = [e for e in [*module.MISTAKES, *module.VARIANTS] if e.part is None or e.part in kept_parts]
    (folder / "__init__.py").write_text(CATALOGUE_INIT.format(kit_name=kit_name, new_id=assignment.name,
                                                              kept=_listed(e.name for e in candidates)),
                                        encoding="utf-8")
    whole = catalogues.Catalogue(assignment, [e for e in candidates if e.part is not None],
                                 [e for e in candidates if e.part is None])
    applies = []
    for entry in candidates:
        try:
            whole.solution_cells(entry)
        except catalogues.CatalogueError:  # a mutation or cell of a part left out
            continue
        applies.append(entry.name)
    (folder / "__init__.py").write_text(CATALOGUE_INIT.format(kit_name=kit_name, new_id=assignment.name,
                                                              kept=_listed(applies)), encoding="utf-8")
    return {"reference", *applies}


# --- the command ---------------------------------------------------------------------------------------------

def add(kit_name: str, new_id: str, course: Path, parts: list[str] | None = None, points: float | None = 100,
        kit_root: Path = REPO_ROOT, force: bool = False) -> list[Path]:
    """Add the kit's `kit_name` to `course` as `new_id`; the files written."""
    from autograder.authoring import notebook_sync, release
    from autograder.grading.rubric import load_rubric

    kit = Assignment(kit_name, kit_root)
    if not kit.manifest.is_file() or not kit.source_notebook.is_file():
        known = sorted(p.parent.name for p in (kit_root / "assignments").glob("*/rubric.toml"))
        raise AddError(f"{kit.folder}: no kit assignment {kit_name!r} here (known: {', '.join(known) or 'none'})")
    if not new_id.isidentifier():
        raise AddError(f"--as: {new_id!r} is not a valid id (a Python identifier: the suites import as "
                       f"assignments.{new_id})")
    if not course.is_dir():
        raise AddError(f"--course: {course}: no such folder")
    course = course.resolve()
    target = Assignment(new_id, course)
    if course == kit_root.resolve() and new_id == kit_name:
        raise AddError(f"--as: {new_id!r} is the kit's own assignment in this folder; choose another id")
    existing = [p for p in (target.source_notebook.parent, target.folder) if p.exists()]
    if existing and not force:
        raise AddError(f"{existing[0]}: already exists; --force replaces it")
    try:
        manifest = read_manifest(kit.manifest)
    except RubricError as exc:
        raise AddError(str(exc)) from None
    kept = chosen_parts(kit.manifest, manifest.parts, parts)
    points_of = new_points(kept, points)
    old_total = sum(p.points for p in manifest.parts)

    notebook = json.loads(kit.source_notebook.read_text(encoding="utf-8"))
    shortened = shortened_notebook(notebook, str(kit.source_notebook), points_of, old_total)
    present = {nbgrader_meta(c).get("grade_id") for c in shortened["cells"]}

    for folder in (target.source_notebook.parent, target.folder, target.release_notebook.parent):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(kit.source_notebook.parent, target.source_notebook.parent,
                    ignore=lambda _dir, names: [n for n in names if n == kit.source_notebook.name
                                                or n.startswith(".ipynb_checkpoints")])
    target.source_notebook.write_text(json.dumps(shortened, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    copy_hidden(kit.folder, target.folder, kit_name, new_id, kept)
    (course / "assignments" / "__init__.py").touch()  # the suites import as assignments.<id>.test_*

    data = tomllib.loads(kit.manifest.read_text(encoding="utf-8"))
    data["assignment"] = new_id
    data["parts"] = [{**table, "points": points_of[table["name"]]} for table in data["parts"]
                     if table["name"] in points_of]
    if "skip_when_unchanged" in data:
        data["skip_when_unchanged"] = [g for g in data["skip_when_unchanged"] if g in present]
    header = (f"The kit's {kit_name} as this course's {new_id}: parts {', '.join(points_of)}, "
              f"{sum(points_of.values()):g} points.\nGENERATED by `python -m autograder add-assignment {kit_name} "
              f"--as {new_id}`; the kit's own {kit.relative(kit.manifest)} explains each key.")
    catalogue = dict(data.pop("catalogue", {}))
    target.manifest.write_text(render_manifest(data, header), encoding="utf-8")

    previous = os.environ.get(COURSE_ROOT_VARIABLE)
    os.environ[COURSE_ROOT_VARIABLE] = str(course)  # the copied catalogue names the assignment by its new id
    try:
        problems = notebook_sync.sync(target, write=True)  # the policy cell, the table of parts, solutions/<id>.py
        release.generate_release(target, target.release_notebook.parent)
        entries = limit_catalogue(target, kit_name, set(points_of))
        if catalogue:
            catalogue["determinism"] = [n for n in catalogue.get("determinism", []) if n in entries]
            if catalogue.get("demo") not in entries:
                catalogue.pop("demo", None)
            data["catalogue"] = {k: v for k, v in catalogue.items() if v}
            target.manifest.write_text(render_manifest(data, header), encoding="utf-8")
        load_rubric(new_id, course=course)  # what grading reads, against the release just written
    except (RubricError, release.SourceError, ValueError) as exc:
        raise AddError(str(exc).splitlines()[0]) from None
    finally:
        if previous is None:
            os.environ.pop(COURSE_ROOT_VARIABLE, None)
        else:
            os.environ[COURSE_ROOT_VARIABLE] = previous
    if problems:
        raise AddError(problems[0])
    return [target.source_notebook, target.folder, target.solutions_module, target.release_notebook]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit_assignment", metavar="KIT_ASSIGNMENT",
                        help="the kit's assignment to copy (transformer_block, gpt_decoder, norms_and_gates)")
    parser.add_argument("--as", dest="new_id", required=True, metavar="ID", help="the course's assignment id")
    parser.add_argument("--course", type=Path, default=Path("."), metavar="DIR",
                        help="the course root, which holds nbgrader's source/ (default: the current directory)")
    parser.add_argument("--parts", metavar="A,B,...",
                        help="the parts kept, comma-separated (default: all); each part they are built on too")
    points = parser.add_mutually_exclusive_group()
    points.add_argument("--points", type=float, default=100.0, metavar="N",
                        help="the autograded total, shared in proportion to the kit's points (default 100)")
    points.add_argument("--keep-points", action="store_true", help="keep the kit's points of each part")
    parser.add_argument("--kit", type=Path, default=None, metavar="DIR",
                        help="a checkout of the kit (default: the one this engine runs from, when it has one)")
    parser.add_argument("--force", action="store_true", help="replace the course's existing source/<ID> and "
                                                             "assignments/<ID>")


USAGE_ERROR = 2


def run(args: argparse.Namespace) -> int:
    kit_root = args.kit if args.kit is not None else REPO_ROOT
    parts = [p.strip() for p in args.parts.split(",") if p.strip()] if args.parts is not None else None
    try:
        if not (kit_root / "assignments").is_dir():
            raise AddError(f"{kit_root}: no assignments/ folder: this engine is installed without a checkout of "
                           "the kit; name one with --kit DIR")
        written = add(args.kit_assignment, args.new_id, args.course, parts,
                      None if args.keep_points else args.points, kit_root, args.force)
    except AddError as exc:  # one line, exit 2, as every verb's usage error
        print(f"python -m autograder add-assignment: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for path in written:
        print(f"wrote {path}")
    return 0
