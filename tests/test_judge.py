"""The judge in process, on tiny suites: a grade is the outcome of every expected test or it is not a grade,
and the submission is told when each part begins.  The warm session: a suite is imported and collected once
per process, each submission gets fresh fixtures and its own outcomes, and a stopped run or an edited suite
starts afresh.  Also the nbgrader verdict of a check cell no part checks."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import determine_grade

from autograder.judging import judge
from autograder.grading.grade import Unjudgeable
from autograder.grading.result import GradeResult
from autograder.model.interrupts import JudgingInterrupted, Terminated
from autograder.judging.judge import NOT_RUN, run_suite
from autograder.nbgrader.plugin import write_verdicts
from autograder.grading.rubric import Part, PartScore, load_rubric
from autograder.model.submission import ModuleSubmission, Submission

from autograder import REPO_ROOT as REPO  # noqa: E402


class Recorder(Submission):
    """Answers `call(name, value)` with value (or with what `answers` maps the name to), raises what `raises`
    maps a name to, and logs every event."""

    def __init__(self, raises: dict[str, BaseException] | None = None, answers: dict | None = None) -> None:
        super().__init__()
        self.raises = raises or {}
        self.answers = answers or {}
        self.log: list[tuple] = []

    def names(self):
        return set()

    def call(self, function, *args, **kwargs):
        self.log.append(("call", function))
        if function in self.raises:
            raise self.raises[function]
        if function in self.answers:
            return self.answers[function]
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
    for name, source in SUITES.items():
        (tmp_path / name).write_text(textwrap.dedent(source))
    return [tmp_path / name for name in SUITES]


def test_every_test_has_an_outcome_and_each_part_begins_before_its_first_test(suites):
    student = Recorder()
    outcomes = run_suite(suites, student)
    assert [(o.module, o.name, o.passed) for o in outcomes] == [
        ("test_alpha", "test_echo[1]", True), ("test_alpha", "test_echo[2]", True),
        ("test_beta", "test_first", True), ("test_beta", "test_second", True), ("test_gamma", "test_only", True)]
    assert student.log == [("begin", "alpha", 3), ("call", "alpha-1"), ("call", "alpha-2"),
                           ("begin", "beta", 2), ("call", "beta-1"), ("call", "beta-2"),
                           ("begin", "gamma", 1), ("call", "gamma-1")]


def test_a_check_that_cannot_change_anything_is_not_run_and_passes_and_the_next_run_asks_again(suites):
    """`needed` sees the outcomes before each check; a check it declines is not run (its fixtures still set up
    and torn down) and passes, and the next run of the warm session asks again."""
    seen = []

    def needed(module, name, outcomes):
        seen.append((module, name, [o.name for o in outcomes]))
        return not (name == "test_second" and all(o.passed for o in outcomes))

    student = Recorder()
    outcomes = run_suite(suites, student, needed=needed)
    assert [(o.name, o.passed) for o in outcomes] == [("test_echo[1]", True), ("test_echo[2]", True),
                                                       ("test_first", True), ("test_second", True), ("test_only", True)]
    assert ("call", "beta-2") not in student.log and ("call", "gamma-1") in student.log
    assert ("test_beta", "test_second", ["test_echo[1]", "test_echo[2]", "test_first"]) in seen
    failing = Recorder(raises={"beta-1": RuntimeError("off")})
    outcomes = run_suite(suites, failing, needed=needed)  # a failure before it: needed, run and reported
    assert ("call", "beta-2") in failing.log


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


def test_a_deselected_test_fails_as_not_run(suites):
    suites[0].with_name("conftest.py").write_text(textwrap.dedent("""
        def pytest_collection_modifyitems(config, items):
            dropped = [item for item in items if item.name == "test_echo[2]"]
            items[:] = [item for item in items if item not in dropped]
            config.hook.pytest_deselected(items=dropped)
    """))
    for _ in range(2):
        outcomes = {o.name: o for o in run_suite(suites, Recorder())}
        assert len(outcomes) == 5 and outcomes["test_echo[1]"].passed
        assert not outcomes["test_echo[2]"].passed and outcomes["test_echo[2]"].message == NOT_RUN


def test_pictures_are_drawn_once_every_verdict_is_final_and_cost_only_themselves(tmp_path):
    """Evidence that asks the submission for more (checks.failing.Later) is drawn after the last check; a
    picture whose values raise or break the submission is replaced by a line, and no verdict moves."""
    suite = tmp_path / "test_pictures.py"
    suite.write_text(textwrap.dedent("""
        from autograder.judging import checks as C
        from autograder.judging.evidence import Curves, Series

        def curves(student, name):
            value = float(student.call(name, 1.0))
            return Curves("t", "x", "y", False, (Series("yours", True, (1.0,), (value,)),))

        def test_drawn(student):
            with C.evidence_on_failure(lambda: curves(student, "picture-drawn")):
                C.fail("wrong")

        def test_raises(student):
            with C.evidence_on_failure(lambda: curves(student, "picture-raises")):
                C.fail("also wrong")

        def test_broken(student):
            with C.evidence_on_failure(lambda: curves(student, "picture-breaks")):
                C.fail("wrong again")

        def test_last(student):
            student.call("last-check")
    """))
    from autograder.model.submission import StudentError, SubmissionBroken

    raises = {"picture-raises": StudentError("ValueError", "no"), "picture-breaks": SubmissionBroken("it ended")}
    for pictures in (True, False):
        student = Recorder(raises=raises)
        outcomes = {o.name: o for o in run_suite([suite], student, pictures=pictures)}
        assert {name: o.passed for name, o in outcomes.items()} == {
            "test_drawn": False, "test_raises": False, "test_broken": False, "test_last": True}
        calls = [event[1] for event in student.log if event[0] == "call"]
        if not pictures:
            assert calls == ["last-check"] and all(o.figure is None for o in outcomes.values())
            continue
        assert calls == ["last-check", "picture-drawn", "picture-raises", "picture-breaks"]
        assert outcomes["test_drawn"].figure.series[0].y == (1.0,) and outcomes["test_drawn"].message == "wrong"
        assert outcomes["test_raises"].figure is None
        assert outcomes["test_raises"].message == ("also wrong\n(No picture for this check: your code raised "
                                                   "ValueError while computing its values.)")
        assert outcomes["test_broken"].message == "wrong again\n(No picture for this check: it ended.)"


def test_a_skipped_check_fails_as_skipped(tmp_path):
    suite = tmp_path / "test_skips.py"
    suite.write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture
        def unavailable():
            pytest.skip("not today")

        def test_skipped_in_its_body(student):
            pytest.skip("not today")

        def test_skipped_by_its_fixture(student, unavailable):
            pass

        def test_plain(student):
            pass
    """))
    for _ in range(2):
        outcomes = {o.name: (o.passed, o.message) for o in run_suite([suite], Recorder())}
        assert outcomes == {"test_skipped_in_its_body": (False, "check was skipped"),
                            "test_skipped_by_its_fixture": (False, "check was skipped"), "test_plain": (True, "")}


