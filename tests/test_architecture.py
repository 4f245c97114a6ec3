"""The folders of autograder/ are the trust boundary; these tests keep them so."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import PACKAGE_DIR, REPO_ROOT
from autograder.authoring import readme_tables
from autograder.judging import checks

CHILD = PACKAGE_DIR / "child"
# autograder's packages (and top-level modules) from the bottom up: each imports only from the layers below it,
# and the packages of one layer never import each other (docs/architecture.md, "The layers")
LAYERS = (("autograder", "protocol"), ("child",), ("model",), ("host", "judging"), ("grading",), ("reports",), ("authoring",),
          ("platforms",), ("commands", "nbgrader"), ("__main__",))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement of `path` names, at any depth (lazy imports in functions too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from autograder import x`
    return names


def kit_modules() -> set[str]:
    return {module_name(p) for p in PACKAGE_DIR.rglob("*.py")}


def kit_imports(path: Path) -> set[str]:
    known = kit_modules()
    return {name for name in imported_modules(path) if name in known and name != "autograder"}


def test_child_code_imports_only_the_wire_format():
    files = sorted(CHILD.rglob("*.py"))
    assert len(files) >= 6
    for path in files:
        outside = {m for m in kit_imports(path)
                   if m != "autograder.protocol" and not m.startswith("autograder.child")}
        assert not outside, f"{path.name} imports {sorted(outside)}"


def modules_loaded_by(code: str) -> list[str]:
    """The modules of sys.modules after `code` runs in a fresh interpreter (-I, the checkout on its path)."""
    script = (f"import json, sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n{code}\n"
              "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_child_modules_load_nothing_else_of_the_kit_in_a_fresh_interpreter():
    modules = sorted(module_name(p) for p in CHILD.rglob("*.py"))
    code = (f"for name in {modules!r}: __import__(name)\n"
            "from autograder.child.serve import prepare; prepare((), tuple(sys.path))")  # what the zygote imports for its children
    loaded = {m for m in modules_loaded_by(code) if m == "autograder" or m.startswith("autograder.")}
    assert set(modules) <= loaded
    assert loaded - set(modules) <= {"autograder", "autograder.protocol"}


ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
# a module path as the page writes one: `autograder/host/intake.py`, `autograder/host/`, or `host/sandbox` in
# the picture (a folder of the engine, then names)
MODULE_PATH = re.compile(r"(?<![\w/.])(?:autograder/)?((?:child|model|host|judging|grading|reports|platforms|authoring|commands|nbgrader)(?:/\w+)*"
                         r"|autograder(?:/\w+)+)(\.py)?/?(?![\w*])")


def package_folders() -> list[str]:
    """Every package below autograder/, as a path relative to it: `child`, `judging/checks`, ..."""
    return sorted(p.parent.relative_to(PACKAGE_DIR).as_posix() for p in PACKAGE_DIR.rglob("__init__.py")
                  if p.parent != PACKAGE_DIR)


def described_modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def folder_rows(page: str) -> dict[str, str]:
    """The page's folder table: the path in each row's first cell -> the rest of the row."""
    rows = re.findall(r"^\| `(autograder/[^`]*)` \|(.*)$", page, re.M)
    return dict(rows)


def test_the_architecture_page_describes_every_package_folder_and_its_modules():
    page = ARCHITECTURE.read_text()
    folders = sorted(p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(name for layer in LAYERS for name in layer if (PACKAGE_DIR / name).is_dir())
    rows = folder_rows(page)
    for folder in package_folders():  # each package has its row, naming each of its modules in backticks
        row = rows.get(f"autograder/{folder}/")
        assert row is not None, f"docs/architecture.md has no row for autograder/{folder}/"
        for stem in described_modules(PACKAGE_DIR / folder):
            assert f"`{stem}`" in row, f"the row of autograder/{folder}/ does not describe {stem}.py"
    for stem in described_modules(PACKAGE_DIR):  # a top-level module has a row of its own
        assert f"autograder/{stem}.py" in rows, f"autograder/{stem}.py is not described"
    # the page lists the layers as the import check knows them
    listed = re.search(r"^Layers, from the bottom up: (.*)$", page, re.M)
    assert listed and listed[1] == " < ".join(" | ".join(f"`{n}`" for n in layer) for layer in LAYERS)


def named_modules(page: str) -> set[str]:
    """Every module path the page names, relative to autograder/ and without `.py`: `host/sandbox`, `protocol`."""
    return {m[1].removeprefix("autograder").lstrip("/") for m in MODULE_PATH.finditer(page)}


def missing_modules(page: str) -> list[str]:
    return sorted(path for path in named_modules(page) if path and not (
        (PACKAGE_DIR / path).with_suffix(".py").is_file() or (PACKAGE_DIR / path / "__init__.py").is_file()))


def test_every_module_path_the_architecture_page_names_exists():
    page = ARCHITECTURE.read_text()
    assert {"host/source_cells", "protocol", "judging/checks", "child"} <= named_modules(page)  # the pattern finds them
    assert missing_modules(page) == []


def test_the_page_checks_notice_a_missing_or_stale_module():
    rows = folder_rows("| `autograder/host/` | trusted | `intake`, `sandbox` |\n")
    assert "`remote`" not in rows["autograder/host/"]
    stale = "host/no_such_module feeds `autograder/child/gone.py`, as host/sandbox and `autograder/judging/` do"
    assert missing_modules(stale) == ["child/gone", "host/no_such_module"]


def test_the_authoring_page_documents_every_verb_of_the_toolkit():
    page = (REPO_ROOT / "docs" / "authoring.md").read_text()
    assert readme_tables.rendered(page, readme_tables.AUTHORING) == page, "run readme_tables write"
    for name in checks.__all__:
        value = getattr(checks, name)
        shown = f"C.{name}{readme_tables._signature(value)}" if callable(value) else f"C.{name} = "
        assert f"`{shown}" in page, name
    summaries = dict(readme_tables.CHECKS_SUMMARIES)
    del summaries["once"]  # a new public name without a summary is refused, not rendered blank
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readme_tables, "CHECKS_SUMMARIES", summaries)
        with pytest.raises(ValueError, match="no summary for once"):
            readme_tables.checks_table()


def test_the_coordinator_of_a_batch_never_imports_torch():
    # grade-all --jobs N: the main process only hands out files and writes results; its workers grade
    loaded = modules_loaded_by("import autograder.commands.main, autograder.grading.batch, "
                               "autograder.grading.cluster, autograder.grading.results_json")
    assert {"torch", "pytest", "autograder.grading.grade", "autograder.judging.judge"}.isdisjoint(loaded)


def test_nbgraders_autograde_imports_torch_only_to_grade_a_notebook_itself():
    # the class is graded ahead in other processes (autograder.nbgrader.ahead): autograde's own process loads
    # the grader only for a notebook it grades in its turn
    loaded = modules_loaded_by("import autograder.nbgrader.plugin, autograder.nbgrader.cell_metadata")
    assert {"torch", "pytest", "autograder.grading.grade", "autograder.judging.judge"}.isdisjoint(loaded)


def test_a_verb_imports_only_its_own_module_before_it_runs():
    # a cold `grade` asks for its zygote as soon as its arguments are read: the other verbs' modules (the authoring
    # tools, the service, the exporters) are not imported first, nor torch and the judge, nor numpy (which torch
    # brings later anyway; the wire format reads tensors with it but imports it only then)
    loaded = modules_loaded_by("from autograder.commands.main import build_parser\n"
                               "build_parser('grade').parse_args(['grade', 'alice.ipynb', '-o', 'out.json'])")
    others = ("autograder.authoring.check_suite", "autograder.authoring.similarity", "autograder.platforms.",
              "autograder.commands.serve", "autograder.commands.lms", "autograder.grading.grade",
              "autograder.judging.judge")
    assert [m for m in loaded if m.split(".")[0] in ("torch", "pytest", "numpy") or m.startswith(others)] == []


def test_the_measured_test_durations_name_only_test_files_that_exist():
    # read here, not through conftest: another test's pytester run can leave its own conftest in sys.modules
    measured = json.loads((REPO_ROOT / "tests" / "durations.json").read_text())
    tests = {p.name for p in (REPO_ROOT / "tests").glob("test_*.py")}
    assert measured and set(measured) <= tests, "tests/durations.json is stale: run `make durations`"


def _layer(module: str) -> str:
    """A package folder of autograder/, or a module at its top (autograder.commands.main -> commands)."""
    return module.split(".")[1] if "." in module else module


def import_graph() -> dict[str, set[tuple[str, str]]]:
    """Each layer name -> the (importing module, imported module) pairs that cross into another layer."""
    graph: dict[str, set[tuple[str, str]]] = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        source = module_name(path)
        graph.setdefault(_layer(source), set()).update(
            (source, m) for m in kit_imports(path) if _layer(m) != _layer(source))
    return graph


def arrows_against_the_layers(graph: dict[str, set[tuple[str, str]]]) -> list[str]:
    rank = {name: level for level, names in enumerate(LAYERS) for name in names}
    unplaced = sorted(set(graph) - set(rank))
    assert not unplaced, f"add {unplaced} to LAYERS and to docs/architecture.md"
    return sorted(f"{source} -> {target}" for layer, pairs in graph.items() for source, target in pairs
                  if rank[_layer(target)] >= rank[layer])


def test_every_import_goes_down_the_layers():
    """No back arrow and no arrow between peers, at any depth (lazy imports in functions too): the layers have
    no cycle, the host and the judging never import each other, the engine never imports a tool or a front end."""
    assert arrows_against_the_layers(import_graph()) == []


def test_the_layer_check_notices_a_back_arrow_and_an_unplaced_package():
    graph = import_graph()
    graph["judging"] = graph["judging"] | {("autograder.judging.judge", "autograder.host.sandbox")}
    graph["model"] = graph["model"] | {("autograder.model.limits", "autograder.grading.rubric")}
    assert arrows_against_the_layers(graph) == ["autograder.judging.judge -> autograder.host.sandbox",
                                               "autograder.model.limits -> autograder.grading.rubric"]
    with pytest.raises(AssertionError, match="add \\['newpackage'\\] to LAYERS"):
        arrows_against_the_layers({**graph, "newpackage": set()})
