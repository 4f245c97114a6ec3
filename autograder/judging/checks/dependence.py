"""Evidence of future dependence for the feedback's pictures: which output position depends on which input
position."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest
import torch

from autograder.judging import evidence
from autograder.judging.checks.failing import evidence_title
from autograder.protocol import clean_text


def _dependence_row(gradient: Any, seq_in: int) -> str:
    """One row of a dependence matrix from the gradient of one output position: '1' at the input positions
    where it is nonzero (NaN counts), '0' elsewhere; '0' everywhere for a missing gradient, and '?' for one
    that is not a tensor of the input's sequence length."""
    width = min(seq_in, evidence.MAX_SIDE)
    if gradient is None:
        return "0" * width
    if not isinstance(gradient, torch.Tensor) or gradient.dim() < 2 or gradient.shape[-2] != seq_in:
        return "?" * width
    if gradient.numel() == 0:
        return "0" * width
    nonzero = (gradient.detach().movedim(-2, 0).reshape(seq_in, -1) != 0).any(dim=1)
    return "".join("1" if bool(v) else "0" for v in nonzero[:width])


def gradient_dependence(grads: list, inputs: Sequence[torch.Tensor], names: Sequence[str],
                         must_matter: Sequence[str], seq_out: int, what: str) -> evidence.Dependence:
    """The first MAX_SIDE output positions against the first MAX_SIDE input positions of each input."""
    matrices = []
    for i, x in enumerate(inputs[:evidence.MAX_INPUTS]):
        rows = []
        for t in range(min(seq_out, evidence.MAX_SIDE)):
            per_input = grads[t] if isinstance(grads[t], list) else []
            rows.append(_dependence_row(per_input[i] if i < len(per_input) else None, x.shape[-2]))
        matrices.append(tuple(rows))
    shown = tuple(names[:evidence.MAX_INPUTS])
    return evidence.Dependence(evidence_title(what), "gradient", tuple(clean_text(n, 40) for n in shown),
                               tuple(n in must_matter for n in shown), tuple(matrices))


def perturbation_dependence(base: torch.Tensor, moved: Callable[[int, float], Any], what: str
                             ) -> evidence.Dependence:
    """Column j says which output positions changed when the inputs moved at every position >= j (both
    directions); column 0 is never measured.  A request that fails leaves its column and the rest unmeasured.
    It asks the submission for more values: drawn only once every verdict is final (checks.failing.Later)."""
    width = min(base.shape[-2], evidence.MAX_SIDE)
    columns = ["?" * width] * width
    for j in range(1, width):
        try:
            outs = [moved(j - 1, sign) for sign in (1.0, -1.0)]
        except (Exception, pytest.fail.Exception):
            break
        columns[j] = "".join("1" if any(not torch.equal(out[..., p, :], base[..., p, :]) for out in outs) else "0"
                             for p in range(width))
    rows = tuple("".join(column[p] for column in columns) for p in range(width))
    return evidence.Dependence(evidence_title(what), "perturbation", ("every input",), (False,), (rows,))