# --- the warm session: one import and one collection per process -------------------------------------------

COUNTING = """
    import pathlib

    import pytest

    LOG = pathlib.Path(__file__).with_name("events.log")


    def log(event):
        with LOG.open("a") as f:
            f.write(event + "\\n")


    log("import")


    def pytest_generate_tests(metafunc):  # pytest calls it while collecting each test function
        log("collect " + metafunc.function.__name__)


    @pytest.fixture(scope="session")
    def seen(student):
        log("setup")
        yield student
        log("teardown")


    def test_same_submission(student, seen):
        if seen is not student:
            pytest.fail("a session fixture holds another submission")


    def test_answer(student, seen):
        value = student.call("answer", 42)
        if value == "exit":
            pytest.exit("enough", returncode=0)
        if value != 42:
            pytest.fail(f"got {value}")
"""
COLLECTED = ["import", "collect test_same_submission", "collect test_answer"]


@pytest.fixture
def counting(tmp_path):
    (tmp_path / "test_counting.py").write_text(textwrap.dedent(COUNTING))
    return [tmp_path / "test_counting.py"]


def events(suite: list[Path]) -> list[str]:
    log = suite[0].with_name("events.log")
    return log.read_text().splitlines() if log.exists() else []


def verdicts(suite: list[Path], student: Submission) -> dict[str, tuple[bool, str]]:
    return {o.name: (o.passed, o.message) for o in run_suite(suite, student)}


RIGHT = {"test_same_submission": (True, ""), "test_answer": (True, "")}


def test_a_suite_is_imported_and_collected_once_per_process(counting):
    for _ in range(3):
        assert verdicts(counting, Recorder()) == RIGHT
    # and the session fixture set up and torn down for each submission
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 3
    judge.close_sessions()  # a cold start imports and collects again
    assert verdicts(counting, Recorder()) == RIGHT
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 3 + COLLECTED + ["setup", "teardown"]


def test_the_judge_loads_no_installed_pytest_plugin(counting):
    """Plugins installed beside the kit (this environment has xdist, hypothesis, anyio's) would run their hooks
    around every check and cost half a second at each start: the judge's pytest has only its own."""
    from importlib.metadata import entry_points

    assert entry_points(group="pytest11"), "this test needs an installed plugin to mean anything"
    verdicts(counting, Recorder())
    (session,) = (s for key, s in judge._sessions.items() if key == (str(counting[0]),))
    assert session.config.pluginmanager.list_plugin_distinfo() == []


