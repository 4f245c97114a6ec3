"""Shape, dtype and type checks."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from autograder.judging.checks.calls import describe_inputs
from autograder.judging.checks.failing import fail
from autograder.judging.checks.kinds import dtype_name, kind_of


def expect_tensor(value: Any, *, what: str, inputs: str | Mapping[str, Any] = "",
                  shape: Sequence[int] | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    where = f" (input: {describe_inputs(inputs)})" if inputs else ""
    if not isinstance(value, torch.Tensor):
        extra = " Did you forget a `return`?" if value is None else ""
        fail(f"{what}: expected a torch.Tensor, got {kind_of(value)}{where}.{extra}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(f"{what}: expected shape {list(shape)}, got {list(value.shape)}{where}")
    if dtype is not None and value.dtype != dtype:
        fail(f"{what}: expected dtype {dtype_name(dtype)} (same as the input), got "
             f"{dtype_name(value.dtype)}{where}")
    return value


def expect_exact_type(value: Any, expected: type, *, what: str, advice: str = "") -> Any:
    if type(value) is not expected:
        fail(f"{what}: expected a Python {expected.__name__}, got {kind_of(value)}." + (f" {advice}" if advice else ""))
    return value


def expect_number(value: Any, *, what: str) -> float:
    """A value check's number: a Python float or int, or a one-element tensor, as a float (whether it is exactly
    a Python float is graded separately, by expect_exact_type); anything else fails."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.reshape(()).item())
    if type(value) in (float, int):
        return float(value)
    fail(f"{what}: expected a Python float, got {kind_of(value)}")
