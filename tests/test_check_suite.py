"""check-suite's own rules, without grading the catalogue (test_catalogue.py grades it)."""
from __future__ import annotations

import types

import pytest

from autograder.authoring import check_suite
from autograder.cli import build_parser
from conftest import run_cli


def fake_catalogue(**attributes) -> types.ModuleType:
    module = types.ModuleType("assignments.fake.catalogue")
    module.entries = lambda: [types.SimpleNamespace(name="reference"), types.SimpleNamespace(name="bug")]
    vars(module).update(attributes)
    return module


def test_reruns_without_determinism_entries_are_an_error_not_a_pass():
    with pytest.raises(check_suite.CheckSuiteError, match="names no DETERMINISM entries"):
        check_suite.determinism_entries(fake_catalogue())
    with pytest.raises(check_suite.CheckSuiteError, match=r"does not have: \['typo'\]"):
        check_suite.determinism_entries(fake_catalogue(DETERMINISM=("reference", "typo")))
    assert check_suite.determinism_entries(fake_catalogue(DETERMINISM=("bug",))) == ("bug",)


def test_the_cli_and_the_module_take_the_same_options():
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    via_cli = {s for a in commands.choices["check-suite"]._actions for s in a.option_strings}
    module_parser = check_suite.argparse.ArgumentParser()
    check_suite.add_arguments(module_parser)
    assert via_cli == {s for a in module_parser._actions for s in a.option_strings}
    assert {"--margins", "--reruns", "--workers", "--json"} <= via_cli


def test_an_unknown_assignment_is_one_line_and_exit_2():
    done = run_cli("check-suite", "no_such_assignment")
    assert done.returncode == 2
    assert "no_such_assignment" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
