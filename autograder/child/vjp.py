"""What a `vjp` request means: run the function once, then one backward pass per cotangent.

Computed the same way in the child, for the student's code, and by the trusted in-process
`ModuleSubmission`, for the reference, so the two can only differ in the code they run.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch


def vjp_of(fn: Any, args: Sequence[Any], kwargs: dict[str, Any], cotangents: Sequence[torch.Tensor]
           ) -> tuple[Any, list[list[torch.Tensor | None]]]:
    leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
              for a in args]
    with torch.enable_grad():
        out = fn(*leaves, **kwargs)
        tensors = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
        grads: list[list[torch.Tensor | None]] = []
        for i, cot in enumerate(cotangents):
            gs = torch.autograd.grad((out * cot).sum(), tensors, retain_graph=i + 1 < len(cotangents),
                                     allow_unused=True) if tensors else ()
            it = iter(gs)
            grads.append([next(it) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in leaves])
    return out.detach() if isinstance(out, torch.Tensor) else out, grads
