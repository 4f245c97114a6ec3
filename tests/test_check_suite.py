"""check-suite's own rules, without grading a catalogue (tests/test_assignment_catalogues.py grades each once)."""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from autograder.authoring import check_suite
from autograder.authoring.assignment import Assignment, assignment_names
from autograder.authoring.catalogue import Catalogue, CatalogueError, Entry, load
from autograder.commands.main import build_parser
from conftest import run_cli


def catalogue_with(tmp_path, manifest_tail: str) -> Catalogue:
    """A catalogue of two entries whose manifest (in a scratch checkout) ends with `manifest_tail`."""
    assignment = Assignment("fake", tmp_path)
    assignment.folder.mkdir(parents=True)
    assignment.manifest.write_text('[[parts]]\nname = "p"\npoints = 1\nsuite = "test_p.py"\n' + manifest_tail)
    return Catalogue(assignment, [Entry("bug", "a bug", "p")], [])


def test_reruns_without_determinism_entries_are_an_error_not_a_pass(tmp_path):
    with pytest.raises(check_suite.CheckSuiteError, match="names no \\[catalogue\\] determinism entries"):
        check_suite.determinism_entries(catalogue_with(tmp_path / "a", ""))
    with pytest.raises(CatalogueError, match=r"does not have: \['typo'\]"):
        catalogue_with(tmp_path / "b", '[catalogue]\ndeterminism = ["reference", "typo"]\n')
    with pytest.raises(CatalogueError, match=r"\[catalogue\]: unknown key 'determinsm' \(did you mean 'determinism'\?\)"):
        catalogue_with(tmp_path / "c", '[catalogue]\ndeterminsm = ["bug"]\n')
    assert check_suite.determinism_entries(catalogue_with(tmp_path / "d", '[catalogue]\ndeterminism = ["bug"]\n')) \
        == ("bug",)


def test_the_cli_and_the_module_take_the_same_options():
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    via_cli = {s for a in commands.choices["check-suite"]._actions for s in a.option_strings}
    module_parser = argparse.ArgumentParser()
    check_suite.add_arguments(module_parser)
    assert via_cli == {s for a in module_parser._actions for s in a.option_strings}
    assert {"--margins", "--reruns", "--workers", "--json"} <= via_cli


def test_an_unknown_assignment_is_one_line_and_exit_2():
    done = run_cli("check-suite", "no_such_assignment")
    assert done.returncode == 2
    assert "no_such_assignment" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_demo_says_what_each_sample_student_handed_in(tmp_path):
    """bob's bug is the catalogue's demo entry of each assignment, so the demo's table names it per assignment."""
    from autograder.authoring.demo import grade_table
    from autograder.authoring.samples import demo_class_work

    grades = tmp_path / "grades.csv"
    grades.write_text("student_id,score,max_score\nbob,57.8,100\nalice,100,100\ncarol,0,100\n")
    for assignment in assignment_names():
        demo = load(assignment).entry(load(assignment).demo)
        table = grade_table(grades, demo_class_work(assignment)).splitlines()
        assert table[0].endswith("handed in") and table[1].startswith("alice") and "correct" in table[1]
        assert table[2].startswith("bob") and table[2].endswith(f"one bug in {demo.part}: {demo.description}")
        assert "untouched" in table[3]


def test_verdicts_and_margins_read_each_tests_part_and_hints_as_fields():
    """Which part a failure belongs to is its `part`, not a prefix of its name; a hint is found in a failure's
    message or in one of its hints, each whole, not in the text they make together; ratios are by part."""
    catalogue = load("transformer_block")
    entry = next(e for e in catalogue.entries() if e.name == "att-no-scaling")

    def result(*tests: dict) -> dict:
        return {"parts": {"attention": [0.0, 10.0]}, "tests": list(tests), "score": 90.0,
                "ratios": {"attention": {"test_values": 3.0}, "layer_norm": {"test_values": 0.2}}}

    def failure(part: str, name: str, message: str, hints: list[str]) -> dict:
        return {"part": part, "name": name, "passed": False, "message": message, "hints": hints,
                "output": "\n  Hint: ".join([message, *hints])}

    hint = entry.hint
    assert check_suite.verdict(catalogue, entry, result(failure("attention", "t", "off", [f"it is {hint}"])))[
        "hint_shown"]
    assert check_suite.verdict(catalogue, entry, result(failure("attention", "t", f"off {hint}", [])))["hint_shown"]
    # a test of another part whose name reads like one of this part's
    assert not check_suite.verdict(catalogue, entry, result(
        failure("layer_norm", "attention: t", "off", [hint])))["hint_shown"]
    # the hint's words split between the message and a hint are not the hint
    head, tail = hint[:len(hint) // 2], hint[len(hint) // 2:]
    assert not check_suite.verdict(catalogue, entry, result(failure("attention", "t", f"off {head}", [tail])))[
        "hint_shown"]
    rows = check_suite.margins("transformer_block", {entry.name: result()})
    assert {r["test"] for r in rows} == {"attention: test_values", "layer_norm: test_values"}


def _grades_a_catalogue(call: ast.Call) -> bool:
    """check-suite called from Python, or through the command line on an assignment (or the default one)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name in ("run_catalogue", "run_from_arguments") or (name in ("run", "main") and "check_suite" in ast.unparse(call.func)):
        return True
    words = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    named = {word for word in words[1:] if not word.startswith("-")}
    return name == "run_cli" and words[:1] == ["check-suite"] and not named - set(assignment_names())


def test_only_one_test_file_grades_a_whole_catalogue():
    """Grading a catalogue takes minutes: tests/test_assignment_catalogues.py grades each once per test run and
    holds every test that reads the grades (a file runs whole on one worker, so a second file would grade
    again, on the other worker)."""
    found = sorted(path.name for path in Path(__file__).parent.glob("*.py")
                   if any(isinstance(node, ast.Call) and _grades_a_catalogue(node)
                          for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    assert found == ["test_assignment_catalogues.py"], found
