"""The third assignment, norms_and_gates (RMSNorm and SwiGLU), beyond what every assignment must do
(tests/test_assignments.py, tests/test_assignment_catalogues.py): its two parts and a catalogue of four to six
hinted mistakes each, its notebook's visible checks pass on the reference and fail on the release, its suites
keep the kit's limits, constructors alone score 0, and its notebook has the kit's shape for students (goals,
hints, written answers graded by hand)."""
from __future__ import annotations

import ast
import json

import pytest
import torch

from autograder.authoring.assignment import BEGIN_MARKER, END_MARKER, Assignment, nbgrader_meta, source_text
from autograder.authoring.catalogue import load
from autograder.judging import judge
from autograder.judging.checks import comparison
from autograder.grading.rubric import load_rubric, score
from autograder.model.submission import ModuleSubmission
import notebook_shape
from test_hidden_suites import TESTS_PER_PART, CountingSubmission

NAME = "norms_and_gates"
ASSIGNMENT = Assignment(NAME)


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _namespace(path):
    """The notebook's imports and solution cells run in one namespace, as a student's kernel would."""
    namespace: dict = {}
    for cell in _cells(path):
        meta = nbgrader_meta(cell)
        if cell["cell_type"] == "code" and (meta.get("grade_id") == "imports" or meta.get("solution")):
            exec(compile(source_text(cell), f"<{meta['grade_id']}>", "exec"), namespace)
    return namespace


def _check_cells(path):
    return {nbgrader_meta(c)["grade_id"]: source_text(c) for c in _cells(path)
            if c["cell_type"] == "code" and nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")}


def test_its_parts_and_catalogue():
    rubric = load_rubric(NAME)
    assert [(p.name, p.points) for p in rubric.parts] == [("rms_norm", 50), ("swiglu", 50)]
    catalogue = load(NAME)
    for part in ("rms_norm", "swiglu"):
        mistakes = [e for e in catalogue.entries() if e.part == part]
        assert 4 <= len(mistakes) <= 6 and all(e.hint for e in mistakes), (part, [e.name for e in mistakes])
    variants = [e for e in catalogue.entries() if e.part is None and e.name != "reference"]
    assert len(variants) >= 4, [e.name for e in variants]


def test_its_notebook_checks_pass_on_the_reference_and_fail_on_the_release(capsys):
    """Every visible check cell passes after the source's solution cells and raises NotImplementedError after
    the release's stubs; no line of a solution region reaches the release."""
    torch.manual_seed(0)
    checks = _check_cells(ASSIGNMENT.source_notebook)
    assert set(checks) == {"rms_norm", "swiglu"}
    solved, stubs = _namespace(ASSIGNMENT.source_notebook), _namespace(ASSIGNMENT.release_notebook)
    for grade_id, code in checks.items():
        exec(compile(code, f"<check cell {grade_id}>", "exec"), dict(solved))
        assert "all visible checks passed" in capsys.readouterr().out, grade_id
        with pytest.raises(NotImplementedError):
            exec(compile(code, f"<check cell {grade_id}>", "exec"), dict(stubs))
    solution_lines, inside = set(), False
    for cell in _cells(ASSIGNMENT.source_notebook):
        for line in source_text(cell).split("\n") if nbgrader_meta(cell).get("solution") else ():
            if line.strip() in (BEGIN_MARKER, END_MARKER):
                inside = line.strip() == BEGIN_MARKER
            elif inside and line.strip():
                solution_lines.add(line.strip())
    released = {line.strip() for c in _cells(ASSIGNMENT.release_notebook) for line in source_text(c).split("\n")}
    assert len(solution_lines) >= 8 and not solution_lines & released, sorted(solution_lines & released)


@pytest.mark.parametrize("part", ["rms_norm", "swiglu"])
def test_each_part_has_goals_hints_and_a_question_where_students_meet_them(part):
    notebook_shape.assert_part_steps(ASSIGNMENT, part)


def test_its_written_answers_are_graded_by_hand_apart_from_the_autograded_100():
    notebook_shape.assert_written_answers(ASSIGNMENT)
    rubric = load_rubric(NAME)
    assert rubric.max_score == 100 and rubric.graded_by_hand == {"rms_norm_answer": 2.0, "swiglu_answer": 2.0}


def test_it_says_how_it_works_and_tables_its_parts():
    notebook_shape.assert_how_to_work_and_parts(ASSIGNMENT)
    parts = source_text(next(c for c in _cells(ASSIGNMENT.source_notebook) if c["id"] == "parts"))
    assert "| 1 | RMSNorm | `rms_norm`, `RMSNorm` | 20 min | 50 |" in parts and "**about 40 min**" in parts


@pytest.fixture(scope="module")
def reference_run():
    """The hidden suites on the reference, in process: outcomes, requests and tolerance ratios."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: several threads on a busy machine only spin
    namespace = _namespace(ASSIGNMENT.source_notebook)
    module = type(torch)("norms_and_gates_reference")
    module.__dict__.update(namespace)
    submission = CountingSubmission(module)
    ratios: list[tuple[str, float]] = []
    comparison.observers.append(lambda what, ratio: ratios.append((what, ratio)))
    try:
        suites = [ASSIGNMENT.folder / p.suite for p in load_rubric(NAME).parts]
        outcomes = judge.run_suite(suites, submission)
    finally:
        comparison.observers.clear()
        torch.set_num_threads(threads)
    return outcomes, submission.requests, ratios


def test_its_suites_keep_the_kits_limits(reference_run):
    """The reference passes with a safety margin, each part has 6 to 15 tests and the whole takes under 600
    requests; the suites document every test, use no bare assert and never mention the solutions."""
    outcomes, requests, ratios = reference_run
    assert outcomes and all(o.passed for o in outcomes), [(o.name, o.message) for o in outcomes if not o.passed]
    for part in load_rubric(NAME).parts:
        n = sum(1 for o in outcomes if f"{o.module}.py" == part.suite)
        assert TESTS_PER_PART[0] <= n <= TESTS_PER_PART[1], (part.name, n)
    assert requests < 600, requests
    assert max(r for _, r in ratios) < 0.25, max(ratios, key=lambda r: r[1])
    for path in sorted(ASSIGNMENT.folder.glob("*.py")):
        if path.name == "__init__.py":
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        assert ast.get_docstring(tree) and "solutions" not in source, path.name
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Assert), (path.name, node.lineno)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                assert ast.get_docstring(node), (path.name, node.name)


def test_constructors_alone_score_zero():
    """With only the constructors written, the structure checks may pass, and the rubric gives nothing."""
    namespace = _namespace(ASSIGNMENT.source_notebook)

    def unwritten(*args, **kwargs):
        raise NotImplementedError()

    namespace["rms_norm"] = unwritten
    for name in ("RMSNorm", "SwiGLU"):
        namespace[name].forward = unwritten
    module = type(torch)("norms_and_gates_constructors")
    module.__dict__.update(namespace)
    rubric = load_rubric(NAME)
    outcomes = judge.run_suite([ASSIGNMENT.folder / p.suite for p in rubric.parts], ModuleSubmission(module))
    passed = {o.name for o in outcomes if o.passed}
    assert passed == {n for p in rubric.parts for n in p.structural}, passed
    assert [p.score for p in score(rubric, outcomes)] == [0.0, 0.0]
