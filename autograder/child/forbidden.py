"""Makes torch's own implementations of the graded operations unusable in the child, before the student's
first line runs.

For every operation the rubric names:
- each aten kernel of that name, on every dispatch key that has one (CPU, the composite keys, autograd,
  nested tensors, functorch, autocast: asked of the dispatcher, not listed here; only Meta, which computes
  shapes and no values, is left), is
  overridden by one that raises.  This holds in every thread and under every mode, and no Python-level state
  the student can change undoes it: the registration lives in the dispatcher, and the library handle that
  could remove it is kept alive by a reference count no Python object holds (it is not even in the garbage
  collector's lists);
- the Python functions in torch that compute the same thing without those kernels (the reference
  implementations in torch._refs, the decompositions in torch._decomp and its tables, and
  torch.nn.functional.multi_head_attention_forward, which nn.MultiheadAttention uses) are replaced by ones
  that raise.
A call then fails the request it belongs to on its own: the grade does not need the child's word.

What this cannot stop: native code loaded into the process (ctypes, a compiled extension) can rewrite
anything in it, and torch's Python source can be copied or reloaded like any other published code.
"""
from __future__ import annotations

import ctypes
import sys
import warnings
from typing import Any, Callable, Iterable

PYTHON_HOMES = ("torch.nn.functional", "torch._refs", "torch._refs.nn.functional", "torch._decomp.decompositions")


class ForbiddenOperation(RuntimeError):
    """Raised by every disabled implementation."""


def _ignore(_name: str) -> None:
    pass


_notify: Callable[[str], None] = _ignore  # told of every refused call (the child's op recorder)


def refusal(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        _notify(name)
        raise ForbiddenOperation(f"torch's own {name} is off-limits in this assignment: build it from basic "
                                 "operations (the notebook lists what is allowed)")
    refuse.__name__ = f"forbidden_{name}"
    return refuse


def _kernel_keys(operator: str) -> list[str]:
    import torch

    keys = []
    for key in torch._C.DispatchKey.__members__:
        try:
            if key != "Meta" and torch._C._dispatch_has_kernel_for_dispatch_key(operator, key):
                keys.append(key)
        except RuntimeError:  # range markers such as StartOfDenseBackends are not keys
            pass
    return keys


def _disable_kernels(names: Iterable[str]) -> list[str]:
    import torch

    library = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
    disabled = []
    with warnings.catch_warnings():  # "overriding a previously registered kernel" is the point
        warnings.simplefilter("ignore")
        for name in names:
            if not hasattr(torch.ops.aten, name):
                continue  # a Python-only name, such as multi_head_attention_forward
            for key in _kernel_keys(f"aten::{name}"):
                library.impl(name, key, refusal(name), False)
                disabled.append(f"aten::{name}/{key}")
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))  # dropping the last reference would deregister
    return disabled


def _disable_python(names: frozenset[str]) -> list[str]:
    import torch._decomp

    disabled = []
    for home in PYTHON_HOMES:
        module = sys.modules.get(home)
        for name in sorted(names & set(vars(module)) if module else ()):
            if callable(getattr(module, name)):
                setattr(module, name, refusal(name))
                disabled.append(f"{home}.{name}")
    for table in (torch._decomp.decomposition_table, torch._decomp.pre_autograd_decomposition_table):
        for op in list(table):
            if getattr(getattr(op, "_overloadpacket", None), "__name__", None) in names:
                table[op] = refusal(op._overloadpacket.__name__)
                disabled.append(f"decomposition of {op}")
    return disabled


def disable(names: Iterable[str], notify: Callable[[str], None] = _ignore) -> list[str]:
    """Disable every implementation of `names`; `notify(name)` is called on each refused call, so a call
    refused before torch's modes could see it is still reported.  Returns what was disabled."""
    global _notify
    _notify = notify
    names = frozenset(names)
    return _disable_kernels(sorted(names)) + _disable_python(names)
