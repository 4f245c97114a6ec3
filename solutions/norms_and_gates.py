"""Reference solution for the norms_and_gates assignment.

GENERATED from the solution cells of source/norms_and_gates/norms_and_gates.ipynb by
autograder/authoring/notebook_sync.py: edit the notebook, then run `python -m autograder.authoring.notebook_sync write`.
"""


import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(mean(x ** 2 over the last dim) + eps) * weight."""
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(mean_square + eps) * weight


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension with a learned gain `weight` (ones at first)."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    """LLaMA's feed-forward layer: down_proj(silu(gate_proj(x)) * up_proj(x)), no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
