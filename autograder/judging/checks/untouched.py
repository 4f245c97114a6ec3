"""Inputs a function must leave alone: a module's state before a call and the check that it is the same after,
and a call (of a function, or of a module's forward) that fails when it changed a tensor it was given.

A function that takes a student's module (a stack of blocks to measure, a layer to permute) may read and run it,
never change it: the notebook says so where it matters, and a change is invisible in the function's own return
value (a block frozen with requires_grad_(False) still passes the input's gradient on).  What counts as the
module's state is what the caller could notice afterwards: every parameter's and buffer's value, dtype and
shape, every parameter's requires_grad, every submodule's training flag.  A parameter's .grad is not part of
it: a backward pass fills it, and the notebook allows computing gradients with loss.backward().
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from autograder.judging.checks.calls import _handles, describe_call, student_code
from autograder.judging.checks.failing import fail
from autograder.model.submission import Submission, TensorState

if TYPE_CHECKING:
    from autograder.judging.checks.calls import Module


@dataclass(frozen=True)
class ModuleState:
    """What a caller could notice of a module: tensors by name (parameters and persistent buffers, through
    state_dict, plus named_parameters for parameters kept out of it), training flags, requires_grad flags."""

    tensors: dict[str, torch.Tensor]
    training: dict[str, bool]
    requires_grad: dict[str, bool]


def module_state(module: Module) -> ModuleState:
    tensors = dict(module.state_dict())
    tensors.update(module.named_parameters())
    info = module.info()
    return ModuleState(tensors, dict(info.training), dict(info.requires_grad))


def _flag_change(before: dict[str, bool], after: dict[str, bool], what: str) -> str | None:
    for name, flag in before.items():
        if after.get(name, flag) != flag:
            return f"{what} of '{name or 'the module itself'}' went from {flag} to {after[name]}"
    if set(after) != set(before):
        return f"the module's {what} flags name other submodules or parameters than before"
    return None


def _tensor_change(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> str | None:
    if set(after) != set(before):
        added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
        return f"its parameters and buffers changed: added {added or 'none'}, removed {removed or 'none'}"
    for name, value in before.items():
        now = after[name]
        if now.dtype != value.dtype or now.shape != value.shape:
            return f"'{name}' changed from {value.dtype} {tuple(value.shape)} to {now.dtype} {tuple(now.shape)}"
        if not torch.equal(now, value) and not (value.is_floating_point() and torch.equal(now.isnan(), value.isnan())
                                                and torch.equal(now.nan_to_num(), value.nan_to_num())):
            return f"the values of '{name}' changed"
    return None


def expect_unchanged(module: Module, before: ModuleState, *, what: str, where: str) -> None:
    """Fail when `module` no longer has the state `before` recorded; `where` names the call that changed it."""
    after = module_state(module)
    change = (_tensor_change(before.tensors, after.tensors)
              or _flag_change(before.requires_grad, after.requires_grad, "requires_grad")
              or _flag_change(before.training, after.training, "the training mode"))
    if change:
        fail(f"{where} changed {what}: {change}. Leave the modules you are given as you found them (values, "
             "buffers, requires_grad, training mode); filling .grad by a backward pass is the only change allowed.")


def _tensor_left(sent: torch.Tensor, left: TensorState) -> str | None:
    if left.value.dtype != sent.dtype or left.value.shape != sent.shape:
        return f"it became {left.value.dtype} {tuple(left.value.shape)}"
    if not (torch.equal(left.value.nan_to_num(), sent.nan_to_num()) and torch.equal(left.value.isnan(), sent.isnan())):
        return "its values changed (an in-place operation on it: -=, /=, a method ending in _ or an indexed assignment)"
    if left.requires_grad != sent.requires_grad:
        return (f"its requires_grad went from {sent.requires_grad} to {left.requires_grad}: work on a copy "
                "(x.detach().requires_grad_() or x.clone())")
    if left.has_grad:
        return "its .grad was filled: take gradients of a copy, or with torch.autograd.grad"
    return None


def call_leaving_inputs(student: Submission, function: str, *args: Any, **kwargs: Any) -> Any:
    """C.call, failing when the function changed a tensor it was given: its values (in place), dtype or shape,
    its requires_grad, its .grad.  The caller's tensors are the caller's: the notebook says inputs are left
    alone, and a change is invisible in the function's own return value."""
    label = describe_call(function, args, kwargs)
    with student_code(f"calling {label}"):
        value, left_args, left_kwargs = student.call_inputs(function, *_handles(args), **_handles(kwargs))
    if changed := _first_change(args, kwargs, left_args, left_kwargs,
                                [f"its argument {i + 1}" for i in range(len(args))], lambda k: f"its argument {k}="):
        name, change = changed
        fail(f"{label} changed {name}, a tensor it was given: {change}. Leave the tensors you are given as they were.")
    return value


def forward_leaving_inputs(module: Module, *args: Any, names: Sequence[str] = (), **kwargs: Any) -> Any:
    """`module(*args, **kwargs)`, failing when its forward changed a tensor it was given (values in place,
    dtype or shape, requires_grad, .grad), as call_leaving_inputs does for a function: one request, the
    forward's value returned.  `names` are the forward's names of the positional arguments, for the message
    ("your forward changed its input x in place")."""
    label = f"{module.label} forward on {describe_call('', args, kwargs)[1:-1] or 'no input'}"
    with student_code(f"running {label}"):
        value, left_args, left_kwargs = module.handle.forward_inputs(*_handles(args), **_handles(kwargs))
    if changed := _first_change(args, kwargs, left_args, left_kwargs,
                                [names[i] if i < len(names) else f"argument {i + 1}" for i in range(len(args))],
                                lambda k: k):
        name, change = changed
        change = ("in place (-=, +=, a method ending in _ or an indexed assignment on it)"
                  if change.startswith("its values") else f"({change})")
        fail(f"Your forward changed its input {name} {change}, running {label}. Leave the tensors your forward is "
             "given as they were and compute new ones from them (x = x - mean, not x -= mean; ~mask, not "
             "mask.logical_not_()).")
    return value


def _first_change(args: Sequence[Any], kwargs: dict[str, Any], left_args: Sequence[TensorState | None],
                  left_kwargs: dict[str, TensorState | None], positional: Sequence[str],
                  keyword: Callable[[str], str]) -> tuple[str, str] | None:
    """(the argument's name, how it changed) of the first tensor argument the call did not leave as it was,
    positional ones first; None when every one is as it was sent."""
    pairs = [(positional[i], sent, left) for i, (sent, left) in enumerate(zip(args, left_args))]
    pairs += [(keyword(k), kwargs[k], left_kwargs.get(k)) for k in kwargs]
    for name, sent, left in pairs:
        if isinstance(sent, torch.Tensor) and isinstance(left, TensorState) and (change := _tensor_left(sent, left)):
            return name, change
    return None