@pytest.mark.parametrize("order", [("right", "wrong"), ("wrong", "right")])
def test_each_submission_gets_fresh_fixtures_and_its_own_outcomes(counting, order):
    expected = {"right": RIGHT, "wrong": {**RIGHT, "test_answer": (False, "got 41")}}
    for name in order + order:
        student = Recorder(answers={"answer": 41} if name == "wrong" else {})
        assert verdicts(counting, student) == expected[name], name
        assert student.log == [("begin", "counting", 1), ("call", "answer")]
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 4


def _stops(kind: str) -> Recorder:
    if kind == "crash":
        student = Recorder()
        student.take_forbidden = lambda: 1 / 0  # the judge's own reporting hook fails
        return student
    if kind == "pytest.exit":
        return Recorder(answers={"answer": "exit"})
    return Recorder({"answer": KeyboardInterrupt() if kind == "SIGINT" else Terminated()})


@pytest.mark.filterwarnings("ignore::pluggy.PluggyTeardownRaisedWarning")  # other plugins' wrappers see the crash
@pytest.mark.parametrize("kind", ["SIGINT", "SIGTERM", "pytest.exit", "crash"])
def test_a_stopped_run_closes_the_session_and_the_next_one_starts_afresh(counting, kind):
    assert verdicts(counting, Recorder()) == RIGHT
    with pytest.raises(JudgingInterrupted):
        run_suite(counting, _stops(kind))
    # the stopped run's fixtures were torn down, and the next run imports and collects the suite again
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 2
    for _ in range(2):
        assert verdicts(counting, Recorder()) == RIGHT
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 2 + COLLECTED + ["setup", "teardown"] * 2


def test_an_edited_suite_is_collected_again(counting):
    assert verdicts(counting, Recorder()) == RIGHT
    counting[0].write_text(textwrap.dedent(COUNTING).replace("value != 42", "value != 43"))
    for _ in range(2):
        assert verdicts(counting, Recorder()) == {**RIGHT, "test_answer": (False, "got 42")}
    assert events(counting) == COLLECTED + ["setup", "teardown"] + COLLECTED + ["setup", "teardown"] * 2


def test_the_judge_prints_nothing_and_leaves_streams_and_directory_as_they_were(tmp_path, capfd):
    suite = tmp_path / "test_noisy.py"
    suite.write_text(textwrap.dedent("""
        import os
        import sys

        import pytest

        OFF = ["cacheprovider", "randomly", "xdist", "warnings", "logging", "faulthandler"]

        def test_noisy(student, request):
            print("to stdout")
            print("to stderr", file=sys.stderr)
            os.write(1, b"to fd 1")
            os.write(2, b"to fd 2")
            os.chdir("/")
            on = [name for name in OFF if not request.config.pluginmanager.is_blocked(name)]
            if on:
                pytest.fail(f"plugins not disabled: {on}")
    """))

    def state():
        return (sys.stdin, sys.stdout, sys.stderr, os.getcwd(),
                [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (0, 1, 2)])

    before = state()
    for _ in range(2):
        assert verdicts([suite], Recorder()) == {"test_noisy": (True, "")}
        assert state() == before
    assert capfd.readouterr() == ("", "")


