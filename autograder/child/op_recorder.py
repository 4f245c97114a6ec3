"""Notes which of torch's own implementations of a graded operation a request reached, by whatever route.

Nothing here refuses: the levels that refuse report each refused call to the recorder as it raises.
- the aten dispatch level (every kernel actually dispatched, including `torch.ops.aten.*`, the Python
  bindings `torch.X`, `torch._C._nn.X` and `Tensor.X` of an aten operator X, and the fused kernels that
  nn.MultiheadAttention's and nn.TransformerEncoderLayer's fast paths use): autograder.child.forbidden
  overrides those kernels in the dispatcher and tells `saw(name)`, with the operator's name;
- torch.nn's Python functions and classes of a forbidden name (`F.layer_norm`, `getattr(F, "layer_norm")`,
  subclasses of nn.LayerNorm, nn.MultiheadAttention's Python path): forbidden replaces them, and
  autograder.child.provenance swaps their code, so every reference to them refuses and tells `saw` or
  `refused`, as does every other route provenance refuses (torch's private namespaces, its code compiled
  afresh or reloaded, native code).
A torch-function mode used to watch every torch call of a request as well.  Every name it could see is a Python
binding of an aten operator of that name or one of torch.nn's functions, all refused and reported above
(tests/test_op_recorder.py checks both for every assignment's forbidden names), so it reported nothing the
dispatcher does not, at the price of a Python call for each of the fifty-odd torch calls of a request (over a
quarter of the request loop's CPU time); a TorchDispatchMode, one for each aten operation, would cost about
fifteen times that.
"""
from __future__ import annotations

from typing import Any


class OpRecorder:
    """The forbidden names and refused routes seen; `take()` returns and clears them.  Used as a context
    manager around each request, which marks the request and costs nothing: calls refused outside one (while
    the cells ran) are recorded too, and the request loop takes them before its next request."""

    def __init__(self, forbidden: frozenset[str]) -> None:
        self.forbidden = forbidden  # names, or shell patterns (`*batch_norm*`)
        from autograder.child.forbidden import matcher

        self.matches = matcher(forbidden)
        self.verdicts: dict[str, bool] = {}  # name -> forbidden?, worked out once per name
        self.seen: set[str] = set()

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
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def take(self) -> set[str]:
        seen, self.seen = self.seen, set()
        return seen
