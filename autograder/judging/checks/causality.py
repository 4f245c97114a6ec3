"""Causality: exactly zero dependence of an output position on later input positions."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest
import torch

from autograder.judging import evidence
from autograder.judging.checks.dependence import gradient_dependence, perturbation_dependence
from autograder.judging.checks.failing import Later, fail
from autograder.judging.checks.inputs import randn
from autograder.judging.checks.shapes import expect_tensor


def one_hot_cotangents(shape: Sequence[int], *, seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """For an output [..., S, F]: one cotangent per position t, random over features (and batch), zero at
    every other position."""
    seq = shape[-2]
    noise = randn(*shape, seed=seed, dtype=dtype)
    cots = []
    for t in range(seq):
        c = torch.zeros(*shape, dtype=dtype)
        c[..., t, :] = noise[..., t, :]
        cots.append(c)
    return cots


MASK_CAUSE = "The causal mask must block every key j > t before the softmax."


def _cause(cause: Callable[[], str] | None) -> str:
    """Where a leak comes from: the suite's finding, or the mask when it has none (or its finding failed)."""
    if cause is None:
        return MASK_CAUSE
    try:
        return cause()
    except pytest.fail.Exception:  # the student's code raised while the cause was looked for
        return MASK_CAUSE


def check_causal_jacobian(vjp_fn: Callable[[list[torch.Tensor]], list[list[torch.Tensor | None]]],
                          inputs: Sequence[torch.Tensor], names: Sequence[str], out_shape: Sequence[int], *,
                          must_matter: Sequence[str], what: str, seed: int,
                          cause: Callable[[], str] | None = None) -> None:
    """Autograd Jacobian of output position t w.r.t. every input position j > t must be exactly 0, and the
    Jacobian w.r.t. each input in `must_matter` must be nonzero at every j <= t.  `vjp_fn(cotangents)` returns,
    per cotangent, one gradient (or None) per input.  Sequence is dim -2 of every input and of the output.
    `cause`, asked only on a leak, says where it comes from when the suite can tell (a module whose own
    reshaping mixes positions, not its mask); by default the mask is blamed."""
    dtype = inputs[0].dtype
    cots = one_hot_cotangents(out_shape, seed=seed, dtype=dtype)
    grads = vjp_fn(cots)
    if not isinstance(grads, list) or len(grads) != len(cots):
        fail(f"{what}: could not back-propagate through your code (no gradients came back)")
    seq = out_shape[-2]

    def dependence() -> evidence.Dependence:
        return gradient_dependence(grads, inputs, names, must_matter, seq, what)

    for t in range(seq):
        for i, name in enumerate(names):
            g = grads[t][i] if i < len(grads[t]) else None
            if g is None:
                if name in must_matter:
                    fail(f"{what}: output position {t} does not depend on input `{name}` at all (its gradient "
                         f"is missing; is the computation detached from the input?)", dependence())
                continue
            seq_in = inputs[i].shape[-2]
            leak = [j for j in range(t + 1, seq_in) if bool((g[..., j, :] != 0).any())]
            if leak:
                mag = max(float(g[..., j, :].abs().max()) for j in leak)
                fail(f"{what}: output position {t} depends on future position(s) {leak} of `{name}` "
                     f"(gradient up to {mag:.3g}; it must be exactly 0). {_cause(cause)}",
                     dependence())
            if name in must_matter:
                dead = [j for j in range(min(t + 1, seq_in)) if not bool((g[..., j, :] != 0).any())]
                if dead:
                    fail(f"{what}: output position {t} ignores input position(s) {dead} of `{name}` (gradient "
                         f"exactly 0), but every position j <= t must be attended to. Is the mask too strict "
                         f"(e.g. excluding the diagonal)?", dependence())


def check_causal_perturbation(forward: Callable[[list[torch.Tensor]], Any], inputs: Sequence[torch.Tensor],
                              *, what: str, seed: int, h: float = 0.1, cause: Callable[[], str] | None = None) -> None:
    """Perturbing every input at positions j > t by +h*r and by -h*r must leave output positions <= t
    bit-identical (`cause` as for check_causal_jacobian)."""
    base = expect_tensor(forward(list(inputs)), what=what, dtype=inputs[0].dtype)
    seq = base.shape[-2]

    def moved_output(t: int, sign: float) -> torch.Tensor:
        moved = []
        for i, x in enumerate(inputs):
            r = randn(*x.shape, seed=seed + 101 * t + i, dtype=x.dtype)
            y = x.clone()
            y[..., t + 1:, :] += sign * h * r[..., t + 1:, :]
            moved.append(y)
        return expect_tensor(forward(moved), what=what, shape=base.shape, dtype=base.dtype)

    for t in range(seq - 1):
        for sign in (1.0, -1.0):
            out = moved_output(t, sign)
            if not torch.equal(out[..., :t + 1, :], base[..., :t + 1, :]):
                changed = [p for p in range(t + 1) if not torch.equal(out[..., p, :], base[..., p, :])]
                fail(f"{what}: changing the input at positions > {t} (by {'+' if sign > 0 else '-'}{h} times a "
                     f"random direction) changed the output at position(s) {changed}; with a causal mask they "
                     f"must stay bit-identical. {_cause(cause)}", Later(lambda: perturbation_dependence(base, moved_output, what)))


def check_depends_on_future(forward: Callable[[list[torch.Tensor]], Any], inputs: Sequence[torch.Tensor],
                            *, what: str, seed: int, h: float = 0.1) -> None:
    """Sanity for the non-causal mode: perturbing positions >= 1 must change output position 0."""
    base = expect_tensor(forward(list(inputs)), what=what, dtype=inputs[0].dtype)
    moved = []
    for i, x in enumerate(inputs):
        y = x.clone()
        y[..., 1:, :] += h * randn(*x.shape, seed=seed + i, dtype=x.dtype)[..., 1:, :]
        moved.append(y)
    out = expect_tensor(forward(moved), what=what, shape=base.shape, dtype=base.dtype)
    if torch.equal(out[..., 0, :], base[..., 0, :]):
        fail(f"{what}: without the causal flag, the output at position 0 must depend on later positions, but "
             f"changing them left it unchanged. Is a causal mask applied even when it was not asked for?")
