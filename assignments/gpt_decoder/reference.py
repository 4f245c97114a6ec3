"""Trusted code that several of this assignment's suites use word for word: RoPE, which every attention
reference applies, and the random token ids the model suites feed.  Each suite keeps what is its own (its
attention or model reference, and the known-buggy variants it names in hints)."""
from __future__ import annotations

import torch

from autograder.judging import checks as C


def rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Trusted RoPE by complex multiplication, computed in x's dtype."""
    d = x.shape[-1]
    real = x.dtype
    angles = positions.to(real)[:, None] * base ** (-torch.arange(0, d, 2, dtype=real) / d)
    rotation = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotation).reshape(x.shape)


def random_tokens(batch: int, seq: int, vocab: int, *, seed: int) -> torch.Tensor:
    """Token ids [batch, seq], uniform over the vocabulary, from a fixed seed."""
    return torch.randint(0, vocab, (batch, seq), generator=C.generator(seed))
