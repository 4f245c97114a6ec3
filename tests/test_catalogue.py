"""transformer_block's catalogue, beyond what every assignment's must do (tests/test_assignments.py,
tests/test_assignment_catalogues.py, which grades it once per test run): its size, the entries issue 3 names,
and the broken-as-a-whole submissions that must score 0 declared as such; a stale or ambiguous mutation fails
loudly; and a picture that fails costs only the picture, whatever it does (two entries graded here through
the real grader, with and without pictures)."""
from __future__ import annotations

import pytest

from autograder.authoring.catalogue import CatalogueError, Entry, EveryPart, M, load
from autograder.authoring import check_suite
from conftest import describe_result, failed_tests

ASSIGNMENT = "transformer_block"
catalogue = load(ASSIGNMENT)
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
# submissions broken as a whole, which must score 0 in total
SCORE_ZERO = ["constructors-only", "everything-raises"]


# --- the catalogue itself ----------------------------------------------------------------------------------

def test_catalogue_size_and_shape():
    assert len(MISTAKES) >= 45 and len(VARIANTS) >= 15, (len(MISTAKES), len(VARIANTS))
    assert sum(e.notebook for e in MISTAKES) >= 2 and sum(e.notebook for e in VARIANTS) >= 2
    missing = [name for name in REQUIRED + REQUIRED_VARIANTS if name not in ENTRIES]
    assert not missing, missing
    # tests/test_assignment_catalogues.py grades every EveryPart mistake to 0
    assert [name for name in SCORE_ZERO if not isinstance(ENTRIES[name].part, EveryPart)] == []


def test_stale_mutation_fails_loudly():
    with pytest.raises(CatalogueError, match="occurs 0 times"):
        catalogue.solution_cells(Entry("stale", "", "layer_norm", (M("no such code", "x"),)))
    with pytest.raises(CatalogueError, match="occurs 4 times"):
        catalogue.solution_cells(Entry("ambiguous", "", "multi_head_attention",
                                       (M("nn.Linear(d_model, d_model, bias=bias)", "x"),)))
    with pytest.raises(CatalogueError, match="no solution cell"):
        catalogue.solution_cells(Entry("unknown-cell", "", replace={"nope": ""}))


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
    assert drawn["parts"] == undrawn["parts"], (describe_result(drawn), describe_result(undrawn))
    assert drawn["parts"]["gradient_experiment"][0] > 0, describe_result(drawn)  # the other settings' checks passed
    verdicts = [t["output"].split("\n(No picture")[0] for t in drawn["tests"]]
    assert not any("not run" in verdict for verdict in verdicts), describe_result(drawn)
    assert any("No picture for this check" in t["output"] for t in failed_tests(drawn)), describe_result(drawn)
