"""Every limit is set the same ways: a flag, an nbgrader trait, an environment variable; all generated from
`Limits`, so none can be forgotten."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from autograder import REPO_ROOT
from autograder.authoring import readme_tables
from autograder.commands.main import build_parser
from autograder.model import limits
from autograder.model.limits import BadLimit, Limits, knobs
from autograder.nbgrader.plugin import SandboxedGrading
from conftest import run_cli

# a value other than the default for every knob, and the Limits it must produce
CHOSEN = {"timeout": 99.5, "cell_timeout": 7.0, "request_timeout": 3.0, "memory_mb": 1500, "output_kb": 10,
          "reply_mb": 5, "file_size_mb": 2, "open_files": 100, "processes": 9, "allow_unisolated": True}
EXPECTED = Limits(timeout=99.5, cell_timeout=7.0, request_timeout=3.0, memory_mb=1500, output_kb=10, reply_mb=5,
                  file_size_mb=2, open_files=100, processes=9, isolate=False)


def test_one_knob_per_limit_and_the_test_sets_them_all():
    assert [k.field for k in knobs()] == [f.name for f in dataclasses.fields(Limits)]
    assert sorted(CHOSEN) == sorted(k.name for k in knobs())
    assert all(getattr(EXPECTED, f.name) != f.default for f in dataclasses.fields(Limits))


@pytest.mark.parametrize("command", ["grade", "grade-all"])
def test_every_limit_is_a_flag(command):
    flags = []
    for knob in knobs():
        value = CHOSEN[knob.name]
        flags += [knob.flag] if value is True else [knob.flag, str(value)]
    args = build_parser().parse_args([command, "sub", "-o", "out", *flags])
    assert limits.from_flags(args) == EXPECTED
    assert limits.from_flags(build_parser().parse_args([command, "sub", "-o", "out"])) == Limits()


def test_every_limit_is_a_trait_of_the_nbgrader_preprocessor():
    grading = SandboxedGrading()
    assert grading.limits() == Limits()
    for name, value in CHOSEN.items():
        setattr(grading, name, value)
    assert grading.limits() == EXPECTED
    assert all(SandboxedGrading.class_traits()[k.name].metadata.get("config") for k in knobs())


def _load_nbgrader_config(environ: dict[str, str]) -> subprocess.CompletedProcess:
    script = ("from traitlets.config.loader import PyFileConfigLoader\n"
              f"c = PyFileConfigLoader('nbgrader_config.py', path={str(REPO_ROOT)!r}).load_config()\n"
              "print(sorted(c.SandboxedGrading.items()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(limits.ENV_PREFIX)}
    return subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env={**env, **environ},
                          capture_output=True, text=True, timeout=120)


def test_nbgrader_config_reads_every_limit_from_the_environment():
    environ = {k.variable: ("1" if CHOSEN[k.name] is True else str(CHOSEN[k.name])) for k in knobs()}
    done = _load_nbgrader_config(environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted(CHOSEN.items()))


def test_a_bad_environment_value_is_one_line_naming_the_file_and_the_variable():
    done = _load_nbgrader_config({"AUTOGRADER_MEMORY_MB": "lots"})
    assert done.returncode != 0
    assert done.stderr.strip() == "nbgrader_config.py: AUTOGRADER_MEMORY_MB='lots': expected a positive int"
    with pytest.raises(BadLimit, match="AUTOGRADER_ALLOW_UNISOLATED"):
        limits.from_environment({"AUTOGRADER_ALLOW_UNISOLATED": "maybe"})
    assert limits.from_environment({"AUTOGRADER_ALLOW_UNISOLATED": "no"}) == {"allow_unisolated": False}


def test_a_limit_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="request_timeout must be a positive number"):
        Limits(request_timeout=0)
    done = run_cli("grade", "x.ipynb", "-o", "r.json", "--open-files", "0")
    assert done.returncode == 2 and "--open-files: expected a positive int, got '0'" in done.stderr


def test_the_readme_limits_table_is_generated_and_fresh():
    assert readme_tables.main(["check"]) == 0
    table = readme_tables.limits_table()
    assert all(f"`{k.flag}`" in table and f"`{k.variable}`" in table for k in knobs())
