"""Notices torch's own implementation of a graded operation, by whatever route it is reached.

Two levels report to the recorder while a request runs:
- the torch-function level, watched here with a TorchFunctionMode: every public torch / functional / Tensor
  entry point, including `getattr(F, "layer_norm")`, subclasses of nn.LayerNorm and nn.MultiheadAttention's
  Python path, even after the student reloaded torch.nn.functional;
- the aten dispatch level (every kernel actually dispatched, including `torch.ops.aten.*` and the fused
  kernels nn.TransformerEncoderLayer's fast path uses): autograder.child.forbidden overrides those kernels in the
  dispatcher and tells the recorder of each call (`forbidden.disable(names, recorder.saw)`).  A
  TorchDispatchMode would see the same calls, at the price of a Python call for every aten operation of the
  submission, which made each request about fifteen times slower.
"""
from __future__ import annotations

from typing import Any

from torch.overrides import TorchFunctionMode


class _FunctionLevel(TorchFunctionMode):
    def __init__(self, recorder: "OpRecorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.recorder.saw(getattr(func, "__name__", ""))
        return func(*args, **(kwargs or {}))


class OpRecorder:
    """Context manager; `take()` returns and clears the forbidden names seen."""

    def __init__(self, forbidden: frozenset[str]) -> None:
        self.forbidden = forbidden  # names, or shell patterns (`*batch_norm*`)
        from autograder.child.forbidden import matcher

        self.matches = matcher(forbidden)
        self.verdicts: dict[str, bool] = {}  # name -> forbidden?, worked out once per name
        self.seen: set[str] = set()
        self._mode: _FunctionLevel | None = None

    def saw(self, name: str) -> None:
        verdict = self.verdicts.get(name)
        if verdict is None:
            verdict = self.verdicts[name] = self.matches(name)
        if verdict:
            self.seen.add(name)

    def refused(self, route: str) -> None:
        """Torch's own implementation reached by another route than a forbidden name (autograder.child.provenance)."""
        self.seen.add(route)

    def __enter__(self) -> "OpRecorder":
        self._mode = _FunctionLevel(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(None, None, None)
        self._mode = None

    def take(self) -> set[str]:
        seen, self.seen = self.seen, set()
        return seen
