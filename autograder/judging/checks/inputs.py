"""Deterministic inputs and random parameters: own generators, independent of the global RNG and of the
student's use of it."""
from __future__ import annotations

import functools
import math
from typing import Any

import torch


def generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, mean: float = 0.0, std: float = 1.0
          ) -> torch.Tensor:
    """Normal samples, drawn in float64 from a fixed seed, then rounded to `dtype`.  The suites ask for the
    same samples for every submission (a thousand draws each): drawn once per process, and each caller gets
    its own copy, so changing it changes no one else's."""
    mean_key, std_key = _exact(mean), _exact(std)
    if mean_key is None or std_key is None or type(seed) is not int or any(type(n) is not int for n in shape):
        return _draw(shape, seed, dtype, mean, std)
    return _drawn(shape, seed, dtype, mean_key, std_key).clone()


def _exact(number: object) -> str | None:
    """A number's exact spelling as a float (0.0 and -0.0 are equal keys, but not the same draw), or None for
    what is not plainly one."""
    if type(number) is float or (type(number) is int and abs(number) <= 2 ** 53):
        return float(number).hex()
    return None


def _draw(shape: tuple, seed: int, dtype: torch.dtype, mean: Any, std: Any) -> torch.Tensor:
    x = torch.randn(*shape, generator=generator(seed), dtype=torch.float64)
    return (x * std + mean).to(dtype)


@functools.lru_cache(maxsize=2048)  # a few hundred distinct draws per suite
def _drawn(shape: tuple[int, ...], seed: int, dtype: torch.dtype, mean: str, std: str) -> torch.Tensor:
    return _draw(shape, seed, dtype, float.fromhex(mean), float.fromhex(std))


def random_bool_mask(*shape: int, seed: int) -> torch.Tensor:
    """A random bool mask in which every row (last dim, length >= 2) has at least one True and one False.

    So no row is fully masked, and neither is any row of the inverted mask: a submission using the opposite
    convention produces finite output, which can be recognised and hinted at."""
    if shape[-1] < 2:
        raise ValueError("rows need at least two entries")
    g = generator(seed)
    mask = torch.rand(*shape, generator=g) < 0.5
    rows = mask.reshape(-1, shape[-1])
    n = rows.shape[0]
    on = torch.randint(0, shape[-1], (n,), generator=g)
    off = (on + torch.randint(1, shape[-1], (n,), generator=g)) % shape[-1]
    idx = torch.arange(n)
    rows[idx, on] = True
    rows[idx, off] = False
    return rows.reshape(shape)


def tril_mask(seq_len: int) -> torch.Tensor:
    """The trusted causal mask (True = may attend)."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool).tril()


def linear_state(prefix: str, out_features: int, in_features: int, *, seed: int, dtype: torch.dtype,
                 bias: bool = True, gain: float = 1.0, bias_std: float = 0.3) -> dict[str, torch.Tensor]:
    """Random nn.Linear parameters: weight ~ N(0, gain^2 / in_features), bias ~ N(0, bias_std^2)."""
    state = {f"{prefix}weight": randn(out_features, in_features, seed=seed, dtype=dtype,
                                      std=gain / math.sqrt(in_features))}
    if bias:
        state[f"{prefix}bias"] = randn(out_features, seed=seed + 1, dtype=dtype, std=bias_std)
    return state


def layer_norm_state(prefix: str, d: int, *, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Random (not ones/zeros) LayerNorm parameters, so that swapped or shared norms show."""
    return {f"{prefix}weight": randn(d, seed=seed, dtype=dtype, mean=1.0, std=0.3),
            f"{prefix}bias": randn(d, seed=seed + 1, dtype=dtype, std=0.3)}


MHA_PROJECTIONS = ("Wq", "Wk", "Wv", "Wo")


def mha_state(prefix: str, d_model: int, *, seed: int, dtype: torch.dtype, bias: bool = True,
              gain: float = 1.5) -> dict[str, torch.Tensor]:
    """Random MultiHeadAttention parameters (Wq, Wk, Wv, Wo).  gain 1.5 gives attention scores of order 1,
    so the softmax is far from uniform and from one-hot: scaling and masking mistakes show."""
    state: dict[str, torch.Tensor] = {}
    for i, name in enumerate(MHA_PROJECTIONS):
        state.update(linear_state(f"{prefix}{name}.", d_model, d_model, seed=seed + 10 * i, dtype=dtype,
                                  bias=bias, gain=gain))
    return state


def cast_floats(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: cast_floats(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cast_floats(v, dtype) for v in value)
    return value
