"""Random weights for this assignment's modules, and their names in torch.nn's counterparts.

Only this assignment's suites build a TransformerBlock or compare with torch.nn.MultiheadAttention, so these
live beside them; the pieces every assignment draws from (`mha_state`, `layer_norm_state`, `linear_state`)
stay in autograder.judging.checks.
"""
from __future__ import annotations

from typing import Mapping

import torch

from autograder.judging import checks as C


def block_state(prefix: str, d_model: int, d_ff: int, *, seed: int, dtype: torch.dtype, attn_gain: float = 1.5
                ) -> dict[str, torch.Tensor]:
    """Random TransformerBlock parameters, LayerNorm weights and biases included (never ones/zeros)."""
    state = C.mha_state(f"{prefix}attn.", d_model, seed=seed, dtype=dtype, gain=attn_gain)
    state.update(C.layer_norm_state(f"{prefix}ln1.", d_model, seed=seed + 50, dtype=dtype))
    state.update(C.layer_norm_state(f"{prefix}ln2.", d_model, seed=seed + 60, dtype=dtype))
    state.update(C.linear_state(f"{prefix}ffn.0.", d_ff, d_model, seed=seed + 70, dtype=dtype))
    state.update(C.linear_state(f"{prefix}ffn.2.", d_model, d_ff, seed=seed + 80, dtype=dtype))
    return state


def block_state_to_torch(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Student TransformerBlock keys -> torch.nn.TransformerEncoderLayer keys."""
    out = mha_state_to_torch(state, "attn.", "self_attn.")
    for src, dst in (("ln1", "norm1"), ("ln2", "norm2"), ("ffn.0", "linear1"), ("ffn.2", "linear2")):
        out[f"{dst}.weight"] = state[f"{src}.weight"]
        out[f"{dst}.bias"] = state[f"{src}.bias"]
    return out


def mha_state_to_torch(state: Mapping[str, torch.Tensor], src: str = "", dst: str = "") -> dict[str, torch.Tensor]:
    """Student MultiHeadAttention keys (`{src}Wq.weight`, ...) -> torch.nn.MultiheadAttention keys
    (`{dst}in_proj_weight` = cat(Wq, Wk, Wv), `{dst}out_proj.weight`, ...)."""
    qkv = C.MHA_PROJECTIONS[:3]
    out = {f"{dst}in_proj_weight": torch.cat([state[f"{src}{n}.weight"] for n in qkv]),
           f"{dst}out_proj.weight": state[f"{src}Wo.weight"]}
    if f"{src}Wq.bias" in state:
        out[f"{dst}in_proj_bias"] = torch.cat([state[f"{src}{n}.bias"] for n in qkv])
        out[f"{dst}out_proj.bias"] = state[f"{src}Wo.bias"]
    return out
