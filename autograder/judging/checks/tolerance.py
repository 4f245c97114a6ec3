"""Tolerances derived from the trusted reference's own float32 error, and what is within them.

The trusted reference is evaluated twice, in float64 and in float32, on the same input values.  The observed
float32 error `err32 = max|ref32 - ref64|` measures how hard the input is for an honest float32 implementation;
the allowed absolute error is `factor * err32` plus a floor of a few ulps of the output's largest magnitude.
For float64 comparisons the observed float32 error is scaled by the ratio of the unit roundoffs (eps64 / eps32
= 2**-29), because rounding errors scale with the unit roundoff.  The expected value is always the float64
reference.
"""
from __future__ import annotations

from typing import Callable

import torch

F32_EPS = torch.finfo(torch.float32).eps
F64_EPS = torch.finfo(torch.float64).eps
EPS_RATIO = F64_EPS / F32_EPS  # 2**-29
DEFAULT_FACTOR = 30.0  # safety factor over the reference's own float32 error
FLOOR_ULPS = 16.0  # floor: this many ulps (of the compared dtype) of the output's largest magnitude


def within_tolerance(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Per entry: |actual - expected| <= atol + rtol * |expected|, or the same NaN or infinity in both."""
    ok = (actual - expected).abs() <= atol + rtol * expected.abs()
    same_nonfinite = (torch.isnan(actual) & torch.isnan(expected)) | (
        torch.isinf(actual) & torch.isinf(expected) & (actual == expected))
    return ok | same_nonfinite


def composition_tolerance(expected: torch.Tensor, dtype: torch.dtype = torch.float64) -> float:
    """The allowed absolute error between the student's whole module and the trusted composition of the student's
    own pieces (the own-parts checks): the same arithmetic up to the order of operations.  Scaled by the largest
    finite entry, so that a NaN both sides share (a fully masked row) leaves it usable: 1e-9 of it for a
    setting run in float64, and 1e-4 (about 840 float32 ulps) for one the suite runs in float32 (`dtype`),
    where the pieces only run in float32 (a module whose layers are kept where .to() does not reach them); a
    wrong wiring is off by O(1) in both.  The setting's dtype, not `expected`'s: pieces that return float32
    from a float64 setting are still held to float64's."""
    finite = expected.detach()[torch.isfinite(expected.detach())]
    scale = 1.0 + (float(finite.abs().max()) if finite.numel() else 0.0)
    return (1e-4 if dtype == torch.float32 else 1e-9) * scale


def reference_tolerance(reference: Callable[[torch.dtype], torch.Tensor], dtype: torch.dtype, *,
                        factor: float = DEFAULT_FACTOR, floor_ulps: float = FLOOR_ULPS
                        ) -> tuple[torch.Tensor, float]:
    """Evaluate the trusted `reference(dtype)` in float64 and float32; return (float64 reference, atol) for
    comparing an output of `dtype`: factor * (observed float32 error, scaled by eps64/eps32 for float64)
    plus `floor_ulps` ulps of the largest reference magnitude."""
    ref64 = reference(torch.float64).detach().to(torch.float64)
    ref32 = reference(torch.float32).detach().to(torch.float64)
    err32 = float((ref32 - ref64).abs().max()) if ref64.numel() else 0.0
    scale = float(ref64.abs().max()) if ref64.numel() else 0.0
    if dtype == torch.float64:
        return ref64, factor * err32 * EPS_RATIO + floor_ulps * F64_EPS * scale + 1e-300
    return ref64, factor * err32 + floor_ulps * F32_EPS * scale + 1e-38
