"""The judge in process, on tiny suites: a grade is the outcome of every expected test or it is not a grade,
and the submission is told when each part begins.  Also the nbgrader verdict of a check cell no part checks."""
from __future__ import annotations

import sys
import textwrap

import nbformat
import pytest
from nbgrader.utils import determine_grade

from autograder import judge
from autograder.grading import GradeResult, Unjudgeable
from autograder.judge import NOT_RUN, JudgingInterrupted, Terminated, run_suite
from autograder.nbgrader_plugin import write_verdicts
from autograder.rubric import Part, PartScore, load_rubric
from autograder.submission import Submission


class Recorder(Submission):
    """Answers `call(name, value)` with value, raises what `raises` maps a name to, and logs every event."""

    def __init__(self, raises: dict[str, BaseException] | None = None) -> None:
        super().__init__()
        self.raises = raises or {}
        self.log: list[tuple] = []

    def names(self):
        return set()

    def call(self, function, *args, **kwargs):
        self.log.append(("call", function))
        if function in self.raises:
            raise self.raises[function]
        return args[0] if args else None

    def vjp(self, function, args, kwargs, cotangents):
        raise NotImplementedError

    def new(self, class_name, *args, **kwargs):
        raise NotImplementedError

    def begin_part(self, part, parts_left):
        self.log.append(("begin", part, parts_left))


SUITES = {
    "test_alpha.py": """
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_echo(student, n):
            assert student.call(f"alpha-{n}", n) == n
    """,
    "test_beta.py": """
        def test_first(student):
            student.call("beta-1")

        def test_second(student):
            student.call("beta-2")
    """,
    "test_gamma.py": """
        def test_only(student):
            student.call("gamma-1")
    """,
}


@pytest.fixture
def suites(tmp_path):
    def forget() -> None:  # pytest's importlib mode reuses a module already imported under the same name
        for name in SUITES:
            sys.modules.pop(name.removesuffix(".py"), None)

    forget()
    for name, source in SUITES.items():
        (tmp_path / name).write_text(textwrap.dedent(source))
    yield [tmp_path / name for name in SUITES]
    forget()


def test_every_test_has_an_outcome_and_each_part_begins_before_its_first_test(suites):
    student = Recorder()
    outcomes = run_suite(suites, student)
    assert [(o.module, o.name, o.passed) for o in outcomes] == [
        ("test_alpha", "test_echo[1]", True), ("test_alpha", "test_echo[2]", True),
        ("test_beta", "test_first", True), ("test_beta", "test_second", True), ("test_gamma", "test_only", True)]
    assert student.log == [("begin", "alpha", 3), ("call", "alpha-1"), ("call", "alpha-2"),
                           ("begin", "beta", 2), ("call", "beta-1"), ("call", "beta-2"),
                           ("begin", "gamma", 1), ("call", "gamma-1")]


def test_parts_are_named_as_the_rubric_names_them():
    rubric = load_rubric("transformer_block")
    student = Recorder()
    student.call = Unjudgeable("broken").call  # every check fails at once
    run_suite(rubric.suite_files(), student, rubric.part_names)
    assert student.log == [("begin", p.name, len(rubric.parts) - i) for i, p in enumerate(rubric.parts)]
    assert ("begin", "layer_norm", len(rubric.parts)) in student.log


@pytest.mark.parametrize("signal_exc, exit_code, signal_name", [(KeyboardInterrupt(), 130, "SIGINT"),
                                                                 (Terminated(), 143, "SIGTERM")],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_midway_is_no_grade(suites, signal_exc, exit_code, signal_name):
    student = Recorder({"beta-1": signal_exc})
    with pytest.raises(JudgingInterrupted) as stopped:
        run_suite(suites, student)
    assert stopped.value.exit_code == exit_code
    assert str(stopped.value) == f"stopped by {signal_name} while judging beta (2 of 5 checks done)"
    assert ("call", "gamma-1") not in student.log


def test_pytest_exit_from_a_suite_is_no_grade(suites):
    suites[1].write_text("import pytest\n\ndef test_first(student):\n    pytest.exit('enough', returncode=0)\n")
    with pytest.raises(JudgingInterrupted) as stopped:
        run_suite(suites, Recorder())
    assert stopped.value.exit_code == 1 and "enough" in str(stopped.value)


@pytest.mark.filterwarnings("ignore::pluggy.PluggyTeardownRaisedWarning")  # other plugins' wrappers see the crash
def test_a_crash_of_the_judge_is_no_grade(suites):
    student = Recorder()
    student.take_forbidden = lambda: 1 / 0  # the judge's own reporting hook fails
    with pytest.raises(JudgingInterrupted) as stopped:
        run_suite(suites, student)
    assert stopped.value.exit_code == 1 and "ZeroDivisionError" in str(stopped.value)


def test_a_test_that_never_ran_fails_as_not_run(suites):
    # a stop request (what --maxfail makes) ends the session as "tests failed", with test_second never run
    suites[1].write_text(textwrap.dedent("""
        def test_first(student, request):
            request.session.shouldfail = "stop here"

        def test_second(student):
            pass
    """))
    outcomes = {(o.module, o.name): o for o in run_suite(suites, Recorder())}
    assert len(outcomes) == 5
    assert outcomes["test_beta", "test_first"].passed
    for never_ran in [("test_beta", "test_second"), ("test_gamma", "test_only")]:
        assert not outcomes[never_ran].passed and outcomes[never_ran].message == NOT_RUN


def test_a_deselected_test_fails_as_not_run(suites, monkeypatch):
    class Deselect:
        def pytest_collection_modifyitems(self, config, items):
            dropped = [item for item in items if item.name == "test_echo[2]"]
            items[:] = [item for item in items if item not in dropped]
            config.hook.pytest_deselected(items=dropped)

    real_main = pytest.main
    monkeypatch.setattr(judge.pytest, "main", lambda args, plugins: real_main(args, plugins=[*plugins, Deselect()]))
    outcomes = {o.name: o for o in run_suite(suites, Recorder())}
    assert len(outcomes) == 5 and outcomes["test_echo[1]"].passed
    assert not outcomes["test_echo[2]"].passed and outcomes["test_echo[2]"].message == NOT_RUN


# --- nbgrader: a graded cell that no rubric part checks ---------------------------------------------------

def _check_cell(grade_id: str, points: float) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("# hidden checks run elsewhere")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                 "points": points, "schema_version": 3}
    return cell


def test_a_check_cell_matching_no_part_scores_zero_with_a_reason():
    nb = nbformat.v4.new_notebook(cells=[_check_cell("layer_norm", 20), _check_cell("layer_nrom", 5)])
    layer_norm = Part("layer_norm", "Layer normalisation", 20, "test_layer_norm.py")
    result = GradeResult("s.ipynb", "", "transformer_block", [PartScore(layer_norm, 20.0, [], ())], 20)
    assert write_verdicts(nb, result) == ["layer_nrom"]
    assert determine_grade(nb.cells[0]) == (20, 20)
    assert determine_grade(nb.cells[1]) == (0, 5)  # nbgrader gives a graded cell without output full marks
    [error] = nb.cells[1].outputs
    assert error.output_type == "error" and error.evalue == "0 / 5 points"
    assert error.traceback == ["this check cell (grade_id layer_nrom) matches no part of the rubric for "
                               "assignment transformer_block; ask your instructor"]

