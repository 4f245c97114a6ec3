"""`once`: a reference that does not depend on the submission, computed once per grading process, and kept
between processes in the grader's cache folder (autograder/judging/cache.py) while a suite session runs."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
from typing import Any, Callable, Iterator

import torch

from autograder.judging import cache


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
    if isinstance(value, (set, frozenset)):  # in an order that is the same in every process (not hash order)
        return (type(value).__name__, tuple(sorted((_value_key(v) for v in value), key=repr)))
    return (type(value).__name__, value)


def _copied(value, keep_grad: bool = False):
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return copy.requires_grad_() if keep_grad and value.requires_grad else copy
    if isinstance(value, dict):
        return {k: _copied(v, keep_grad) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v, keep_grad) for v in value)
    return value


def _storable(value) -> bool:
    """What torch.load(weights_only=True) gives back as it was saved: tensors, plain numbers and strings, and
    lists, tuples and string-keyed dicts of them (not a subclass: a named tuple would come back a tuple)."""
    if type(value) is torch.Tensor:
        return not value.requires_grad and value.layout is torch.strided
    if type(value) in (int, float, bool, str, type(None)):
        return True
    if type(value) in (list, tuple):
        return all(_storable(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _storable(v) for k, v in value.items())
    return False


class StoredReferences:
    """The references of one suite session's suites, read from the cache folder when it opens and written back
    when runs have added to them.  `key` names everything a reference could depend on beyond its arguments:
    the suites and their helpers, the engine, torch's version."""

    def __init__(self, key: str) -> None:
        key = f"{key} torch {torch.__version__}"
        self.entry = f"references-{hashlib.sha256(key.encode()).hexdigest()[:32]}.pt"
        self.values: dict[str, Any] = {}
        self.added = False
        data = cache.read(self.entry)
        if data:
            try:
                loaded = torch.load(io.BytesIO(data), weights_only=True)
            except Exception:  # damaged, or written by another torch: rebuilt as the runs go
                loaded = None
            if type(loaded) is dict:
                self.values = {k: v for k, v in loaded.items() if type(k) is str and _storable(v)}

    def get(self, name: str) -> tuple[bool, Any]:
        return (name in self.values), self.values.get(name)

    def put(self, name: str, value: Any) -> None:
        if _storable(value):
            self.values[name] = value
            self.added = True

    def save(self) -> None:
        if self.added:
            buffer = io.BytesIO()
            torch.save(self.values, buffer)
            cache.write(self.entry, buffer.getvalue())
            self.added = False


_stored: StoredReferences | None = None  # the running suite session's


@contextlib.contextmanager
def stored_in(references: StoredReferences | None) -> Iterator[None]:
    """References computed by `once` inside the block are looked up in, and added to, `references`."""
    global _stored
    previous, _stored = _stored, references
    try:
        yield
    finally:
        _stored = previous


def _stored_name(fn: Callable[..., Any], key: Any) -> str | None:
    text = repr((fn.__module__, fn.__qualname__, key))
    # an argument shown by its address (a function, an object) is not the same value in another process
    return None if " at 0x" in text else hashlib.sha256(text.encode()).hexdigest()


def once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn computed once per process for each set of argument values, and a copy of the result handed out each
    time, so that no caller can alter what the next one gets.  Only for references: arguments derived from
    fixed seeds, never from a submission's outputs (the cache would grow with every submission).  torch's
    thread count and default dtype are part of the key because they could change the low-order bits.  While a
    suite session runs, a result is also looked up in and added to its StoredReferences, so that the next
    grading process reads it instead of computing it again."""
    results = {}

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        key = (_value_key(args), _value_key(kwargs), torch.get_num_threads(), torch.get_default_dtype())
        if key not in results:
            stored, name = _stored, None
            if stored is not None and (name := _stored_name(fn, key)) is not None:
                found, value = stored.get(name)
                if found:
                    results[key] = value
                    return _copied(value)
            # on copies of the arguments: a reference that changed one (x.requires_grad_(), say) would change the
            # key of the next reference called with it, in this process and not in one that read this one
            results[key] = _copied(fn(*_copied(args, keep_grad=True), **_copied(kwargs, keep_grad=True)))
            if name is not None:
                stored.put(name, results[key])
        return _copied(results[key])
    return cached
