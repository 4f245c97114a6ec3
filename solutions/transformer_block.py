"""Reference solution for the transformer_block assignment."""
import math

import torch
import torch.nn as nn


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def attention_weights(q, k, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None):
    return attention_weights(q, k, mask) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x):
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_heads, self.d_head).transpose(1, 2)

    def forward(self, x, causal=False):
        batch, seq_len, d_model = x.shape
        q, k, v = self.split_heads(self.Wq(x)), self.split_heads(self.Wk(x)), self.split_heads(self.Wv(x))
        mask = causal_mask(seq_len, device=x.device) if causal else None
        heads = scaled_dot_product_attention(q, k, v, mask)
        return self.Wo(heads.transpose(1, 2).reshape(batch, seq_len, d_model))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, bias=True)
        self.ln1 = LayerNorm(d_model)
        self.ln2 = LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, causal=False):
        if self.norm_first:
            x = x + self.attn(self.ln1(x), causal=causal)
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x, causal=causal))
        return self.ln2(x + self.ffn(x))


def input_grad_norm(n_layers, residual, d_model=16, seed=0):
    torch.manual_seed(seed)
    layers = [nn.Linear(d_model, d_model) for _ in range(n_layers)]
    x = torch.randn(1, d_model, requires_grad=True)
    h = x
    for layer in layers:
        update = torch.tanh(layer(h))
        h = h + update if residual else update
    h.sum().backward()
    return x.grad.norm().item()
