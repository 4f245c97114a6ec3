"""A module's structure: the parameters the contract fixes."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from autograder.judging.checks.failing import fail
from autograder.judging.checks.kinds import kind_of


def expect_parameters(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]], *, what: str,
                      advice: str = "") -> None:
    """`params` (a module's named_parameters()) must have exactly the expected names and shapes.

    Parameters are what the contract fixes (their names are the state_dict keys that torch's weights are
    loaded under); buffers are not parameters, so a registered causal mask never fails this check.  The
    failure names the missing and unexpected parameters; `advice` (how to create the expected ones) is added
    only when some are missing, since an extra parameter alone is not explained by it."""
    if not isinstance(params, Mapping):
        fail(f"{what}: expected a dict of tensors, got {kind_of(params)}")
    missing = sorted(set(expected) - set(params))
    unexpected = sorted(set(params) - set(expected))
    if missing or unexpected:
        found = ([f"missing {missing}"] if missing else []) + ([f"unexpected {unexpected}"] if unexpected else [])
        empty = (" Nothing is registered: tensors that are not nn.Parameter, and modules kept in a plain Python "
                 "list or dict, are invisible to nn.Module; use nn.Parameter, nn.ModuleList or one attribute per "
                 "module." if not params else "")
        fail(f"{what}: wrong parameters: {'; '.join(found)}. Expected exactly the parameters {sorted(expected)} "
             f"(buffers are fine)." + (f" {advice}" if advice and missing else "") + empty)
    for name, shape in expected.items():
        value = params[name]
        if not isinstance(value, torch.Tensor):
            fail(f"{what}: parameter '{name}' is {kind_of(value)}, expected a tensor")
        if tuple(value.shape) != tuple(shape):
            fail(f"{what}: parameter '{name}' has shape {list(value.shape)}, expected {list(shape)}")