def test_sessions_close_cleanly_at_exit(counting):
    counting[0].with_name("conftest.py").write_text(textwrap.dedent("""
        import pathlib

        def pytest_unconfigure(config):
            with pathlib.Path(__file__).with_name("events.log").open("a") as f:
                f.write("unconfigure\\n")
    """))
    script = textwrap.dedent("""
        import atexit
        import sys

        atexit.register(lambda: print("printed after the judge closed its sessions"))  # handlers run last-in first-out
        from autograder.judging.judge import run_suite
        from autograder.model.submission import Submission

        class Answers(Submission):
            def names(self):
                return set()

            def call(self, function, *args, **kwargs):
                return args[0]

            vjp = new = call

        for _ in range(2):
            print([o.passed for o in run_suite([sys.argv[1]], Answers())])
    """)
    done = subprocess.run([sys.executable, "-c", script, str(counting[0])], capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["[True, True]"] * 2 + ["printed after the judge closed its sessions"]
    assert events(counting) == COLLECTED + ["setup", "teardown"] * 2 + ["unconfigure"]


def test_warm_grades_equal_cold_grades_in_any_order():
    """The real suites (the two quickest parts), on the reference and two broken variants."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_hidden_suites import _variant, fresh_reference, returns_none

    def unbiased(module):
        module.layer_norm = lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True)) / (
            x.var(-1, keepdim=True, unbiased=True) + eps).sqrt() * w + b

    files = [REPO / "assignments" / "transformer_block" / f"test_{part}.py" for part in ("layer_norm", "attention")]
    modules = {"reference": fresh_reference(), "none": _variant(returns_none), "unbiased": _variant(unbiased)}
    cold = {}
    for name, module in modules.items():
        judge.close_sessions()
        cold[name] = run_suite(files, ModuleSubmission(module))
    assert any(o.passed for o in cold["none"]) and not all(o.passed for o in cold["unbiased"])
    for name in [*modules, *reversed(modules)]:
        assert run_suite(files, ModuleSubmission(modules[name])) == cold[name], name


# --- nbgrader: a graded cell that no rubric part checks ---------------------------------------------------

def _check_cell(grade_id: str, points: float) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("# hidden checks run elsewhere")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                 "points": points, "schema_version": 3}
    return cell


def test_a_check_cell_matching_no_part_scores_zero_with_a_reason():
    nb = nbformat.v4.new_notebook(cells=[_check_cell("layer_norm", 20), _check_cell("layer_nrom", 5),
                                         _check_cell("attention", 40)])
    layer_norm = Part("layer_norm", "Layer normalisation", 20, "test_layer_norm.py")
    attention = Part("attention", "Attention", 20, "test_attention.py")
    result = GradeResult("s.ipynb", "", "transformer_block", [PartScore(layer_norm, 20.0, [], ()),
                                                             PartScore(attention, 10.0, [], ())], 40)
    assert write_verdicts(nb, result) == [
        "this check cell (grade_id layer_nrom) matches no part of the rubric for assignment transformer_block",
        "this check cell (grade_id attention) carries 40 points, and the rubric's part attention of assignment "
        "transformer_block 20"]
    assert determine_grade(nb.cells[0]) == (20, 20)
    assert determine_grade(nb.cells[1]) == (0, 5)  # nbgrader gives a graded cell without output full marks
    [error] = nb.cells[1].outputs
    assert error.output_type == "error" and error.evalue == "0 / 5 points"
    assert error.traceback == ["this check cell (grade_id layer_nrom) matches no part of the rubric for "
                               "assignment transformer_block; ask your instructor"]
    # points the rubric did not decide are never written: not 10 of 20 scaled to 20 of 40
    assert determine_grade(nb.cells[2]) == (0, 40)



def test_hints_and_the_running_check_are_fields_never_words(tmp_path):
    """A check's hints reach its outcome as a list beside its message, whatever they say (bounded as a result
    keeps them); the check running now is (part, name) from the judge, not from pytest's environment; a
    picture that a request never sent (NotRun) says why without pytest's or the host's wording."""
    suite = tmp_path / "test_hinted.py"
    suite.write_text(textwrap.dedent("""
        from autograder.judging import checks as C
        from autograder.judging import judge
        from autograder.judging.evidence import Curves, Series

        def test_hinted(student):
            assert judge.running_check() == ("hinted part", "test_hinted")
            C.fail("wrong\\n  Hint: in the message", hints=["Hint: one\\nover two lines", "two", "two", "",
                                                              "x" * 5000, *map(str, range(20))])

        def test_plain(student):
            C.fail("wrong too")

        def test_unsent_picture(student):
            def curves():
                student.call("picture")
                return None
            with C.evidence_on_failure(curves):
                C.fail("wrong again", hints=["look"])
    """))
    from autograder.judging.hints import MAX_HINT_CHARS, MAX_HINTS
    from autograder.model.submission import NotRun

    student = Recorder(raises={"picture": NotRun("an earlier request to picture did not finish in time")})
    outcomes = {o.name: o for o in run_suite([suite], student, {"test_hinted": "hinted part"})}
    assert judge.running_check() is None
    hinted = outcomes["test_hinted"]
    assert hinted.message == "wrong\n  Hint: in the message"  # as written: a message is never parsed
    assert hinted.hints[:3] == ("Hint: one\nover two lines", "two", "x" * (MAX_HINT_CHARS - 1) + "…")
    assert len(hinted.hints) == MAX_HINTS
    assert outcomes["test_plain"].hints == ()
    unsent = outcomes["test_unsent_picture"]
    assert unsent.hints == ("look",)
    assert unsent.message == ("wrong again\n(No picture for this check: an earlier request to picture did not "
                              "finish in time.)")
    assert str(NotRun("why")) == "not run: why"  # what a check that asked for it says


def test_a_message_names_the_students_modules_the_same_on_every_run():
    """A list of the student's modules passed to a graded function (norm_placement's blocks) is described by
    what they are, not by an object's address, which would change the stored result on every run."""
    import torch

    from autograder.judging.checks.calls import Module, describe_call

    blocks = [Module(object(), "TransformerBlock"), Module(object(), "TransformerBlock")]
    text = describe_call("layer_grad_norms", (blocks, torch.zeros(2, 3)))
    assert text == "layer_grad_norms([your TransformerBlock, your TransformerBlock], float32[2, 3])", text
