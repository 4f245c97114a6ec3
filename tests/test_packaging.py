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
