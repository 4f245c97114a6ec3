"""Grades that mean what they say, for every assignment (`assignment_names()`): its catalogue of known mistakes
and correct-but-different submissions graded through the REAL grader (`autograder.grading.grade.grade_file`:
sandboxed child, hidden suites, rubric), then checked entry by entry:

* every mistake loses points in its own part, and in no part that does not build on that part (a mistake
  declared EveryPart, a submission broken as a whole, may cost every part, and scores 0 in total: structure
  alone earns nothing);
* where the entry declares a hint, the failure output of its own part contains it;
* every correct variant gets full marks, inside half of every tolerance;
* what students see names what was compared, never hidden source or tracebacks;
* check-suite's summary passes.

Each catalogue is graded once per test run, here and nowhere else (tests/test_check_suite.py checks that no
other test file grades one): this file runs whole on one worker.  What one assignment's grades must show
besides (transformer_block's and gpt_decoder's mistakes carried forward) is at the end; its catalogue's other
rules are in tests/test_catalogue.py.
"""
from __future__ import annotations

import os
from typing import Callable

import pytest

from autograder.authoring import check_suite
from autograder.authoring.assignment import assignment_names
from autograder.authoring.catalogue import EveryPart, load
from conftest import describe_result, failed_tests

NAMES = assignment_names()
CATALOGUES = {name: load(name) for name in NAMES}
by_name = pytest.mark.parametrize("name", NAMES)


def _entries(which: Callable) -> list:
    return [pytest.param(name, e.name, id=f"{name}-{e.name}") for name in NAMES for e in CATALOGUES[name].entries()
            if which(e)]


MISTAKES = _entries(lambda e: e.part is not None)
WITH_HINTS = _entries(lambda e: e.part is not None and e.hint is not None)
BROKEN_AS_A_WHOLE = _entries(lambda e: isinstance(e.part, EveryPart))
VARIANTS = _entries(lambda e: e.part is None)  # the reference too

LEAKS = ("Traceback", "During handling", "def test_", "checks.py", ".py:", "C.fail(", "pytest.fail",
         "check failed (", "solutions", "catalogue")


def _pool_size() -> int:
    """Grading processes: the cores this run has, shared with the other pytest-xdist workers (`make test` runs
    two, each busy with a file of its own), so that the run never grades on more processes than cores."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, min(check_suite.DEFAULT_WORKERS, len(os.sched_getaffinity(0)) // workers))


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Callable[[str], dict[str, dict]]:
    """An assignment's catalogue graded, each entry once per test run, when a test first asks for it."""
    grades: dict[str, dict[str, dict]] = {}

    def of(name: str) -> dict[str, dict]:
        if name not in grades:
            grades[name] = check_suite.run_catalogue(name, workers=_pool_size(),
                                                     folder=tmp_path_factory.mktemp(f"catalogue-{name}"))
        return grades[name]
    return of


def test_the_grading_processes_never_outnumber_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert _pool_size() == 1  # make test: two workers on two cores
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert _pool_size() == 2  # one pytest process
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert _pool_size() == 1


@by_name
def test_reference_gets_full_marks(graded, name):
    result = graded(name)["reference"]
    assert result["score"] == 100 and not failed_tests(result), describe_result(result)


@pytest.mark.parametrize("name, entry", MISTAKES)
def test_mistake_loses_points_in_its_own_part_only(graded, name, entry):
    mistake, result = CATALOGUES[name].entry(entry), graded(name)[entry]
    may_cost = CATALOGUES[name].may_cost(mistake.part)
    lost = check_suite.lost_parts(result)
    assert mistake.part in lost, f"{entry} escaped: {describe_result(result)}"
    assert lost <= may_cost, f"{entry} cost unrelated parts {sorted(lost - may_cost)}"
    assert all(t["output"].strip() for t in failed_tests(result)), "every failure says what went wrong"


@pytest.mark.parametrize("name, entry", BROKEN_AS_A_WHOLE)
def test_broken_submission_scores_zero(graded, name, entry):
    result = graded(name)[entry]
    assert result["score"] == 0, describe_result(result)


