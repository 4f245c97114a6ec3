"""Evidence of a mismatch for the feedback's pictures: where the error sits."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.judging import evidence
from autograder.judging.checks.failing import evidence_title
from autograder.judging.checks.tolerance import within_tolerance


def _two_significant(value: float) -> float:
    """Two significant digits are all a colour scale shows, and keep results.json small."""
    return float(f"{value:.2g}")


def error_map(what: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float
              ) -> evidence.ErrorMap | None:
    """|actual - expected| / allowed error for each cell (float64 tensors of one shape), as a map of at most
    MAX_SIDE x MAX_SIDE: worst over the batch (dim 0 of outputs with 3 or more dims), heads and positions as
    rows, the last dim as columns, each block of a larger map its worst cell.  None for a single number,
    whose error the message already states."""
    if actual.numel() <= 1:
        return None
    within = within_tolerance(actual, expected, atol, rtol)
    raw = (actual - expected).abs() / (atol + rtol * expected.abs()).clamp_min(1e-300)
    # within the tolerance, NaN is a NaN matching a NaN: no error at all
    ratio = torch.where(within, torch.nan_to_num(raw, nan=0.0, posinf=0.0).clamp(max=1.0),
                        torch.nan_to_num(raw, nan=evidence.MAX_RATIO, posinf=evidence.MAX_RATIO))
    ratio = ratio.clamp(0, evidence.MAX_RATIO)
    # a NaN or inf where the reference is finite ranks above every error, so no block maximum hides it
    ratio = torch.where(~torch.isfinite(actual) & torch.isfinite(expected), math.inf, ratio)
    shape, groups = tuple(actual.shape), 1
    rows, columns = "dim -2 (positions)", "last dim (features)"
    if ratio.dim() == 1:
        grid, rows, columns = ratio[None], "", "index"
    elif ratio.dim() == 2:
        grid = ratio
    elif ratio.dim() == 3:
        grid = ratio.amax(dim=0)
    else:
        grid = ratio.amax(dim=0).reshape(-1, shape[-1])
        groups, rows = math.prod(shape[1:-2]), "dims 1 to -2 (heads x positions)"
    side = evidence.MAX_SIDE
    if grid.shape[0] > side or grid.shape[1] > side:
        if grid.shape[0] > side:
            groups = 1  # pooled blocks straddle the groups
        grid = F.adaptive_max_pool2d(grid[None, None], (min(grid.shape[0], side), min(grid.shape[1], side)))[0, 0]
    cells = tuple(tuple(evidence.NON_FINITE if math.isinf(v) else _two_significant(v) for v in row)
                  for row in grid.tolist())
    return evidence.ErrorMap(evidence_title(what), shape, rows, columns, groups, cells)
