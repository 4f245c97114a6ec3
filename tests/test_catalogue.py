"""Grades that mean what they say: the catalogue of known mistakes and correct-but-different submissions,
graded once per test session through the REAL grader (`autograder.grading.grade.grade_file`: sandboxed child,
hidden suites, rubric; a process pool of 2), then checked entry by entry:

* every mistake loses points in its own part, and in no part that does not build on that part (a mistake
  declared EveryPart, a submission broken as a whole, may cost every part); in a part built on it whose own
  logic is right on the student's own parts, it costs one end-to-end check at most, and the feedback says
  where it comes from;
* a submission with constructors only, or with nothing implemented, scores 0 (structure alone earns nothing);
* where the entry declares a hint, the failure output of its own part contains it (and most entries do);
* every correct variant gets full marks, inside half of every tolerance;
* what students see names what was compared, never hidden source or tracebacks;
* every mutation applies to the reference code exactly (a stale find-string fails loudly).
"""
from __future__ import annotations

import pytest

from autograder.authoring.catalogue import REFERENCE, CatalogueError, Entry, M, load
from autograder.authoring import check_suite
from autograder.host.source_cells import read_cells

ASSIGNMENT = "transformer_block"
catalogue = load(ASSIGNMENT)
may_cost = catalogue.may_cost
ENTRIES = {e.name: e for e in catalogue.entries()}
MISTAKES = [e for e in ENTRIES.values() if e.part is not None]
VARIANTS = [e for e in ENTRIES.values() if e.part is None]

# the mistakes issue 3 names explicitly: each must be in the catalogue
REQUIRED = ["ln-unbiased-variance", "ln-eps-outside-sqrt", "ln-missing-keepdim", "ln-ignores-eps-argument",
            "block-one-layernorm-shared", "att-naive-softmax", "att-strictly-lower-mask",
            "mha-heads-view-without-transpose", "att-mask-after-softmax", "block-pre-norm-residual-from-normalised",
            "att-float-mask", "mha-assertion-error", "grad-0-dim-tensor", "LayerNorm-plain-tensors",
            "mha-python-list-of-linears", "mha-ignores-bias-flag", "constructors-only", "everything-raises"]
# correct code written like well-known public implementations: a causal mask registered as a buffer
REQUIRED_VARIANTS = ["nb-mingpt-bias-buffer", "llms-from-scratch-mask-buffer", "non-persistent-mask-buffer"]
# submissions that must score 0 in total
SCORE_ZERO = ["constructors-only", "everything-raises"]

LEAKS = ("Traceback", "During handling", "def test_", "checks.py", ".py:", "C.fail(", "pytest.fail",
         "check failed (", "solutions", "catalogue")


@pytest.fixture(scope="session")
def graded(tmp_path_factory) -> dict[str, dict]:
    """Every entry graded once per test run (this file runs on one worker), with a pool of 2 processes."""
    return check_suite.run_catalogue(ASSIGNMENT, workers=2, folder=tmp_path_factory.mktemp("catalogue"))


def _failures(result: dict, part: str | None = None) -> list[dict]:
    return [t for t in result["tests"] if not t["passed"] and (part is None or t["part"] == part)]


def _describe(result: dict) -> str:
    lines = [f"score {result['score']}: {result['parts']}"] + [f"cell error: {e}" for e in result["cell_errors"]]
    lines += [f"{t['name']}: {t['output']}" for t in _failures(result)[:8]]
    return "\n".join(lines)


# --- the catalogue itself ----------------------------------------------------------------------------------

def test_catalogue_size_and_shape():
    assert len(MISTAKES) >= 45 and len(VARIANTS) >= 15, (len(MISTAKES), len(VARIANTS))
    assert sum(e.notebook for e in MISTAKES) >= 2 and sum(e.notebook for e in VARIANTS) >= 2
    assert {e.part for e in MISTAKES} == set(catalogue.built_on)
    missing = [name for name in REQUIRED + REQUIRED_VARIANTS if name not in ENTRIES]
    assert not missing, missing


def test_majority_of_mistakes_declare_a_hint():
    assert sum(e.hint is not None for e in MISTAKES) > 0.75 * len(MISTAKES)


@pytest.mark.parametrize("name", list(ENTRIES))
def test_entry_builds_from_the_reference(name, tmp_path):
    entry = ENTRIES[name]
    path = catalogue.write(entry, tmp_path)
    for number, cell in enumerate(read_cells(path), 1):
        compile(cell, f"{path.name} cell {number}", "exec")
    if entry.mutations or entry.replace:
        assert catalogue.solution_cells(entry) != catalogue.solution_cells(REFERENCE)


def test_stale_mutation_fails_loudly():
    with pytest.raises(CatalogueError, match="occurs 0 times"):
        catalogue.solution_cells(Entry("stale", "", "layer_norm", (M("no such code", "x"),)))
    with pytest.raises(CatalogueError, match="occurs 4 times"):
        catalogue.solution_cells(Entry("ambiguous", "", "multi_head_attention",
                                       (M("nn.Linear(d_model, d_model, bias=bias)", "x"),)))
    with pytest.raises(CatalogueError, match="no solution cell"):
        catalogue.solution_cells(Entry("unknown-cell", "", replace={"nope": ""}))