@pytest.mark.parametrize("name, entry", WITH_HINTS)
def test_mistake_shows_its_hint(graded, name, entry):
    mistake, result = CATALOGUES[name].entry(entry), graded(name)[entry]
    # a hint is wrapped to the report's width (autograder/judging/hints.py): compared as words
    outputs = [" ".join(t["output"].split()) for t in failed_tests(result, mistake.part)]
    hint = " ".join(mistake.hint.split())
    assert any(hint in text for text in outputs), f"{mistake.hint!r} not shown:\n{describe_result(result)}"


@pytest.mark.parametrize("name, entry", VARIANTS)
def test_variant_gets_full_marks_with_margin(graded, name, entry):
    result = graded(name)[entry]
    assert result["score"] == 100 and not failed_tests(result), describe_result(result)
    worst = max(((f"{part}: {test}", ratio) for part, mine in result["ratios"].items() for test, ratio in mine.items()),
                key=lambda item: item[1])
    assert worst[1] < 0.5, worst


@by_name
def test_failure_outputs_are_student_facing(graded, name):
    for entry, result in graded(name).items():
        for test in failed_tests(result):
            for leak in LEAKS:
                assert leak not in test["output"], (entry, test["name"], leak, test["output"])


@by_name
def test_check_suite_catches_every_mistake_and_passes_every_variant(graded, name):
    grades = graded(name)
    text, ok = check_suite.summarise(name, grades, 0.0, 2)
    assert ok, text
    mistakes = sum(e.part is not None for e in CATALOGUES[name].entries())
    assert f"{mistakes} / {mistakes} mistakes caught" in text
    rows = check_suite.margins(name, grades)
    assert rows and all(r["worst_legit"] < 0.5 for r in rows), check_suite.format_margins(rows)


# --- transformer_block's own: a bug in one part, and the parts built on it that are right on the student's own
# code -----------------------------------------------------------------------------------------------------------

# bug -> the parts built on its part that are right on the student's own pieces: each is carried forward
CARRIED = {"ln-unbiased-variance": ["transformer_block", "norm_placement"], "att-transposed-causal-mask": [
           "multi_head_attention", "transformer_block", "mask_dependence", "order_blindness"],
           "att-sdpa-drops-mask": ["multi_head_attention", "transformer_block", "mask_dependence", "order_blindness"],
           "mha-heads-view-without-transpose": ["transformer_block", "norm_placement", "order_blindness"],
           "mha-forward-computes-nothing": ["transformer_block", "order_blindness"],
           "att-strictly-lower-mask": ["multi_head_attention", "transformer_block", "mask_dependence"],
           # these could not be judged on the student's own pieces before those pieces were taken from the
           # student's block (`child`), loaded by whatever names match, and judged wherever they run (C.OwnParts)
           "att-float-mask": ["multi_head_attention", "transformer_block", "mask_dependence", "order_blindness"],
           "att-float-mask-everywhere": ["multi_head_attention"],
           "att-inverted-mask-convention": ["multi_head_attention", "transformer_block", "mask_dependence",
                                            "order_blindness"],
           "mha-python-list-of-linears": ["transformer_block", "order_blindness", "norm_placement"],
           "LayerNorm-plain-tensors": ["transformer_block", "norm_placement"],
           "LayerNorm-gamma-beta": ["transformer_block", "norm_placement"],
           "ln-missing-keepdim": ["transformer_block", "norm_placement", "batch_dependence"]}


# --- gpt_decoder's own: the parts built on a bug's part judged on the student's own pieces ---------------------

# bug -> the parts built on its part that must be carried forward
GPT_CARRIED = {"kv-plain-tensor-attributes": ["gpt", "generate"], "attn-rope-on-queries-only": ["training"],
               "attn-heads-view-without-transpose": ["training"],
               "gpt-learned-position-table": ["generate", "training"],
               "gpt-blocks-in-python-list": ["generate", "training"], "gpt-one-block-repeated": ["generate"],
               "gpt-returns-probabilities": ["training"]}
