"""Makes torch's own implementations of the graded operations unusable in the child, before the student's
first line runs.

For every operation the rubric names (a name or a shell pattern such as `*batch_norm*`):
- each aten kernel of a matching name, every overload, on every dispatch key that has one (CPU, the composite keys, autograd,
  nested tensors, functorch, autocast: asked of the dispatcher, not listed here; only Meta, which computes
  shapes and no values, is left), is
  overridden by one that raises.  This holds in every thread and under every mode, and no Python-level state
  the student can change undoes it: the registration lives in the dispatcher, and the library handle that
  could remove it is kept alive by a reference count no Python object holds (it is not even in the garbage
  collector's lists);
- the Python functions and classes of torch.nn with a matching name have their code swapped for code that
  refuses (autograder.child.provenance, which also refuses torch's private namespaces whole), and the
  decomposition tables' entries are replaced.
A call then fails the request it belongs to on its own: the grade does not need the child's word.
"""
from __future__ import annotations

import ctypes
import dataclasses
import fnmatch
import functools
import os
import re
import sys
import types
import warnings
from typing import Any, Callable, Iterable

PYTHON_HOMES = ("torch.nn.functional", "torch._refs", "torch._refs.nn.functional", "torch._decomp.decompositions")


class ForbiddenOperation(RuntimeError):
    """Raised by every disabled implementation."""


def _ignore(_name: str) -> None:
    pass


_notify: Callable[[str], None] = _ignore  # told of every refused call (the child's op recorder)
_notify_route: Callable[[str], None] = _ignore  # told of every route autograder.child.provenance refused


def refusal(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        _notify(name)
        raise ForbiddenOperation(f"torch's own {name} is off-limits in this assignment: build it from basic "
                                 "operations (the notebook lists what is allowed)")
    refuse.__name__ = f"forbidden_{name}"
    return refuse


def refuse_route(route: str) -> None:
    """What autograder.child.provenance calls on reaching torch's own implementation (or native code) by any
    route other than a forbidden operation's name."""
    _notify_route(route)
    raise ForbiddenOperation(f"{route} is off-limits in this assignment: it is torch's own implementation (or "
                             "native code), not yours; build it from basic operations (the notebook lists what "
                             "is allowed)")


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


def matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """Whether a name matches one of `patterns` (names, or shell patterns such as `*batch_norm*`)."""
    expression = re.compile("|".join(fnmatch.translate(p) for p in patterns) or "(?!)")
    return lambda name: expression.match(name) is not None


def aten_operators(patterns: Iterable[str]) -> dict[str, list[str]]:
    """Every aten operator whose name matches one of `patterns`, asked of the dispatcher: {operator: its
    overloads, "" for the default one}."""
    import torch

    matches = matcher(patterns)
    operators: dict[str, list[str]] = {}
    for full in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = full.partition("::")
        name, _, overload = rest.partition(".")
        if namespace == "aten" and matches(name):
            operators.setdefault(name, []).append(overload)
    return operators


@functools.lru_cache(maxsize=8)
def kernel_plan(names: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
    """(operator, overload-qualified name, dispatch key) of every kernel to override for `names`.  Asking the
    dispatcher takes a third of a second, the same for every child of an assignment: the zygote works it
    out before it forks them (autograder.child.zygote), and they inherit the answer."""
    plan = []
    for name, overloads in sorted(aten_operators(names).items()):
        for overload in overloads:  # every overload: `.no_stats` computes what the default one does
            qualified = f"{name}.{overload}" if overload else name
            plan += [(name, qualified, key) for key in _kernel_keys(f"aten::{qualified}")]
    return tuple(plan)


def _disable_kernels(names: Iterable[str]) -> list[str]:
    import torch

    library = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
    disabled = []
    with warnings.catch_warnings():  # "overriding a previously registered kernel" is the point
        warnings.simplefilter("ignore")
        for name, qualified, key in kernel_plan(tuple(sorted(names))):
            library.impl(qualified, key, refusal(name), False)
            disabled.append(f"aten::{qualified}/{key}")
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))  # dropping the last reference would deregister
    return disabled


