"""Part `multi_head_attention` (25 points): the `MultiHeadAttention` module.

The reference is computed live with `torch.nn.MultiheadAttention(d_model, num_heads, bias=..., batch_first=True)`
loaded with the same weights (in_proj_weight = cat(Wq, Wk, Wv), in_proj_bias likewise, out_proj = Wo).  Causal
mode is compared with attn_mask = ~causal (bool, True = blocked) and, in one case, with is_causal=True plus the
equivalent float mask.  Weights are random (std 1.5 / sqrt(d_model), biases std 0.3), so the attention scores
are of order 1: neither uniform nor one-hot.

Tolerances (see autograder.judging.checks.reference_tolerance): the reference module is evaluated in float64 and
float32 on the same input and weights; allowed absolute error = 30 x the observed float32 error (x 2**-29 for
float64 outputs, after .to(torch.float64)) + 16 ulps of the largest output magnitude.  Fused QKV projections,
einsum, reshape/permute variants or float64 internals stay far inside.

Which input amplifies which bug:
  * num_heads in (2, 3, 4) with seq_len > 1: splitting heads with view(B, H, S, d_head) without a transpose
    mixes positions and features (off by O(1)); num_heads = 1 and num_heads = d_model exercise the extremes.
  * scaling by 1/sqrt(d_model) instead of 1/sqrt(d_head) changes the scores by sqrt(num_heads).
  * odd d_model = 6 with S = 5, S == d_model (6 and 12), batch 1: wrong transposes cannot hide behind matching
    shapes.
  * causal = True in float64: the input Jacobian of output t is exactly 0 at positions j > t and perturbing
    them leaves output t bit-identical; every j <= t must matter.
  * bias=False: there must be no bias parameters and the output must match torch with bias=False.

Structure checks judge what the contract fixes: the parameters (names and shapes) and that torch's weights load
(non-strictly, then every parameter is verified).  Extra buffers, persistent or not (minGPT's registered
`bias` mask, LLMs-from-scratch's `mask`), are accepted everywhere.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

from .states import mha_state_to_torch

F32, F64 = torch.float32, torch.float64



def _expected_shapes(d_model, bias=True):
    shapes = {}
    for name in C.MHA_PROJECTIONS:
        shapes[f"{name}.weight"] = (d_model, d_model)
        if bias:
            shapes[f"{name}.bias"] = (d_model,)
    return shapes


def _torch_mha(state, d_model, num_heads, bias, dtype):
    ref = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True, dtype=dtype)
    ref.load_state_dict(mha_state_to_torch(C.cast_floats(state, dtype)), strict=True)
    return ref


def _reference(x, state, num_heads, *, bias=True, causal=False, float_mask=False):
    d_model, seq = x.shape[-1], x.shape[-2]

    def run(dt):
        ref = _torch_mha(state, d_model, num_heads, bias, dt)
        xs = x.to(dt)
        with torch.no_grad():
            if not causal:
                return ref(xs, xs, xs, need_weights=False)[0]
            if float_mask:
                mask = torch.zeros(seq, seq, dtype=dt).masked_fill(~C.tril_mask(seq), float("-inf"))
                return ref(xs, xs, xs, need_weights=False, attn_mask=mask, is_causal=True)[0]
            return ref(xs, xs, xs, need_weights=False, attn_mask=~C.tril_mask(seq))[0]
    return run


def _manual(x, state, num_heads, *, causal, split="ok", scale_by="head", use_wo=True, values="Wv"):
    """Known-buggy variants of multi-head attention, in float64 on the trusted side."""
    x, st = x.double(), C.cast_floats(state, F64)
    b, s, d = x.shape
    dh = d // num_heads

    def lin(name, t):
        return F.linear(t, st[f"{name}.weight"], st.get(f"{name}.bias"))

    def split_heads(t):
        if split in ("view", "view-transpose-merge"):
            return t.reshape(b, num_heads, s, dh)
        return t.reshape(b, s, num_heads, dh).transpose(1, 2)

    q, k, v = split_heads(lin("Wq", x)), split_heads(lin("Wk", x)), split_heads(lin(values, x))
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh if scale_by == "head" else d)
    if causal:
        scores = scores.masked_fill(~C.tril_mask(s), float("-inf"))
    o = torch.softmax(scores, dim=-1) @ v
    if split in ("view", "no-transpose-merge"):
        o = o.reshape(b, s, d)
    elif split == "feature-major-merge":
        o = o.permute(0, 2, 3, 1).reshape(b, s, d)
    else:
        o = o.transpose(1, 2).reshape(b, s, d)
    return lin("Wo", o) if use_wo else o


@C.once
def _mistakes(x, state, num_heads, causal):
    out = [
        ("your output matches splitting heads with .view(batch, num_heads, seq_len, d_head), which mixes "
         "positions and features: reshape to (batch, seq_len, num_heads, d_head), then .transpose(1, 2)",
         _manual(x, state, num_heads, causal=causal, split="view")),
        ("your output matches splitting heads with .view(batch, num_heads, seq_len, d_head), which mixes "
         "positions and features: reshape to (batch, seq_len, num_heads, d_head), then .transpose(1, 2)",
         _manual(x, state, num_heads, causal=causal, split="view-transpose-merge")),
        ("your output matches merging the heads without transposing back: [batch, heads, seq, d_head] must "
         "become [batch, seq, heads, d_head] (transpose(1, 2)) before reshaping to [batch, seq, d_model]",
         _manual(x, state, num_heads, causal=causal, split="no-transpose-merge")),
        ("your output matches concatenating the heads in the wrong order (feature-major): after "
         "transpose(1, 2), reshape [batch, seq_len, num_heads, d_head] to [batch, seq_len, d_model], so that the "
         "d_head features of head 0 come first, then those of head 1, ...",
         _manual(x, state, num_heads, causal=causal, split="feature-major-merge")),
        ("your output matches values projected with Wk: v must be Wv(x)",
         _manual(x, state, num_heads, causal=causal, values="Wk")),
        ("your output matches scaling the scores by 1/sqrt(d_model): each head must use 1/sqrt(d_head), "
         "d_head = d_model // num_heads", _manual(x, state, num_heads, causal=causal, scale_by="model")),
        ("your output matches attention without the output projection Wo",
         _manual(x, state, num_heads, causal=causal, use_wo=False)),
        ("your output matches attention WITHOUT the causal mask: apply it when causal=True" if causal else
         "your output matches causal attention, but causal=False was asked for",
         _manual(x, state, num_heads, causal=not causal)),
    ]
    return out


def _build(student, d_model, num_heads, state, dtype=F32, **kwargs):
    module = C.new(student, "MultiHeadAttention", d_model, num_heads, **kwargs)
    if dtype != F32:
        module.to(dtype)
    module.load_weights(state)
    return module


@C.once
def _expected(x, state, num_heads, bias, causal, float_mask):
    return C.reference_tolerance(_reference(x, state, num_heads, bias=bias, causal=causal, float_mask=float_mask),
                                 x.dtype)


def _compare(module, x, state, num_heads, *, causal, bias=True, float_mask=False, pass_flag=True):
    out = module(x, causal=causal) if (causal or pass_flag) else module(x)
    expected, atol = _expected(x, state, num_heads, bias, causal, float_mask)
    C.assert_close(out, expected, what=f"{module.label} forward (causal={causal})", atol=atol, dtype=x.dtype,
                   inputs={"x": x, "causal": causal, "weights": "random"},
                   mistakes=_mistakes(x, state, num_heads, causal))


# (d_model, num_heads, batch, seq_len): odd sizes, one head, d_model heads, batch 1, seq_len == d_model
CONFIGS = [(8, 2, 2, 5), (6, 3, 1, 5), (8, 1, 2, 4), (6, 6, 2, 6), (12, 4, 2, 12)]


def test_mha_parameter_names_and_shapes(student):
    """MultiHeadAttention(d_model, num_heads) registers four nn.Linear(d_model, d_model) layers named Wq, Wk,
    Wv, Wo: its parameters (named_parameters, hence its state_dict keys for parameters) are exactly their
    weights and biases.  Buffers, such as a registered causal mask, are not parameters and are fine."""
    module = C.new(student, "MultiHeadAttention", 8, 2)
    C.expect_parameters(module.named_parameters(), _expected_shapes(8), what=f"{module.label}.named_parameters()",
                        advice="Create self.Wq, self.Wk, self.Wv, self.Wo = nn.Linear(d_model, d_model, bias=bias).")


def test_mha_loads_random_state_dict(student):
    """A random state_dict with the Wq/Wk/Wv/Wo weights and biases loads into MultiHeadAttention (extra
    buffers are fine and keep their values); its parameters are then exactly those names, holding the loaded
    values."""
    module = C.new(student, "MultiHeadAttention", 6, 3)
    module.load_weights(C.mha_state("", 6, seed=300, dtype=F32))


def test_mha_bias_false(student):
    """MultiHeadAttention(d_model, num_heads, bias=False) has no bias parameters (only the four weights) and
    matches torch.nn.MultiheadAttention(bias=False) with the same weights."""
    module = C.new(student, "MultiHeadAttention", 8, 2, bias=False)
    params = module.named_parameters()
    what = f"{module.label}.named_parameters()"
    extra = set(params) - set(_expected_shapes(8, bias=False)) if isinstance(params, dict) else set()
    if extra and extra <= {f"{name}.bias" for name in C.MHA_PROJECTIONS}:  # the cause is known: name it
        C.fail(f"{what}: unexpected bias parameters {sorted(extra)} although bias=False was asked for. Pass "
               f"bias=bias to every nn.Linear.")
    C.expect_parameters(params, _expected_shapes(8, bias=False), what=what)
    state = C.mha_state("", 8, seed=320, dtype=F32, bias=False)
    module.load_weights(state)
    for causal in (False, True):
        x = C.randn(2, 5, 8, seed=330 + causal, dtype=F32)
        _compare(module, x, state, 2, causal=causal, bias=False)


def test_mha_indivisible_heads_raise_value_error(student):
    """MultiHeadAttention(d_model, num_heads) raises ValueError (or a subclass) when d_model is not divisible
    by num_heads (e.g. 6 and 4, 10 and 3, 5 and 2)."""
    for d_model, num_heads in ((6, 4), (10, 3), (5, 2)):
        C.expect_raises(ValueError, lambda: student.new("MultiHeadAttention", d_model, num_heads),
                        what=f"MultiHeadAttention({d_model}, {num_heads})")


def test_mha_output_shape_and_dtype(student):
    """The forward of MultiHeadAttention maps x [batch, seq_len, d_model] to the same shape and dtype (float32,
    and float64 after .to(torch.float64)), with and without causal=True."""
    for i, (d, h, b, s) in enumerate(CONFIGS[:3]):
        for dtype in (F32, F64):
            state = C.mha_state("", d, seed=400 + 10 * i, dtype=dtype)
            module = _build(student, d, h, state, dtype)
            x = C.randn(b, s, d, seed=405 + 10 * i, dtype=dtype)
            for causal in (False, True):
                C.expect_tensor(module(x, causal=causal), what=f"{module.label} forward (causal={causal})",
                                inputs={"x": x, "causal": causal}, shape=(b, s, d), dtype=dtype)


def test_mha_matches_torch_multihead_attention(student):
    """MultiHeadAttention (causal=False, the default) matches torch.nn.MultiheadAttention(batch_first=True)
    with the same weights, for several sizes: odd d_model, one head, d_model heads, batch 1, seq_len == d_model."""
    for i, (d, h, b, s) in enumerate(CONFIGS):
        state = C.mha_state("", d, seed=500 + 10 * i, dtype=F32)
        module = _build(student, d, h, state)
        x = C.randn(b, s, d, seed=505 + 10 * i, dtype=F32)
        _compare(module, x, state, h, causal=False, pass_flag=i % 2 == 0)


def test_mha_causal_matches_torch_multihead_attention(student):
    """MultiHeadAttention with causal=True matches torch.nn.MultiheadAttention with the causal mask (query i
    may attend to keys j <= i), for several sizes."""
    for i, (d, h, b, s) in enumerate(CONFIGS):
        state = C.mha_state("", d, seed=600 + 10 * i, dtype=F32)
        module = _build(student, d, h, state)
        x = C.randn(b, s, d, seed=605 + 10 * i, dtype=F32)
        _compare(module, x, state, h, causal=True, float_mask=i % 2 == 1)


def test_mha_float64_matches_torch(student):
    """After .to(torch.float64), MultiHeadAttention computes in float64 and matches torch's float64 result to
    float64 precision (causal and not)."""
    for i, (d, h, b, s) in enumerate([CONFIGS[0], CONFIGS[1]]):
        state = C.mha_state("", d, seed=700 + 10 * i, dtype=F64)
        module = _build(student, d, h, state, F64)
        x = C.randn(b, s, d, seed=705 + 10 * i, dtype=F64)
        for causal in (False, True):
            _compare(module, x, state, h, causal=causal)


def test_mha_causal_has_no_future_dependence(student):
    """With causal=True, output position t does not depend AT ALL on input positions j > t (gradient exactly
    0, output bit-identical when they change) but depends on every j <= t; with causal=False it does depend
    on later positions (float64)."""
    d, h, b, s = 8, 2, 2, 5
    state = C.mha_state("", d, seed=800, dtype=F64)
    module = _build(student, d, h, state, F64)
    x = C.randn(b, s, d, seed=805, dtype=F64)
    what = f"{module.label} forward with causal=True (float64, x [{b}, {s}, {d}])"

    def vjp_fn(cots):
        out, grads = module.vjp([x], {"causal": True}, cots)
        C.expect_tensor(out, what=what, shape=(b, s, d), dtype=F64)
        return grads

    def cause():  # the mask, or this module's own reshaping? asked of the student's attention alone
        own = _from_your_attention(student, x, state, h, True)[0]
        moved = x.clone()
        moved[:, 1:] += 0.1 * C.randn(b, s - 1, d, seed=840, dtype=F64)
        if torch.equal(_from_your_attention(student, moved, state, h, True)[0][:, :1], own[:, :1]):
            return ("Your causal_mask and scaled_dot_product_attention keep the future out when the heads are split "
                    "as (batch, seq_len, num_heads, d_head).transpose(1, 2), so the leak is this module's own: "
                    "splitting or merging the heads with a .view or reshape that mixes positions (without the "
                    "transpose) carries later positions into earlier rows.")
        return "The leak is already in your causal_mask or scaled_dot_product_attention (Part 2): fix it there first."

    C.check_causal_jacobian(vjp_fn, [x], ["x"], (b, s, d), must_matter=["x"], what=what, seed=810, cause=cause)
    C.check_causal_perturbation(lambda xs: module(xs[0], causal=True), [x], what=what, seed=820, cause=cause)
    C.check_depends_on_future(lambda xs: module(xs[0], causal=False), [x],
                              what=f"{module.label} forward with causal=False (float64)", seed=830)


def test_mha_input_gradient_matches_torch(student):
    """Back-propagating through MultiHeadAttention gives the same input gradient as
    torch.nn.MultiheadAttention with the same weights (float64, causal and not)."""
    d, h, b, s = 6, 3, 2, 5
    state = C.mha_state("", d, seed=900, dtype=F64)
    module = _build(student, d, h, state, F64)
    x = C.randn(b, s, d, seed=905, dtype=F64)
    cot = C.randn(b, s, d, seed=906, dtype=F64)
    for causal in (False, True):
        _, grads = module.vjp([x], {"causal": causal}, [cot])
        if not isinstance(grads, list) or len(grads) != 1 or grads[0][0] is None:
            C.fail(f"{module.label}: no gradient with respect to x came back (causal={causal}); is the output "
                   f"detached from the input?")

        def reference(dt, causal=causal):
            ref = _torch_mha(state, d, h, True, dt)
            xs = x.to(dt).requires_grad_()
            mask = ~C.tril_mask(s) if causal else None
            out = ref(xs, xs, xs, need_weights=False, attn_mask=mask)[0]
            return torch.autograd.grad((out * cot.to(dt)).sum(), xs)[0]

        expected, atol = C.reference_tolerance(reference, F64)
        C.assert_close(grads[0][0], expected, what=f"gradient of {module.label} output w.r.t. x (causal={causal})",
                       inputs={"x": x, "causal": causal, "weights": "random"}, atol=atol, dtype=F64)


def _from_your_attention(student, x, state, num_heads, causal):
    """MultiHeadAttention as the trusted side composes it from the student's own causal_mask and
    scaled_dot_product_attention: the projections, the head split and merge and Wo are done here, the
    attention of each head by the student's functions.  Also the same with the heads merged without the
    transpose back, the one wiring mistake the check must be able to tell apart."""
    b, s, d = x.shape
    dh = d // num_heads

    def lin(name, t):
        return F.linear(t, state[f"{name}.weight"], state.get(f"{name}.bias"))

    q, k, v = (lin(n, x).reshape(b, s, num_heads, dh).transpose(1, 2) for n in ("Wq", "Wk", "Wv"))
    mask = C.call(student, "causal_mask", s) if causal else None
    heads = C.expect_tensor(C.call(student, "scaled_dot_product_attention", q, k, v, mask),
                            what="your scaled_dot_product_attention on the heads (float64)", shape=(b, num_heads, s, dh),
                            dtype=F64)
    return lin("Wo", heads.transpose(1, 2).reshape(b, s, d)), lin("Wo", heads.reshape(b, s, d))


def test_mha_is_right_on_your_own_attention(student):
    """MultiHeadAttention's own logic, judged on the student's own attention (no points of its own: when it
    passes and Part 2 lost points, this part's failed checks are carried forward from Part 2).  Its output
    equals the trusted side's projections, head split and merge and Wo around the student's own
    scaled_dot_product_attention and causal_mask (float64, causal and not, several head counts)."""
    for i, (d, h, b, s) in enumerate([CONFIGS[0], CONFIGS[4], CONFIGS[1]]):
        state = C.mha_state("", d, seed=1000 + 10 * i, dtype=F64)
        module = _build(student, d, h, state, F64)
        x = C.randn(b, s, d, seed=1005 + 10 * i, dtype=F64)
        for causal in (False, True):
            expected, merged_without_transpose = _from_your_attention(student, x, state, h, causal)
            atol = C.composition_tolerance(expected)
            if C.is_close(merged_without_transpose, expected, atol=100 * atol):
                C.fail(f"{module.label}: your scaled_dot_product_attention's output is too uniform across "
                       "positions to judge how the heads are split and merged; fix Part 2 first")
            C.assert_close(module(x, causal=causal), expected, atol=atol, dtype=F64,
                           what=f"{module.label} forward (causal={causal}) against the same computation around "
                                "your own scaled_dot_product_attention",
                           inputs={"x": x, "causal": causal, "weights": "random"},
                           mistakes=[("your output matches merging the heads without transposing back: "
                                      "[batch, heads, seq, d_head] must become [batch, seq, heads, d_head] "
                                      "(transpose(1, 2)) before reshaping", merged_without_transpose)])
