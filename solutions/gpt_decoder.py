"""Reference solution for the gpt_decoder assignment.

GENERATED from the solution cells of source/gpt_decoder/gpt_decoder.ipynb by
autograder/authoring/notebook_sync.py: edit the notebook, then run `python -m autograder.authoring.notebook_sync write`.
"""


import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair (x[..., 2i], x[..., 2i+1]) by the angle positions * base ** (-2i / head_dim).

    x: [..., seq, head_dim] with head_dim even; positions: integer tensor [seq].
    """
    head_dim = x.shape[-1]
    exponents = torch.arange(0, head_dim, 2, dtype=x.dtype, device=x.device) / head_dim  # 2i / head_dim
    angles = positions.to(x.dtype)[:, None] * base ** (-exponents)  # [seq, head_dim / 2]
    cos, sin = torch.cos(angles), torch.sin(angles)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)


class KVCache(nn.Module):
    """Preallocated keys and values [batch, heads, max_len, head_dim] (non-persistent buffers)."""

    def __init__(self, batch_size: int, max_len: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        shape = (batch_size, num_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, k: torch.Tensor, v: torch.Tensor, start_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v [batch, heads, t, head_dim] at start_pos; return the cache up to start_pos + t."""
        end = start_pos + k.shape[2]
        self.k_cache[:, :, start_pos:end] = k
        self.v_cache[:, :, start_pos:end] = v
        return self.k_cache[:, :, :end], self.v_cache[:, :, :end]


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE and an optional KV cache; no biases.
    forward leaves its input x unchanged."""

    def __init__(self, d_model: int, num_heads: int, max_len: int) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.max_len = max_len
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model, bias=False)
        self.cache = None

    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        """x [batch, t, d_model] holds the tokens at positions start_pos .. start_pos + t - 1."""
        batch, t, d_model = x.shape
        q, k, v = (W(x).view(batch, t, self.num_heads, self.head_dim).transpose(1, 2)
                   for W in (self.Wq, self.Wk, self.Wv))
        positions = torch.arange(start_pos, start_pos + t, device=x.device)
        q, k = apply_rope(q, positions), apply_rope(k, positions)
        if use_cache:
            if start_pos == 0:
                self.cache = KVCache(batch, self.max_len, self.num_heads, self.head_dim).to(x.device, x.dtype)
            elif self.cache is None:
                raise RuntimeError("use_cache=True with start_pos > 0 needs an earlier call with start_pos=0")
            k, v = self.cache(k, v, start_pos)
        key_positions = torch.arange(start_pos + t - k.shape[2], start_pos + t, device=x.device)
        allowed = key_positions[None, :] <= positions[:, None]  # [t, s]: key j at or before query i
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        heads = torch.softmax(scores, dim=-1) @ v
        return self.Wo(heads.transpose(1, 2).reshape(batch, t, d_model))


class Block(nn.Module):
    """Pre-norm block: x + attn(ln1(x)), then x + ffn(ln2(x))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, max_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache)
        return x + self.ffn(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only language model: tokens [batch, t] -> logits [batch, t, vocab_size].
    forward leaves its input tokens unchanged."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, n_layers: int,
                 max_len: int) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, num_heads, d_ff, max_len) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: one shared Parameter
        nn.init.normal_(self.tok_emb.weight, std=d_model ** -0.5)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        x = self.tok_emb(tokens)
        for block in self.blocks:
            x = block(x, start_pos=start_pos, use_cache=use_cache)
        return self.head(self.ln_f(x))


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy decoding with the KV cache: prompt [batch, p] -> tokens [batch, p + max_new_tokens]."""
    tokens = prompt
    logits = model(prompt, start_pos=0, use_cache=True)
    for _ in range(max_new_tokens):
        next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)  # [batch, 1]
        tokens = torch.cat([tokens, next_token], dim=1)
        logits = model(next_token, start_pos=tokens.shape[1] - 1, use_cache=True)
    return tokens


def toy_batch(batch_size: int, seq_len: int = 24, period: int = 4, vocab_size: int = 16) -> torch.Tensor:
    """[batch_size, seq_len] int64: each row repeats a random pattern of `period` tokens (global RNG)."""
    pattern = torch.randint(0, vocab_size, (batch_size, period))
    return pattern.repeat(1, math.ceil(seq_len / period))[:, :seq_len]


def train_toy_model(seed: int, steps: int = 300) -> list[float]:
    """Train a 1-layer GPT on toy_batch data with Adam; return the loss of every step."""
    torch.manual_seed(seed)
    model = GPT(vocab_size=16, d_model=32, num_heads=2, d_ff=64, n_layers=1, max_len=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        tokens = toy_batch(16)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
