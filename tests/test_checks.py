"""The checks' own helpers, as every suite uses them: deterministic inputs drawn once per process and handed
out as copies, and a comparison's failure message that costs no import of its own."""
from __future__ import annotations

import pytest
import torch

from autograder.judging.checks import inputs
from autograder.judging.checks.comparison import assert_close
from tests.test_architecture import modules_loaded_by


def fresh_draw(*shape: int, seed: int, dtype: torch.dtype = torch.float32, mean: float = 0.0,
               std: float = 1.0) -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (x * std + mean).to(dtype)


@pytest.mark.parametrize("shape, options", [
    ((3, 4), {"seed": 1}), ((2, 3, 5), {"seed": 7, "dtype": torch.float64, "mean": 1, "std": 0.3}),
    ((4,), {"seed": 2, "mean": -0.0, "std": 0.0}), ((4,), {"seed": 2, "mean": 0.0, "std": -0.0}), ((1,), {"seed": 3})])
def test_randn_draws_once_per_process_and_hands_out_copies(monkeypatch, shape, options):
    drawn = []
    generator = inputs.generator
    monkeypatch.setattr(inputs, "generator", lambda seed: drawn.append(seed) or generator(seed))
    first, second = inputs.randn(*shape, **options), inputs.randn(*shape, **options)
    expected = fresh_draw(*shape, **options)
    for copy in (first, second):  # the same numbers, signs of zero included, dtype and layout
        assert copy.dtype == expected.dtype and copy.stride() == expected.stride()
        assert torch.equal(copy, expected) and torch.equal(copy.signbit(), expected.signbit())
    assert len(drawn) <= 1  # none at all when an earlier test drew the same
    first.add_(1)  # a caller changing its copy changes no other
    assert torch.equal(inputs.randn(*shape, **options), expected)


def test_randn_of_a_tensor_mean_is_drawn_afresh():
    mean = torch.tensor(2.0, dtype=torch.float64)
    assert torch.equal(inputs.randn(3, seed=5, mean=mean), fresh_draw(3, seed=5, mean=mean))


def test_a_failed_comparison_names_the_worst_index_as_torch_does():
    expected = torch.zeros(2, 3, 4)
    actual = expected.clone()
    actual[1, 2, 0] = 5.0
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_close(actual, expected, what="out", inputs="x", atol=1e-6)
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(1 * 12 + 2 * 4 + 0), (2, 3, 4)))
    assert f"(at index {worst})" in str(failure.value.msg)


def test_a_failed_comparison_imports_nothing_of_torchs_symbolic_shapes():
    """torch.unravel_index's first call imports torch's symbolic shapes and sympy: a second of CPU in every
    grading process that grades a wrong submission."""
    loaded = modules_loaded_by(
        "import pytest, torch\nfrom autograder.judging.checks.comparison import assert_close\n"
        "try:\n    assert_close(torch.ones(2, 3), torch.zeros(2, 3), what='out', inputs='x', atol=1e-6)\n"
        "except pytest.fail.Exception:\n    pass")
    assert "sympy" not in loaded and "torch.fx.experimental.symbolic_shapes" not in loaded


def _raises(message: str):
    def run():
        pytest.fail(message, pytrace=False)
    return run


def test_an_own_parts_check_skips_where_a_piece_fails_and_fails_only_when_nothing_was_judged():
    """OwnParts: a setting whose pieces fail is skipped when the whole fails there too; a whole that runs there
    fails the check; a degenerate setting is compared but not counted; with nothing judged it fails, naming
    why, and with one judged setting it passes."""
    from autograder.judging.checks.own_parts import OwnParts, fill_parameters

    own = OwnParts("your block")
    assert own.compose("causal", _raises("your causal_mask raised TypeError")) is None
    own.expect_fails_too("causal", _raises("your block raised TypeError"))  # consistent: skipped
    assert own.compose("plain", lambda: 3) == 3
    own.judged("plain", discriminating=False, degenerate="too uniform")
    with pytest.raises(pytest.fail.Exception, match="cannot be judged on your own parts, on no configuration: "
                       "causal: your causal_mask raised TypeError; plain: too uniform"):
        own.finish()
    own.judged("wide")
    own.finish()
    with pytest.raises(pytest.fail.Exception, match=r"ran where your own piece failed \(your causal_mask raised"):
        own.expect_fails_too("causal", lambda: 1.0)

    # the test's values where a name and shape fit, distinct random values of the test's scale elsewhere
    params = {"ln1.gamma": torch.zeros(4), "ln2.gamma": torch.zeros(4), "w": torch.zeros(2, 8),
              "b": torch.zeros(3, dtype=torch.float64)}
    state = {"w": torch.ones(2, 8, dtype=torch.float64), "b": torch.ones(4), "ln1.weight": torch.ones(4)}
    filled = fill_parameters(params, state, seed=1)
    assert filled["w"].dtype == torch.float32 and torch.equal(filled["w"], torch.ones(2, 8))
    assert filled["b"].dtype == torch.float64 and not torch.equal(filled["b"], torch.ones(3, dtype=torch.float64))
    assert not torch.equal(filled["ln1.gamma"], filled["ln2.gamma"])
    assert 0.3 < float(filled["ln1.gamma"].mean()) < 1.7
    assert all(torch.equal(filled[k], v) for k, v in fill_parameters(params, state, seed=1).items())
