"""Part `parameter_count` (3 points): `block_parameter_count(d_model, num_heads, d_ff) -> int`.

The reference is counted live: sum(p.numel()) over the parameters of torch.nn.TransformerEncoderLayer(d_model,
num_heads, d_ff), built here (once per process and setting), whose parameters are those of the assignment's
TransformerBlock (in_proj = Wq, Wk, Wv stacked, out_proj = Wo, linear1/2 = ffn.0/2, norm1/2 = ln1/2).  A count
is exact: it must equal the reference as an integer.

Which input amplifies which bug: d_model != d_ff everywhere (counting the feed-forward layer once, or the
LayerNorms once, changes the count by d_model * d_ff or 2 * d_model), and the article's 512/8/2048 block; the
same sizes with 1 to 64 heads show a count that depends on the heads.  Hints name the count of a known
mistake when the student's count equals it.
"""
from __future__ import annotations

import functools

import torch.nn as nn

from autograder.judging import checks as C

# (d_model, num_heads, d_ff): the article's block, odd sizes, one head, d_model heads
SETTINGS = ((512, 8, 2048), (6, 3, 10), (16, 1, 24), (8, 8, 40))
HEADS = (1, 2, 8, 64)


@functools.lru_cache(maxsize=None)
def _torch_count(d_model, num_heads, d_ff):
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
    return sum(p.numel() for p in layer.parameters())


def _mistakes(d, h, f):
    linear = d * d + d
    return [
        ("your count leaves out the biases: every nn.Linear has out_features biases besides its weights",
         4 * d * d + 2 * d * f + 4 * d),
        ("your count leaves out the two LayerNorms (a weight and a bias of d_model entries each)",
         4 * linear + 2 * d * f + f + d),
        ("your count has one LayerNorm only: ln1 and ln2 are two, each with d_model weights and d_model biases",
         4 * linear + 2 * d * f + f + d + 2 * d),
        ("your count has the feed-forward network's first layer only: it is Linear(d_model, d_ff) and then "
         "Linear(d_ff, d_model)", 4 * linear + d * f + f + 4 * d),
        ("your count gives every head its own d_model x d_model query, key and value projections: the heads "
         "split the projections' outputs, they add no parameters", 3 * h * linear + linear + 2 * d * f + f + d + 4 * d),
    ]


def _count(student, d, h, f):
    label = C.describe_call("block_parameter_count", (d, h, f))
    value = C.call(student, "block_parameter_count", d, h, f)
    if type(value) is bool or not isinstance(value, (int, float)) or value != int(value):
        C.fail(f"{label}: expected a whole number (a Python int), got {C.kind_of(value)}")
    return int(value), label


def test_block_parameter_count_matches_torch(student):
    """block_parameter_count(d_model, num_heads, d_ff) equals the number of parameters of
    torch.nn.TransformerEncoderLayer(d_model, num_heads, d_ff) (biases and both LayerNorms included), for the
    512/8/2048 block and for small, odd settings."""
    for d, h, f in SETTINGS:
        got, label = _count(student, d, h, f)
        expected = _torch_count(d, h, f)
        if got != expected:
            hints = [hint for hint, wrong in _mistakes(d, h, f) if got == wrong and wrong != expected]
            C.fail(f"{label} = {got:,}: this is not the number of parameters of a block with these sizes (off by a "
                   f"relative error of about {abs(got - expected) / expected:.0e}).", hints=hints)


def test_block_parameter_count_does_not_depend_on_heads(student):
    """block_parameter_count(512, num_heads, 2048) is the same for 1, 2, 8 and 64 heads: heads divide the width,
    they do not add parameters."""
    counts = {h: _count(student, 512, h, 2048)[0] for h in HEADS}
    if len(set(counts.values())) > 1:
        C.fail("block_parameter_count(512, num_heads, 2048) changes with num_heads ("
               + ", ".join(f"{h} heads: {c:,}" for h, c in counts.items()) + "): each of Wq, Wk, Wv, Wo maps d_model "
               "features to d_model features whatever the number of heads.",
               hints=["the heads split the projections' outputs, they add no parameters"])


def test_block_parameter_count_returns_python_int(student):
    """block_parameter_count returns a Python int, not a float or a tensor."""
    C.expect_exact_type(C.call(student, "block_parameter_count", 6, 3, 10), int, what="block_parameter_count(6, 3, 10)",
                        advice="Count with integer arithmetic only (no /, no math.sqrt, no tensors).")
