"""Reference solution for the transformer_block assignment.

GENERATED from the solution cells of source/transformer_block/transformer_block.ipynb by
autograder/authoring/notebook_sync.py: edit the notebook, then run `python -m autograder.authoring.notebook_sync write`.
"""


import math

import torch
import torch.nn as nn


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise x over its last dimension (biased variance, eps inside the square root), then * weight + bias."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


class LayerNorm(nn.Module):
    """Layer normalisation with parameters `weight` (ones) and `bias` (zeros) of shape (d_model,).
    forward returns a new tensor and leaves its input x unchanged."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


def batch_normalise(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise every feature of x [batch, features] over the batch (dim 0): biased variance, no affine step."""
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / (var + eps).sqrt()


def batch_dependence(kind: str, batch_size: int = 8, d_model: int = 16, seed: int = 0) -> float:
    """Largest change in example 0's normalised output when every other example of its batch is redrawn.
    kind is "layer" or "batch"; any other kind raises ValueError."""
    normalisers = {"layer": lambda t: layer_norm(t, torch.ones(d_model), torch.zeros(d_model)),
                   "batch": batch_normalise}
    if kind not in normalisers:
        raise ValueError(f"kind must be 'layer' or 'batch', not {kind!r}")
    normalise = normalisers[kind]
    torch.manual_seed(seed)  # the recipe's draws, in its order
    x = torch.randn(batch_size, d_model)
    others = torch.randn(batch_size - 1, d_model)
    y = torch.cat([x[:1], others])  # example 0 is kept, its batch-mates are new
    return (normalise(y)[0] - normalise(x)[0]).abs().max().item()


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool [seq_len, seq_len]: True where query i may attend key j, i.e. j <= i."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def attention_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) over the keys (the last dimension).

    mask: bool, broadcastable to [..., S_q, S_k]; True means query i may attend key j. A query that may
    attend no key at all gets weights 0 (so its output is 0), not NaN.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # a row with every key masked is softmax(-inf, ..., -inf) = 0/0 = NaN: it attends to nothing instead
    return weights if mask is None else weights.masked_fill(~mask, 0.0)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """attention_weights(q, k, mask) @ v."""
    return attention_weights(q, k, mask) @ v


def mask_dependence(seq_len: int, d_model: int, causal: bool, seed: int = 0, eps: float = 1e-3) -> torch.Tensor:
    """Float64 [seq_len, seq_len]: entry [t, j] is the largest |central difference| of output position t with
    respect to one feature of input position j, for self-attention on x = randn(seq_len, d_model)."""
    torch.manual_seed(seed)  # the same x on every call
    x = torch.randn(seq_len, d_model, dtype=torch.float64)
    mask = causal_mask(seq_len) if causal else None

    def attend(inputs: torch.Tensor) -> torch.Tensor:
        return scaled_dot_product_attention(inputs, inputs, inputs, mask)

    table = torch.zeros(seq_len, seq_len, dtype=torch.float64)
    for j in range(seq_len):
        for c in range(d_model):
            nudge = torch.zeros_like(x)
            nudge[j, c] = eps
            slope = (attend(x + nudge) - attend(x - nudge)) / (2 * eps)  # [seq_len, d_model]
            table[:, j] = torch.maximum(table[:, j], slope.abs().amax(dim=-1))
    return table


def largest_dependence(table: torch.Tensor) -> tuple[float, float]:
    """(largest entry with j > t, largest entry with j <= t) of a [seq_len, seq_len] dependence table."""
    future = torch.ones(table.shape, dtype=torch.bool).triu(diagonal=1)
    return table[future].max().item(), table[~future].max().item()


