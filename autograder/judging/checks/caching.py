"""`once`: a reference that does not depend on the submission, computed once per grading process."""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch


def _value_key(value):
    """A hashable stand-in, equal exactly when the values are: a tensor by dtype, shape, strides and bytes;
    a container element by element; anything else by type and value."""
    if isinstance(value, torch.Tensor):
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return ("tensor", value.dtype, tuple(value.shape), value.stride(), value.requires_grad, data)
    if isinstance(value, dict):
        return ("dict", tuple((k, _value_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    return (type(value).__name__, value)


def _copied(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


def once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn computed once per process for each set of argument values, and a copy of the result handed out each
    time, so that no caller can alter what the next one gets.  Only for references: arguments derived from
    fixed seeds, never from a submission's outputs (the cache would grow with every submission).  torch's
    thread count and default dtype are part of the key because they could change the low-order bits."""
    results = {}

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        key = (_value_key(args), _value_key(kwargs), torch.get_num_threads(), torch.get_default_dtype())
        if key not in results:
            results[key] = _copied(fn(*args, **kwargs))
        return _copied(results[key])
    return cached
