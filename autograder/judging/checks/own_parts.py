"""Own-parts checks: a part built on others, judged on the student's own pieces wherever those run.

An own-parts check composes, on the trusted side, what the student's whole (a module, a function) must give
from the student's own earlier pieces, and compares the whole with it, configuration by configuration
(sizes, flags).  A configuration where composing fails (a piece raises, or returns what cannot be composed) is
the earlier part's failure, not this part's: it is skipped, provided the whole fails there too, as it must
when it runs that piece.  A whole that runs where its own piece failed is not built on it as composed here,
and fails the check.  A configuration whose pieces are too degenerate to tell the whole's right wiring from a
known wrong one (`discriminating=False`) is still compared but does not count as judged.  The check fails
with "cannot be judged on your own parts: ..." only when no configuration was judged.

    own = C.OwnParts(module.label)
    for ...:
        expected = own.compose(label, lambda: ...)          # None: a piece failed; the reason is kept
        if expected is None:
            own.expect_fails_too(label, lambda: module(x))  # the whole fails where its piece does
            continue
        C.assert_close(module(x), expected, ...)
        own.judged(label, discriminating=..., degenerate="why the pieces cannot tell wirings apart")
    own.finish()
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

import pytest
import torch

from autograder.judging.checks.failing import fail
from autograder.judging.checks.inputs import generator

T = TypeVar("T")

_MAX_REASONS = 3  # a message names a few configurations, not all of them


class OwnParts:
    """The configurations of one own-parts check: which were judged, and why the others could not be."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0  # configurations compared with a discriminating composition
        self.reasons: list[str] = []  # why each other configuration could not be judged
        self.piece_failed: dict[str, str] = {}  # configuration -> how its pieces failed

    def compose(self, label: str, build: Callable[[], T]) -> T | None:
        """`build()`: the expected value from the student's pieces; None when a piece fails (it raised, or gave
        what the composition cannot take), with the piece's failure kept as the reason."""
        try:
            return build()
        except pytest.fail.Exception as failure:
            self.piece_failed[label] = failure.msg
            self.reasons.append(f"{label}: {failure.msg}")
            return None

    def expect_fails_too(self, label: str, run: Callable[[], Any]) -> None:
        """Where a piece failed, the whole that runs it must fail too (raise, or give what a check refuses)."""
        try:
            run()
        except pytest.fail.Exception:
            return
        fail(f"{self.what}: cannot be judged on your own parts ({label}): it ran where your own piece failed "
             f"({self.piece_failed.get(label, 'composing it failed')}), so it does not use that piece as the task "
             "composes it")

    def judged(self, label: str, *, discriminating: bool = True, degenerate: str = "") -> None:
        """The whole matched the composition at `label`; `discriminating`: the composition tells the right
        wiring from the known wrong one there (else `degenerate` says why not)."""
        if discriminating:
            self.count += 1
        else:
            self.reasons.append(f"{label}: {degenerate}")

    def finish(self) -> None:
        if self.count:
            return
        shown = self.reasons[:_MAX_REASONS] + ([f"... ({len(self.reasons) - _MAX_REASONS} more)"]
                                                if len(self.reasons) > _MAX_REASONS else [])
        fail(f"{self.what}: cannot be judged on your own parts, on no configuration: " + "; ".join(shown)
             + ". Fix the earlier parts first")


def fill_parameters(params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], *, seed: int
                    ) -> dict[str, torch.Tensor]:
    """Values for a module's own parameters (`params`, its named_parameters()): the test's `state` where a name
    and shape match it, and seeded random values of the test's scale under every other name (1-D: N(1, 0.3^2),
    as the test's LayerNorm weights; else N(0, 1 / fan_in)).  Loaded non-strictly, they let a module whose
    parameters are named otherwise than the contract says run on distinct, non-degenerate weights, while
    unregistered tensors keep their own."""
    out = {}
    for index, (name, param) in enumerate(sorted(params.items())):
        given = state.get(name)
        if isinstance(given, torch.Tensor) and tuple(given.shape) == tuple(param.shape):
            out[name] = given.to(param.dtype)
            continue
        noise = torch.randn(tuple(param.shape), generator=generator(seed + 7919 * (index + 1)), dtype=torch.float64)
        value = 1 + 0.3 * noise if param.dim() <= 1 else noise / max(param.shape[-1], 1) ** 0.5
        out[name] = value.to(param.dtype)
    return out
