"""What a `vjp` request means: run the function once, then one backward pass per cotangent (and the two other
requests a trusted side runs a training step with: the gradients of a module's parameters, the RNG's state).

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


def parameter_vjp_of(module: Any, args: Sequence[Any], kwargs: dict[str, Any], cotangents: Sequence[torch.Tensor]
                     ) -> tuple[Any, list[dict[str, torch.Tensor | None]]]:
    """Run the module once, then for each cotangent c the gradients of (output * c).sum() with respect to each
    of its named parameters that requires grad (None where unused): what loss.backward() would add to their
    .grad, for a trusted side that computes the loss, and the optimizer's step, itself.  No .grad is touched."""
    named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    with torch.enable_grad():
        out = module(*args, **kwargs)
        grads: list[dict[str, torch.Tensor | None]] = []
        for i, cot in enumerate(cotangents):
            gs = torch.autograd.grad((out * cot).sum(), [p for _, p in named], retain_graph=i + 1 < len(cotangents),
                                     allow_unused=True) if named else ()
            grads.append({name: g for (name, _), g in zip(named, gs)})
    return out.detach() if isinstance(out, torch.Tensor) else out, grads


def rng_state(state: Any = None) -> torch.Tensor:
    """torch's global RNG state, then set: an int seeds it (torch.manual_seed), a state tensor restores it."""
    before = torch.get_rng_state()
    if type(state) is int:
        torch.manual_seed(state)
    elif state is not None:
        torch.set_rng_state(state)
    return before
