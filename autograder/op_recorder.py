"""Notices torch's own implementation of a graded operation, by whatever route it is reached.

Two levels are watched while a request runs: the torch-function level (every public torch / functional /
Tensor entry point, including `getattr(F, "layer_norm")`, subclasses of nn.LayerNorm and
nn.MultiheadAttention's Python path) and the aten dispatch level (every kernel actually dispatched, including
`torch.ops.aten.*` and the fused kernels nn.TransformerEncoderLayer's fast path uses).
"""
from __future__ import annotations

from typing import Any

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class _FunctionLevel(TorchFunctionMode):
    def __init__(self, recorder: "OpRecorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.recorder.saw(getattr(func, "__name__", ""))
        return func(*args, **(kwargs or {}))


class _DispatchLevel(TorchDispatchMode):
    def __init__(self, recorder: "OpRecorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.recorder.saw(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


class OpRecorder:
    """Context manager; `take()` returns and clears the forbidden names seen."""

    def __init__(self, forbidden: frozenset[str]) -> None:
        self.forbidden = forbidden
        self.seen: set[str] = set()
        self._modes: list[Any] = []

    def saw(self, name: str) -> None:
        if name in self.forbidden:
            self.seen.add(name)

    def __enter__(self) -> "OpRecorder":
        self._modes = [_FunctionLevel(self), _DispatchLevel(self)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []

    def take(self) -> set[str]:
        seen, self.seen = self.seen, set()
        return seen
