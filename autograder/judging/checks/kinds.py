"""What a value is, in a student's words: never its values."""
from __future__ import annotations

from typing import Any

import torch

from autograder.model.submission import Opaque


def dtype_name(dtype: torch.dtype) -> str:
    """`float32`, not `torch.float32`: the name a student writes."""
    return str(dtype).replace("torch.", "")


def kind_of(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Opaque):
        return f"an object of type {value.type_name}"
    if isinstance(value, torch.Tensor):
        return f"a torch.Tensor of dtype {dtype_name(value.dtype)} and shape {list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a Python {type(value).__name__}"