@dataclasses.dataclass(frozen=True)
class PythonPlan:
    """What `disable` replaces at the Python level for one set of patterns, found by matching every name of
    PYTHON_HOMES, every decomposition table entry and provenance's index of torch's functions against them
    (thousands of matches).  The answer depends only on the patterns and on what the process has imported,
    the same for every child of an assignment: the zygote works it out before it forks them
    (autograder.child.zygote), and each child only applies it."""
    attributes: tuple[tuple[str, str], ...]  # (home module, name): callables to replace by a refusal
    decompositions: tuple[tuple[dict, Any], ...]  # (table, operator): entries to replace by a refusal
    graded: tuple[tuple[types.FunctionType, str], ...]  # torch.nn's functions provenance swaps, with routes
    state: tuple[int, ...]  # what the process held when the plan was worked out (_imported_state)
    worked_out_in: int  # the process that did the matching (a child applying an inherited plan did none)


_PYTHON_PLANS: dict[tuple[str, ...], PythonPlan] = {}


def _imported_state() -> tuple[int, ...]:
    """Changes whenever something a plan was worked out from can have grown: a module imported, a
    decomposition registered, provenance's index scanned again (a rubric's preload in the zygote)."""
    import torch._decomp
    from autograder.child import provenance

    return (len(sys.modules), len(torch._decomp.decomposition_table),
            len(torch._decomp.pre_autograd_decomposition_table), provenance.index_scans())


def python_plan(names: Iterable[str]) -> PythonPlan:
    """The plan for `names`, worked out again only when the process imported something since."""
    import torch._decomp
    from autograder.child import provenance

    key, state = tuple(sorted(set(names))), _imported_state()
    known = _PYTHON_PLANS.get(key)
    if known is not None and known.state == state:
        return known
    forbidden = matcher(key)
    attributes = []
    for home in PYTHON_HOMES:
        module = sys.modules.get(home)
        for name in sorted(n for n in vars(module) if forbidden(n)) if module else ():
            if callable(getattr(module, name)):
                attributes.append((home, name))
    decompositions = [(table, op)
                      for table in (torch._decomp.decomposition_table, torch._decomp.pre_autograd_decomposition_table)
                      for op in list(table)
                      if forbidden(getattr(getattr(op, "_overloadpacket", None), "__name__", ""))]
    graded = provenance.graded_functions(key, "torch.nn")
    plan = _PYTHON_PLANS[key] = PythonPlan(tuple(attributes), tuple(decompositions), graded, state, os.getpid())
    return plan


def _disable_python(plan: PythonPlan) -> list[str]:
    disabled = []
    for home, name in plan.attributes:
        setattr(sys.modules[home], name, refusal(name))
        disabled.append(f"{home}.{name}")
    for table, op in plan.decompositions:
        table[op] = refusal(op._overloadpacket.__name__)
        disabled.append(f"decomposition of {op}")
    return disabled


def disable(names: Iterable[str], notify: Callable[[str], None] = _ignore,
            notify_route: Callable[[str], None] = _ignore) -> list[str]:
    """Disable every implementation of `names`; `notify(name)` is called on each refused call, so a call
    refused before torch's modes could see it is still reported, and `notify_route(route)` on each call
    autograder.child.provenance refuses.  Returns what was disabled."""
    global _notify, _notify_route
    _notify, _notify_route = notify, notify_route
    names = frozenset(names)
    from autograder.child import provenance

    plan = python_plan(names)  # before anything is replaced: inherited from the zygote, or worked out here
    graded = provenance.neutralise_graded(plan.graded, refuse_route)
    return _disable_kernels(sorted(names)) + _disable_python(plan) + graded