# --- graded through the real grader -------------------------------------------------------------------------

def test_reference_gets_full_marks(graded):
    result = graded["reference"]
    assert result["score"] == 100 and not _failures(result), _describe(result)


@pytest.mark.parametrize("name", [e.name for e in MISTAKES])
def test_mistake_loses_points_in_its_own_part_only(graded, name):
    entry, result = ENTRIES[name], graded[name]
    lost = check_suite.lost_parts(result)
    assert entry.part in lost, f"{name} escaped: {_describe(result)}"
    assert lost <= may_cost(entry.part), f"{name} cost unrelated parts {sorted(lost - may_cost(entry.part))}"
    assert all(t["output"].strip() for t in _failures(result)), "every failure says what went wrong"


@pytest.mark.parametrize("name", SCORE_ZERO)
def test_broken_submission_scores_zero(graded, name):
    result = graded[name]
    assert result["score"] == 0, _describe(result)


@pytest.mark.parametrize("name", [e.name for e in MISTAKES if e.hint is not None])
def test_mistake_shows_its_hint(graded, name):
    entry, result = ENTRIES[name], graded[name]
    outputs = [t["output"] for t in _failures(result, entry.part)]
    assert any(entry.hint in text for text in outputs), f"{entry.hint!r} not shown:\n{_describe(result)}"


@pytest.mark.parametrize("name", [e.name for e in VARIANTS])
def test_variant_gets_full_marks_with_margin(graded, name):
    result = graded[name]
    assert result["score"] == 100 and not _failures(result), _describe(result)
    worst = max(((f"{part}: {test}", ratio) for part, mine in result["ratios"].items() for test, ratio in mine.items()),
                key=lambda item: item[1])
    assert worst[1] < 0.5, worst


def test_failure_outputs_are_student_facing(graded):
    for name, result in graded.items():
        for test in _failures(result):
            for leak in LEAKS:
                assert leak not in test["output"], (name, test["name"], leak, test["output"])


def test_check_suite_summary_passes(graded):
    text, ok = check_suite.summarise(ASSIGNMENT, graded, 0.0, 2)
    assert ok, text
    assert f"{len(MISTAKES)} / {len(MISTAKES)} mistakes caught" in text
    rows = check_suite.margins(ASSIGNMENT, graded)
    assert rows and all(r["worst_legit"] < 0.5 for r in rows), check_suite.format_margins(rows)


# a bug in one part, and the parts built on it that are right on the student's own code
CARRIED = {"ln-unbiased-variance": ["transformer_block", "norm_placement"], "att-transposed-causal-mask": [
           "multi_head_attention", "transformer_block", "mask_dependence", "order_blindness"],
           "att-sdpa-drops-mask": ["multi_head_attention", "transformer_block", "mask_dependence", "order_blindness"],
           "mha-heads-view-without-transpose": ["transformer_block", "norm_placement", "order_blindness"],
           "mha-forward-computes-nothing": ["transformer_block", "order_blindness"],
           "att-strictly-lower-mask": ["multi_head_attention", "transformer_block", "mask_dependence"]}


@pytest.mark.parametrize("name", sorted(CARRIED))
def test_one_mistake_costs_the_parts_built_on_it_one_check_at_most(graded, name):
    result = graded[name]
    for part in CARRIED[name]:
        earned, points = result["parts"][part]
        assert 0 < points - earned <= 0.2 * points, f"{part}: {_describe(result)}"
        failed = _failures(result, part)  # the own-parts check passed: every failure is carried forward
        assert failed and all(t["output"].startswith("Carried forward from ") for t in failed), _describe(result)
    # and names the part to fix first
    assert f"({ENTRIES[name].part})" in _failures(result, CARRIED[name][0])[0]["output"]


# --- pictures never change a verdict -------------------------------------------------------------------------

# wrong at depth 40, where the checks look (so their pictures are drawn), and fatal at depth 2, where only the
# pictures look (autograder.judging.checks.failing.Later: drawn once every verdict is final)
_SEED = "    torch.manual_seed(seed)\n"
PICTURE_HAZARDS = {
    "picture-input-ends-the-process": "__import__('os')._exit(3)",
    "picture-input-raises": "raise RuntimeError('not at depth 2')",
}


@pytest.mark.parametrize("hazard", sorted(PICTURE_HAZARDS))
def test_a_picture_that_fails_costs_only_the_picture(hazard, tmp_path):
    body = f"    if n_layers == 2:\n        {PICTURE_HAZARDS[hazard]}\n    if n_layers == 40:\n        return 0.5\n"
    path = catalogue.write(Entry(hazard, "", "gradient_experiment", (M(_SEED, body + _SEED),)), tmp_path)
    drawn, undrawn = (check_suite.grade_entry(ASSIGNMENT, str(path), pictures) for pictures in (True, False))
    assert drawn["parts"] == undrawn["parts"], (_describe(drawn), _describe(undrawn))
    assert drawn["parts"]["gradient_experiment"][0] > 0, _describe(drawn)  # the other settings' checks passed
    verdicts = [t["output"].split("\n(No picture")[0] for t in drawn["tests"]]
    assert not any("not run" in verdict for verdict in verdicts), _describe(drawn)
    assert any("No picture for this check" in t["output"] for t in _failures(drawn)), _describe(drawn)