# bugs whose pieces cannot be judged further on: the own-parts check of each part says so
GPT_UNJUDGEABLE = {"attn-uses-torch-sdpa": ["gpt", "generate", "training"], "attn-mask-excludes-diagonal": ["training"]}
OWN_PARTS_CHECK = {"gpt": "test_gpt_is_right_on_your_own_attention",
                   "generate": "test_generate_matches_greedy_decoding_with_your_own_model",
                   "training": "test_training_is_right_on_your_own_model"}
TRAINING_LOOP_BUGS = [e.name for e in CATALOGUES["gpt_decoder"].entries() if e.part == "training"]


@pytest.mark.parametrize("name, entry", [*(("transformer_block", e) for e in sorted(CARRIED)),
                                         *(("gpt_decoder", e) for e in sorted(GPT_CARRIED))])
def test_a_mistake_costs_the_parts_built_on_it_their_end_to_end_share_at_most(graded, name, entry):
    """Each part built on the bug's part is right on the student's own pieces: it keeps all but its
    end_to_end_share (5 % by default), and every failure there is carried forward, naming the part to fix."""
    from autograder.grading.rubric import load_rubric

    result, parts = graded(name)[entry], {"transformer_block": CARRIED, "gpt_decoder": GPT_CARRIED}[name][entry]
    shares = {p.name: p.end_to_end_share for p in load_rubric(name).parts}
    for part in parts:
        earned, points = result["parts"][part]
        assert 0 < points - earned <= shares[part] * points + 1e-3, f"{part}: {describe_result(result)}"
        failed = failed_tests(result, part)  # the own-parts check passed: every failure is carried forward
        assert failed and all(t["output"].startswith("Carried forward from ") for t in failed), describe_result(result)
    # and names the part to fix first
    assert f"({CATALOGUES[name].entry(entry).part})" in failed_tests(result, parts[0])[0]["output"]


@pytest.mark.parametrize("entry", sorted(GPT_UNJUDGEABLE))
def test_gpt_decoder_parts_that_cannot_be_judged_say_so(graded, entry):
    result = graded("gpt_decoder")[entry]
    for part in GPT_UNJUDGEABLE[entry]:
        own = [t for t in failed_tests(result, part) if t["name"] == OWN_PARTS_CHECK[part]]
        assert own and "cannot be judged on your own parts" in own[0]["output"], describe_result(result)
        if entry == "attn-uses-torch-sdpa":
            assert "an operation the grader does not run (ForbiddenOperation)" in own[0]["output"], own[0]["output"]


@pytest.mark.parametrize("entry", TRAINING_LOOP_BUGS)
def test_gpt_decoder_training_own_parts_check_fails_on_every_loop_bug(graded, entry):
    """else a loop bug beside a model bug would be carried forward as the model bug's"""
    names = [t["name"] for t in failed_tests(graded("gpt_decoder")[entry], "training")]
    assert OWN_PARTS_CHECK["training"] in names, names


# --- every assignment: one bug costs its points in its own part --------------------------------------------------

FOLLOW_THROUGH_BAR = 0.15  # at most this share of what one-bug submissions lose falls outside the bug's part
CANNOT_BE_JUDGED = "cannot be judged on your own parts"


def test_one_bug_costs_its_points_in_its_own_part_over_the_whole_catalogue(graded):
    """check-suite's follow-through share over every catalogue together (the parts built on a buggy one are
    judged on the student's own pieces), and each assignment's, leaving out the bugs after which a part says
    in its feedback that it cannot be judged on the student's own parts (their pieces do not run at all)."""
    tables = {name: check_suite.follow_through(CATALOGUES[name], graded(name)) for name in NAMES}
    report = "\n".join(f"{name}:\n" + "\n".join(check_suite.format_follow_through(t)) for name, t in tables.items())
    assert check_suite.combined_share(list(tables.values())) <= FOLLOW_THROUGH_BAR, report
    for name in NAMES:
        results = graded(name)
        said = {entry for entry, result in results.items()
                if any(CANNOT_BE_JUDGED in t["output"] for t in failed_tests(result)
                       if t["part"] != CATALOGUES[name].entry(entry).part)}
        judged = check_suite.follow_through(CATALOGUES[name], {e: r for e, r in results.items() if e not in said})
        assert judged["share"] <= FOLLOW_THROUGH_BAR, (name, sorted(said), report)
