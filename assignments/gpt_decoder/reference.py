"""Trusted code that several of this assignment's suites use word for word: RoPE, which every attention
reference applies, and the random token ids and weights the model suites feed.  Each suite keeps what is its own (its
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


def gpt_state(cfg: tuple[int, int, int, int, int], *, seed: int, dtype: torch.dtype, embedding_std: float = 1.0
              ) -> dict[str, torch.Tensor]:
    """Random parameters of GPT(vocab, d_model, heads, d_ff, n_layers) under the contract's names (no
    head.weight: it is tok_emb.weight)."""
    vocab, d, _, d_ff, n_layers = cfg
    state = {"tok_emb.weight": C.randn(vocab, d, seed=seed, dtype=dtype, std=embedding_std)}
    for i in range(n_layers):
        p, s = f"blocks.{i}.", seed + 100 * (i + 1)
        state.update(C.layer_norm_state(p + "ln1.", d, seed=s, dtype=dtype))
        state.update(C.mha_state(p + "attn.", d, seed=s + 10, dtype=dtype, bias=False, gain=1.5))
        state.update(C.layer_norm_state(p + "ln2.", d, seed=s + 50, dtype=dtype))
        state.update(C.linear_state(p + "ffn.0.", d_ff, d, seed=s + 60, dtype=dtype))
        state.update(C.linear_state(p + "ffn.2.", d, d_ff, seed=s + 70, dtype=dtype))
    state.update(C.layer_norm_state("ln_f.", d, seed=seed + 50, dtype=dtype))
    return state
