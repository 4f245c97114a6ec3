"""The folders of autograder/ are the trust boundary; these tests keep them so."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from autograder import PACKAGE_DIR, REPO_ROOT

CHILD = PACKAGE_DIR / "child"
ENGINE_FOLDERS = ("child", "host", "judging", "reports")
FRONT_ENDS = ("autograder.cli", "autograder.batch", "autograder.cluster", "autograder.nbgrader_plugin",
              "autograder.authoring")


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


def test_child_modules_load_nothing_else_of_the_kit_in_a_fresh_interpreter():
    modules = sorted(module_name(p) for p in CHILD.rglob("*.py"))
    script = (f"import json, sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
              f"for name in {modules!r}: __import__(name)\n"
              "from autograder.child.serve import prepare; prepare()\n"  # what the zygote imports for its children
              "print(json.dumps(sorted(m for m in sys.modules if m == 'autograder' or m.startswith('autograder.'))))")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert set(modules) <= loaded
    assert loaded - set(modules) <= {"autograder", "autograder.protocol"}


def test_the_engine_does_not_depend_on_the_tools_or_the_front_ends():
    for folder in ENGINE_FOLDERS:
        for path in sorted((PACKAGE_DIR / folder).rglob("*.py")):
            bad = {m for m in kit_imports(path) if m.startswith(FRONT_ENDS)}
            assert not bad, f"{path.relative_to(PACKAGE_DIR)} imports {sorted(bad)}"


def test_the_architecture_page_and_readme_name_every_folder():
    page = (REPO_ROOT / "docs" / "architecture.md").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    folders = sorted(p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == ["authoring", "child", "host", "judging", "platforms", "reports"]
    for folder in folders:
        assert f"autograder/{folder}/" in page and f"autograder/{folder}/" in readme, folder
    for path in PACKAGE_DIR.rglob("*.py"):  # and every module is named in one of them
        if path.name not in ("__init__.py", "__main__.py"):
            assert path.stem in page or path.stem in readme, f"{path.relative_to(PACKAGE_DIR)} is in neither page"


def test_the_coordinator_of_a_batch_never_imports_torch():
    # grade-all --jobs N: the main process only hands out files and writes results; its workers grade
    script = (f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
              "import autograder.cli, autograder.batch, autograder.cluster, autograder.reports.results\n"
              "print(sorted(m for m in ('torch', 'pytest', 'autograder.grading', 'autograder.judging.judge') "
              "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_measured_test_durations_name_only_test_files_that_exist():
    from conftest import measured_durations

    tests = {p.name for p in (REPO_ROOT / "tests").glob("test_*.py")}
    assert set(measured_durations()) <= tests, "tests/durations.json is stale: run `make durations`"
