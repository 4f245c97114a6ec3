"""Part `gradient_experiment` (10 points): `input_grad_norm(n_layers, residual, d_model=16, seed=0)`.

The reference recipe is recomputed live in the test with torch (inside torch.random.fork_rng, so the grading
process's global RNG is untouched): torch.manual_seed(seed); n_layers nn.Linear(d_model, d_model) built in
order; then x = torch.randn(1, d_model, requires_grad=True); h = h + tanh(Linear(h)) (residual) or
h = tanh(Linear(h)); the result is the norm of d sum(h) / dx as a Python float.

Tolerance: the recipe is run in float32 (as specified) and once more in float64 with the same weights and
input; the allowed relative error is max(1e-4, 30 x the observed float32 relative error).  The expected value
is the float64 one.  Any faithful implementation of the recipe (nn.Sequential, autograd.grad, .backward, any
order of the residual sum) stays within it; drawing x before the layers, a mean instead of a sum, or a
missing tanh changes the value by far more (hints are shown when the value matches one of those).

Which input amplifies which bug: depth 40 without residuals shrinks the gradient to ~1e-11 (below 1e-6),
while with residuals it stays above 1 (~27); non-default d_model and seed catch hard-coded defaults and an
ignored seed.

A failed depth-40 check shows the student's values at depths 1 to 40 against the recipe's curves, with and
without residuals (14 more calls per setting, made only after a failure).
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn as nn

from autograder.judging import checks as C
from autograder.judging import evidence as E


def _recipe(n_layers, residual, d_model, seed, dtype=torch.float32, *, x_first=False, loss="sum", tanh=True,
            activation=torch.tanh):
    # the same for every submission: computed once per process (a float, so nothing can alter the cached
    # value); torch's thread count and default dtype are part of the key because they could change its bits
    return _recipe_once(n_layers, residual, d_model, seed, dtype, x_first, loss, tanh, activation,
                        torch.get_num_threads(), torch.get_default_dtype())


@functools.lru_cache(maxsize=None, typed=True)
def _recipe_once(n_layers, residual, d_model, seed, dtype, x_first, loss, tanh, activation, threads, default_dtype):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if x_first:
            x = torch.randn(1, d_model)
        layers = [nn.Linear(d_model, d_model) for _ in range(n_layers)]
        if not x_first:
            x = torch.randn(1, d_model)
    x = x.to(dtype).requires_grad_()
    h = x
    for layer in layers:
        layer.to(dtype)
        update = activation(layer(h)) if tanh else layer(h)
        h = h + update if residual else update
    target = h.sum() if loss == "sum" else h.mean()
    return torch.autograd.grad(target, x)[0].norm().item()


def _check_value(student, n_layers, residual, d_model=None, seed=None):
    kwargs = {k: v for k, v in (("d_model", d_model), ("seed", seed)) if v is not None}
    d, s = d_model or 16, seed or 0
    label = C.describe_call("input_grad_norm", (n_layers, residual), kwargs)
    got = C.expect_number(C.call(student, "input_grad_norm", n_layers, residual, **kwargs), what=label)
    n64 = _recipe(n_layers, residual, d, s, torch.float64)
    n32 = _recipe(n_layers, residual, d, s, torch.float32)
    rtol = max(1e-4, C.DEFAULT_FACTOR * abs(n32 - n64) / abs(n64))
    mistakes = [
        ("your value matches drawing x BEFORE building the layers: build the n_layers nn.Linear first, then "
         "draw x (the order of random draws matters after torch.manual_seed)",
         _recipe(n_layers, residual, d, s, torch.float64, x_first=True)),
        ("your value matches the gradient of h.mean(): use h.sum()", _recipe(n_layers, residual, d, s, torch.float64,
                                                                               loss="mean")),
        ("your value matches the recipe without tanh: F(h) = tanh(Linear(h))",
         _recipe(n_layers, residual, d, s, torch.float64, tanh=False)),
        ("your value matches ReLU instead of tanh: F(h) = tanh(Linear(h))",
         _recipe(n_layers, residual, d, s, torch.float64, activation=torch.relu)),
        ("your value is the squared norm: return the (Euclidean) norm of the gradient", n64 ** 2),
        ("your value matches the recipe with the residual setting flipped",
         _recipe(n_layers, not residual, d, s, torch.float64)),
    ]
    if d != 16:
        mistakes.append(("your value matches d_model = 16: build the layers and x with the d_model argument",
                         _recipe(n_layers, residual, 16, s, torch.float64)))
    C.assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor(n64, dtype=torch.float64), what=label,
                   inputs={"n_layers": n_layers, "residual": residual, "d_model": d, "seed": s}, atol=0.0, rtol=rtol,
                   mistakes=[(h, torch.tensor(v, dtype=torch.float64)) for h, v in mistakes
                             if math.isfinite(v)])
    return got


CURVE_DEPTHS = (1, 2, 3, 4, 6, 8, 10, 13, 16, 20, 25, 30, 35, 40)  # the submission's points in the picture


def _curve_value(student, n_layers, residual):
    """A point of the picture: None for a value that is not a finite number.  A call that raises ends the
    picture (C.call fails): a function that raises once would raise at every depth."""
    value = C.call(student, "input_grad_norm", n_layers, residual)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = float(value.reshape(()).item())
    if type(value) not in (float, int) or not math.isfinite(value):
        return None
    return float(f"{value:.6g}")


def _curves(student):
    """The evidence of a failed value check: input_grad_norm(n, residual) with the default d_model and seed
    against the recipe, for depths up to 40, with and without residuals."""
    depths = tuple(float(n) for n in range(1, 41))
    series = []
    for residual in (True, False):
        label = "with residuals" if residual else "without residuals"
        recipe = tuple(float(f"{_recipe(int(n), residual, 16, 0, torch.float64):.6g}") for n in depths)
        mine = tuple(_curve_value(student, n, residual) for n in CURVE_DEPTHS)
        series += [E.Series(f"recipe, {label}", False, depths, recipe),
                   E.Series(f"yours, {label}", True, tuple(float(n) for n in CURVE_DEPTHS), mine)]
    return E.Curves("input_grad_norm(n_layers, residual) with d_model=16, seed=0", "n_layers",
                    "norm of the input gradient", True, tuple(series))


def test_input_grad_norm_returns_python_float(student):
    """input_grad_norm returns a plain Python float (e.g. via .item()), not a tensor or a NumPy number."""
    for residual in (True, False):
        value = C.call(student, "input_grad_norm", 3, residual)
        C.expect_exact_type(value, float, what=f"input_grad_norm(3, {residual})",
                            advice="Convert the norm with .item() (or float(...)).")


def test_gradient_vanishes_without_residuals_at_depth_40(student):
    """Without residual connections the input gradient through 40 tanh layers vanishes: input_grad_norm(40,
    False) is below 1e-6 (and not negative, not NaN)."""
    with C.evidence_on_failure(lambda: _curves(student)):
        value = C.expect_number(C.call(student, "input_grad_norm", 40, False), what="input_grad_norm(40, False)")
        if not (math.isfinite(value) and 0.0 <= value < 1e-6):
            C.fail(f"input_grad_norm(40, False) = {value:.3g}: without residuals the gradient norm at depth 40 must "
                   f"be below 1e-6 (vanishing gradient). Check that residual=False uses h = tanh(Linear(h)).")


def test_gradient_survives_with_residuals_at_depth_40(student):
    """With residual connections the input gradient through 40 layers does not vanish: input_grad_norm(40,
    True) is above 1."""
    with C.evidence_on_failure(lambda: _curves(student)):
        value = C.expect_number(C.call(student, "input_grad_norm", 40, True), what="input_grad_norm(40, True)")
        if not (math.isfinite(value) and value > 1.0):
            C.fail(f"input_grad_norm(40, True) = {value:.3g}: with residuals (h = h + tanh(Linear(h))) the gradient "
                   f"norm at depth 40 must stay above 1.")


def test_input_grad_norm_matches_recipe_at_depth_40(student):
    """input_grad_norm(40, residual) with the default d_model=16 and seed=0 equals the recipe recomputed with
    torch (relative error about 1e-4), with and without residuals."""
    with C.evidence_on_failure(lambda: _curves(student)):
        for residual in (False, True):
            _check_value(student, 40, residual)


def test_input_grad_norm_matches_recipe_other_settings(student):
    """input_grad_norm honours n_layers, d_model and seed: it equals the recipe recomputed with torch for
    several non-default settings."""
    for n_layers, residual, d_model, seed in ((5, True, 8, 3), (10, False, 32, 7), (1, False, 16, 0),
                                              (20, True, 4, 123)):
        _check_value(student, n_layers, residual, d_model, seed)


def test_input_grad_norm_is_reproducible_and_uses_seed(student):
    """input_grad_norm seeds torch itself: the same arguments give the same value twice, and a different seed
    gives a different value."""
    first = C.expect_number(C.call(student, "input_grad_norm", 6, True, seed=5),
                            what="input_grad_norm(6, True, seed=5)")
    again = C.expect_number(C.call(student, "input_grad_norm", 6, True, seed=5),
                            what="input_grad_norm(6, True, seed=5)")
    other = C.expect_number(C.call(student, "input_grad_norm", 6, True, seed=6),
                            what="input_grad_norm(6, True, seed=6)")
    if first != again:
        C.fail("input_grad_norm(6, True, seed=5) gave two different values on two calls: call "
               "torch.manual_seed(seed) at the start of the function.")
    if first == other:
        C.fail("input_grad_norm(6, True, seed=5) and seed=6 gave the same value: use the seed argument "
               "(torch.manual_seed(seed)).")