class MultiHeadAttention(nn.Module):
    """Self-attention with num_heads heads: x [B, S, d_model] -> [B, S, d_model].
    forward leaves its inputs x and key_padding_mask unchanged."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, S, d_model] -> [B, num_heads, S, d_head] (optional helper)."""
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_heads, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor, causal: bool = False,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """key_padding_mask: bool [B, S], True where key j of sequence b is padding (nn.MultiheadAttention's
        convention); combined with the causal mask when causal=True."""
        batch, seq_len, d_model = x.shape
        q, k, v = self.split_heads(self.Wq(x)), self.split_heads(self.Wk(x)), self.split_heads(self.Wv(x))
        mask = causal_mask(seq_len, device=x.device) if causal else None
        if key_padding_mask is not None:
            # [B, S], True = padding  ->  [B, 1, 1, S], True = may attend: the same for every head and query
            keys_kept = ~key_padding_mask[:, None, None, :]
            mask = keys_kept if mask is None else mask & keys_kept
        heads = scaled_dot_product_attention(q, k, v, mask)
        return self.Wo(heads.transpose(1, 2).reshape(batch, seq_len, d_model))


def ideal_head_weights(targets: list[int], num_heads: int, seq_len: int) -> torch.Tensor:
    """[num_heads, seq_len], every row a distribution: targets[i] dealt to head i % num_heads
    (round robin), each head uniform over its own targets; a head without a target is uniform over all
    seq_len positions."""
    weights = torch.zeros(num_heads, seq_len)
    for i, target in enumerate(targets):
        weights[i % num_heads, target] = 1.0
    for row in weights:
        if row.sum() == 0:
            row.fill_(1.0)
        row /= row.sum()
    return weights


def guaranteed_share(weights: torch.Tensor, targets: list[int]) -> float:
    """min over targets of max over heads of weights[head, target], as a Python float."""
    return weights[:, targets].max(dim=0).values.min().item()


def permutation_error(module: nn.Module, x: torch.Tensor, perm: torch.Tensor, causal: bool = False) -> float:
    """max |module(x[:, perm]) - module(x)[:, perm]|: 0 up to rounding for a permutation-equivariant module.
    The module is left as it was (values, buffers, requires_grad, training mode)."""
    permuted_first = module(x[:, perm], causal=causal)
    permuted_after = module(x, causal=causal)[:, perm]
    return (permuted_first - permuted_after).abs().max().item()


class TransformerBlock(nn.Module):
    """Attention and feed-forward sub-layers with residuals and LayerNorm, post-norm or pre-norm.
    forward leaves its input x unchanged (the residuals are new tensors, not x += ...)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = False) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, bias=True)
        self.ln1 = LayerNorm(d_model)
        self.ln2 = LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        if self.norm_first:
            x = x + self.attn(self.ln1(x), causal=causal)
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x, causal=causal))
        return self.ln2(x + self.ffn(x))


def block_parameter_count(d_model: int, num_heads: int, d_ff: int) -> int:
    """Parameters of TransformerBlock(d_model, num_heads, d_ff), biases and both LayerNorms included."""
    attention = 4 * (d_model * d_model + d_model)  # Wq, Wk, Wv, Wo; the heads only split their outputs
    ffn = (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)
    norms = 2 * (d_model + d_model)  # ln1 and ln2, a weight and a bias each
    return attention + ffn + norms


def input_grad_norm(n_layers: int, residual: bool, d_model: int = 16, seed: int = 0) -> float:
    """Norm of d sum(h) / dx at the input of n_layers tanh(Linear) sub-layers, with or without residuals."""
    torch.manual_seed(seed)
    layers = [nn.Linear(d_model, d_model) for _ in range(n_layers)]
    x = torch.randn(1, d_model, requires_grad=True)
    h = x
    for layer in layers:
        update = torch.tanh(layer(h))
        h = h + update if residual else update
    h.sum().backward()
    return x.grad.norm().item()


def layer_grad_norms(blocks: list[nn.Module], x: torch.Tensor, target: torch.Tensor) -> list[float]:
    """For each block, the norm of d (output * target).sum() / d (that block's input), in the blocks' order.
    The blocks are left as they were (values, buffers, requires_grad, training mode); only .grad may fill."""
    h = x.detach().requires_grad_()
    inputs = []
    for block in blocks:
        inputs.append(h)
        h = block(h)
    loss = (h * target).sum()
    grads = torch.autograd.grad(loss, inputs)
    return [g.norm().item() for g in grads]
