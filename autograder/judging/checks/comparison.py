"""Numeric comparison with the reference, and exact comparison of discrete outputs, with hints for outputs
that match a known mistake."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from autograder.judging.checks.calls import describe_inputs
from autograder.judging.checks.failing import fail
from autograder.judging.checks.mismatch import error_map
from autograder.judging.checks.shapes import expect_tensor
from autograder.judging.checks.tolerance import within_tolerance

# Kit hook: callables receiving (what, max error / allowed error) for every assert_close; used by the kit's
# own tests to measure safety margins, never by the suites.
observers: list[Callable[[str, float], None]] = []


def _pairs(mistakes: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None
           ) -> list[tuple[str, torch.Tensor]]:
    if mistakes is None:
        return []
    return list(mistakes.items()) if isinstance(mistakes, Mapping) else list(mistakes)


def expect_equal(actual: Any, expected: torch.Tensor, *, what: str, inputs: str | Mapping[str, Any],
                 mistakes: Mapping[str, torch.Tensor] | None = None) -> None:
    """Exact equality (values and dtype) for discrete outputs such as masks."""
    actual = expect_tensor(actual, what=what, inputs=inputs, shape=expected.shape, dtype=expected.dtype)
    if torch.equal(actual, expected):
        return
    wrong = (actual != expected).nonzero().tolist()
    hints = [hint for hint, tensor in _pairs(mistakes)
             if tensor.shape == actual.shape and torch.equal(actual, tensor.to(actual.dtype))]
    fail(f"{what}: wrong values for input {describe_inputs(inputs)}: {len(wrong)} of {expected.numel()} "
         f"entries differ (first at index {tuple(wrong[0])})", hints=hints)


def assert_close(actual: Any, expected: torch.Tensor, *, what: str, inputs: str | Mapping[str, Any],
                 atol: float, rtol: float = 0.0,
                 mistakes: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None = None,
                 dtype: torch.dtype | None = None, nonfinite_hint: str | None = None,
                 hints: Sequence[str] = ()) -> torch.Tensor:
    """`actual` (from the student) must be a tensor of `expected`'s shape (and of `dtype` if given) with
    |actual - expected| <= atol + rtol * |expected| everywhere.  `mistakes` maps a hint to the output a
    known-buggy transformation produces (computed on the trusted side); a hint is shown when the student's
    output matches it within the same tolerance.  `hints` are shown on any failure: the caller has already
    established them from other outputs of the student's code (e.g. right on an easier input)."""
    actual = expect_tensor(actual, what=what, inputs=inputs, shape=expected.shape, dtype=dtype)
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    within = within_tolerance(a, e, atol, rtol)
    if observers:
        both = torch.isfinite(a) & torch.isfinite(e)
        ratio = float(((a - e).abs() / (atol + rtol * e.abs()))[both].max()) if bool(both.any()) else 0.0
        if not bool(torch.isfinite(a).all()):
            ratio = float("inf")
        for observer in observers:
            observer(what, ratio)
    if bool(within.all()):
        return actual
    n, n_bad = e.numel(), int((~within).sum())
    lines = [f"{what}: does not match the reference.", f"  input: {describe_inputs(inputs)}"]
    shown: list[str] = []  # the hints, in the order they are found
    bad_nonfinite = ~torch.isfinite(a) & torch.isfinite(e)
    if bool(bad_nonfinite.any()):
        lines.append(f"  your output contains NaN or inf in {int(bad_nonfinite.sum())} of {n} entries where "
                     f"the reference is finite")
        if nonfinite_hint:
            shown.append(nonfinite_hint)
    finite = torch.isfinite(a) & torch.isfinite(e)
    if n == 1 and bool(finite.all()):
        # a single number: its exact error would give the reference value away; one significant digit only
        rel = float((a - e).abs().sum() / e.abs().sum().clamp_min(1e-300))
        lines.append(f"  your value is off by a relative error of about {rel:.0e}")
    elif bool(finite.any()):
        diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
        worst = _unravel(int(diff.argmax()), diff.shape)
        scale = float(e.abs().max())
        significant = finite & (e.abs() >= 1e-3 * scale) & (e.abs() > 0)
        rel = float((diff[significant] / e.abs()[significant]).max()) if bool(significant.any()) else float("nan")
        lines.append(f"  max abs error {float(diff.max()):.3g} (at index {worst}), max rel error {rel:.3g} "
                     f"(over entries not close to zero)")
    if n == 1 and atol == 0:
        lines.append(f"  allowed: relative error <= {rtol:.3g}")
    else:
        lines.append(f"  allowed: |error| <= {atol:.3g}" + (f" + {rtol:.3g} * |reference|" if rtol else "")
                     + f"; {n_bad} of {n} entries are outside")
    for hint, tensor in _pairs(mistakes):
        if hint in shown or tuple(tensor.shape) != tuple(a.shape):
            continue
        if bool(within_tolerance(a, tensor.detach().to(torch.float64), atol, rtol).all()):
            shown.append(hint)
    fail("\n".join(lines), error_map(what, a, e, atol, rtol), hints=[*shown, *hints])


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """torch.unravel_index, without the first call's import of torch's symbolic shapes and sympy (a second of
    CPU in every grading process)."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def is_close(actual: Any, expected: torch.Tensor, *, atol: float, rtol: float = 0.0) -> bool:
    """Whether `actual` passes `assert_close` against `expected` (no failure raised, nothing observed)."""
    return (isinstance(actual, torch.Tensor) and tuple(actual.shape) == tuple(expected.shape)
            and bool(within_tolerance(actual.detach().to(torch.float64), expected.detach().to(torch.float64), atol,
                             rtol).all()))
