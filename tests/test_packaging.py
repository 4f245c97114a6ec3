"""Installing the kit makes only the grading engine importable.

The reference solutions (`solutions/`) and the hidden material (`assignments/`: suites, rubrics, catalogue of
known mistakes) stay in the checkout.  Any interpreter of the environment started outside the checkout, in
isolated mode (no PYTHONPATH, no user site, no current directory on sys.path), must import `autograder` and
nothing of them.
"""
from __future__ import annotations

import json
import subprocess
import sys

from autograder import REPO_ROOT as REPO  # noqa: E402
HIDDEN = ("solutions", "assignments", "autograder.assignments")

PROBE = f"""
import importlib, json
found = {{}}
import autograder.grading.grade
found["autograder.grading.grade"] = autograder.grading.grade.__file__
for name in {HIDDEN!r}:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        found[name] = "ModuleNotFoundError: " + str(exc)
    else:
        found[name] = "imported from " + repr(getattr(module, "__file__", None) or list(module.__path__))
print(json.dumps(found))
"""


def test_only_the_engine_is_importable_from_outside_the_checkout(tmp_path):
    done = subprocess.run([sys.executable, "-I", "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("autograder.grading.grade").endswith("grading/grade.py")
    for name in HIDDEN:
        assert found[name].startswith("ModuleNotFoundError"), f"{name} is importable: {found[name]}"


def test_hidden_material_is_outside_the_engine_package():
    assert (REPO / "assignments" / "transformer_block" / "rubric.toml").is_file()
    assert not (REPO / "autograder" / "assignments").exists()


def _make_setup(tmp_path, home, path_dirs: list, *arguments: str) -> subprocess.CompletedProcess:
    """`make -n setup` on a copy of the Makefile with no .venv yet, in an environment of nothing but HOME and
    PATH: what it would run, or its one-line refusal.  No virtual environment is built."""
    import shutil

    work = tmp_path / "checkout"
    work.mkdir(exist_ok=True)
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy(REPO / name, work / name)
    tools = tmp_path / "tools"  # what the Makefile calls besides Python
    tools.mkdir(exist_ok=True)
    for tool in ("id", "sed"):
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    return subprocess.run([shutil.which("make"), "-n", "setup", *arguments], cwd=work, capture_output=True,
                          text=True, timeout=60,
                          env={"HOME": str(home), "PATH": ":".join(map(str, [*path_dirs, tools]))})


def _venv_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if " -m venv " in line)


PYTHON_311 = next(p for p in [sys.executable, f"{sys.base_prefix}/bin/python3.11"]
                  if sys.version_info[:2] == (3, 11))


def test_make_setup_finds_a_python_311_or_says_in_one_line_what_to_install(tmp_path):
    import os

    empty_home = tmp_path / "home"
    empty_home.mkdir()
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    # Ubuntu 24.04's python3, and a pyenv shim of python3.11 where pyenv's chosen version is another
    (bin_ / "python3").write_text("#!/bin/sh\necho 3.12\n")
    (bin_ / "python3.11").write_text("#!/bin/sh\necho 'pyenv: python3.11: command not found' >&2; exit 127\n")
    for script in bin_.iterdir():
        script.chmod(0o755)
    refusals = {"missing": _make_setup(tmp_path, empty_home, [], "PYTHON=/nonexistent/python3.11"),
                "none found": _make_setup(tmp_path, empty_home, []),
                "not 3.11": _make_setup(tmp_path, empty_home, [], f"PYTHON={bin_ / 'python3'}"),
                "only 3.12 on PATH": _make_setup(tmp_path, empty_home, [bin_])}
    for case, done in refusals.items():
        assert done.returncode != 0 and done.stdout == "", (case, done.stdout)
        [line] = done.stderr.splitlines()
        assert "needs Python 3.11" in line and "install" in line and "PYTHON=" in line, (case, line)
    assert "/nonexistent/python3.11 is not one" in refusals["missing"].stderr
    assert "found none" in refusals["none found"].stderr

    # pyenv's versions, with nothing on PATH
    pyenv_home = tmp_path / "pyenv-home"
    pyenv = pyenv_home / ".pyenv" / "versions" / "3.11.99" / "bin"
    pyenv.mkdir(parents=True)
    (pyenv / "python3.11").symlink_to(os.path.realpath(PYTHON_311))
    assert _venv_line(_make_setup(tmp_path, pyenv_home, [])).endswith(f"|| {pyenv}/python3.11 -m venv .venv")

    # uv's, when uv is on PATH, past the shim and the 3.12
    (bin_ / "uv").write_text(f"#!/bin/sh\n[ \"$*\" = 'python find 3.11' ] && echo {os.path.realpath(PYTHON_311)}\n")
    (bin_ / "uv").chmod(0o755)
    line = _venv_line(_make_setup(tmp_path, empty_home, [bin_]))
    assert line.endswith(f"|| {os.path.realpath(PYTHON_311)} -m venv .venv"), line

    # the torch pin stays exact, whatever Python setup found
    assert '"torch==2.13.0"' in (REPO / "pyproject.toml").read_text()
