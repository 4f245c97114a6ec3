"""Part `attention` (25 points): `causal_mask`, `attention_weights` and `scaled_dot_product_attention`.

References are computed live with torch's `F.scaled_dot_product_attention` (bool masks, True = may attend).
The attention weights are read off it by attending to an identity "value" matrix (softmax(.) @ I = softmax(.)).
Causal masks are compared exactly with `torch.ones(S, S, dtype=torch.bool).tril()`.

Tolerances (see autograder.judging.checks.reference_tolerance): reference evaluated in float64 and float32 on the same
inputs; allowed absolute error = 30 x the observed float32 error of the reference (x 2**-29 for float64
outputs) + 16 ulps of the largest output magnitude.  Legitimate variants (einsum, baddbmm, masked_fill with
-inf, -1e9 or finfo.min, torch.where, additive masks, float64 internals) stay far inside; the bugs below are
off by O(0.1 - 1).

Which input amplifies which bug:
  * logits of O(1) (q, k ~ N(0, 1)) with d_k in {4, 5, 8}: a missing 1/sqrt(d_k), or 1/d_k, changes the
    softmax by tens of percent.
  * random bool masks where every row has at least one allowed and one blocked key: an inverted convention
    (True = blocked) gives a finite, recognisably different answer; masking after the softmax leaves rows
    that do not sum to 1.
  * broadcast masks ([S, S] over batch, [B, 1, S, S] over heads, [1, H, 1, S_k] over queries) and 4-D inputs:
    code that assumes 3-D inputs or a full-size mask fails.
  * S_q != S_k and S == d_k: transposed scores / softmax over the wrong dim cannot hide behind matching shapes.
  * logits of O(100) in float32 (q, k ~ N(0, 10^2)): exp without subtracting the row maximum overflows to inf
    and the output becomes NaN.
  * causality in float64: the Jacobian of output t w.r.t. keys/values j > t must be exactly 0 and
    perturbing them must leave output t bit-identical; a strictly-lower mask makes row 0 NaN and drops the
    diagonal (caught by the exact mask check and the "every j <= t matters" check).
  * a key-padding mask [B, 1, 1, S] (different per batch element, padding at the front) combined with the
    causal mask: some queries may attend no key at all.  The contract gives them weights 0 and output 0, as
    torch 2.13's F.scaled_dot_product_attention does (its math kernel's safe softmax), and finite gradients;
    softmax's 0/0 gives NaN, a finite fill (-1e9, finfo.min) gives uniform weights 1/S_k.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.judging import checks as C

F32, F64 = torch.float32, torch.float64


# --- trusted references and known mistakes ------------------------------------------------------------------

def _torch_weights(q, k, mask):
    """softmax(q k^T / sqrt(d_k)) as computed by torch's F.scaled_dot_product_attention."""
    s_k = k.shape[-2]
    eye = torch.eye(s_k, dtype=q.dtype).expand(*k.shape[:-1], s_k)
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)


def _weights_reference(q, k, mask=None):
    return lambda dt: _torch_weights(q.to(dt), k.to(dt), mask)


def _sdpa_reference(q, k, v, mask=None):
    return lambda dt: F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), attn_mask=mask)


def _manual_weights(q, k, mask=None, *, scale=None, dim=-1, invert=False, after=False, transpose=False,
                    fill=float("-inf"), zeroed=False):
    q, k = q.double(), k.double()
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if transpose:
        scores = scores.transpose(-2, -1)
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    p = torch.softmax(scores, dim=dim)
    if mask is not None and (after or zeroed):  # zeroed: blocked weights set to 0 after a (wrong) fill as well
        p = p * mask
    return p


def _weight_mistakes(q, k, mask=None):
    d_k = q.shape[-1]
    out = [
        ("your output matches softmax(q k^T) without scaling: divide the scores by sqrt(d_k), where d_k = "
         "q.shape[-1]", _manual_weights(q, k, mask, scale=1.0)),
        ("your output matches scaling the scores by 1 / d_k: divide by sqrt(d_k) instead",
         _manual_weights(q, k, mask, scale=1.0 / d_k)),
        ("your output matches scaling by sqrt(d_k) instead of dividing by it",
         _manual_weights(q, k, mask, scale=math.sqrt(d_k))),
        ("your output matches a softmax over dimension -2 (over queries): take it over the last dimension "
         "(over keys), so every row sums to 1", _manual_weights(q, k, mask, dim=-2)),
    ]
    if q.shape[-2] == k.shape[-2]:
        out.append(("your output matches the transposed scores k q^T: the weights are softmax(q k^T / sqrt(d_k)) "
                    "with queries along the rows", _manual_weights(q, k, mask, transpose=True)))
    if mask is not None:
        out += [
            ("your output matches the opposite mask convention: True means the query MAY attend to that key "
             "(as in F.scaled_dot_product_attention); fill the scores where the mask is False",
             _manual_weights(q, k, mask, invert=True)),
            ("your output matches applying the mask after the softmax: mask the scores (e.g. fill with -inf) "
             "before the softmax so each row still sums to 1", _manual_weights(q, k, mask, after=True)),
            ("your output matches filling the blocked scores with 0: a score of 0 still gets the weight exp(0); "
             "fill them with -inf before the softmax", _manual_weights(q, k, mask, fill=0.0)),
            ("your output matches filling the blocked scores with 0: a score of 0 still gets the weight exp(0); "
             "fill them with -inf before the softmax", _manual_weights(q, k, mask, fill=0.0, zeroed=True)),
        ]
    return out


def _fully_masked_mistakes(q, k, v, mask):
    """What a fully-masked row comes out as with a finite fill instead of -inf and nothing else done: uniform."""
    return [("your weights are uniform (1/S_k) for a query whose keys are all masked, as a finite fill such as "
             "-1e9 or finfo.min gives: such a query attends to nothing, so its weights (and output) must be 0",
             _manual_weights(q, k, mask, fill=-1e9) @ v.double())]


def _sdpa_mistakes(q, k, v, mask=None):
    out = [(hint, p @ v.double()) for hint, p in _weight_mistakes(q, k, mask)]
    if mask is not None:
        out.append(("your output matches ignoring the mask: pass it on to attention_weights",
                    _manual_weights(q, k) @ v.double()))
    return out


_MASK_DTYPE_ADVICE = ("causal_mask must return a torch.bool tensor, True where query i may attend key j; a float "
                      "0/1 or 0/-inf mask breaks the contract (the tests, and torch's attention functions, pass "
                      "bool masks)")


def _causal_mask(student, seq_len, **kwargs):
    out = C.call(student, "causal_mask", seq_len, **kwargs)
    if isinstance(out, torch.Tensor) and out.dtype != torch.bool:
        C.fail(f"causal_mask({seq_len}): expected dtype torch.bool, got {str(out.dtype).replace('torch.', '')}. "
               f"{_MASK_DTYPE_ADVICE}")
    return out


_OVERFLOW_HINT = ("exp of large scores overflows: subtract the row maximum before exponentiating (softmax is "
                  "unchanged by it), or use torch.softmax")
_FULLY_MASKED_HINT = ("a query whose keys are all masked gives softmax(-inf, ..., -inf) = 0/0 = NaN: such a query "
                      "attends to nothing, so set its weights to 0 (e.g. zero the masked weights after the softmax)")


def _qkv(shape_q, shape_k, d_v, seed, dtype, std=1.0):
    q = C.randn(*shape_q, seed=seed, dtype=dtype, std=std)
    k = C.randn(*shape_k, seed=seed + 1, dtype=dtype, std=std)
    v = C.randn(*shape_k[:-1], d_v, seed=seed + 2, dtype=dtype)
    return q, k, v


def _check_weights(student, q, k, mask, *, what="attention_weights output", note=None, hints=True):
    kwargs = {} if mask is None else {"mask": mask}
    out = C.call(student, "attention_weights", q, k, **kwargs)
    expected, atol = C.reference_tolerance(_weights_reference(q, k, mask), q.dtype)
    inputs = {"q": q, "k": k, "mask": mask}
    if note:
        inputs = C.describe_inputs(inputs) + f" ({note})"
    C.assert_close(out, expected, what=what, inputs=inputs, atol=atol, dtype=q.dtype,
                   mistakes=_weight_mistakes(q, k, mask) if hints else None, nonfinite_hint=_OVERFLOW_HINT)


def _check_sdpa(student, q, k, v, mask, *, what="scaled_dot_product_attention output", note=None, hints=True):
    kwargs = {} if mask is None else {"mask": mask}
    out = C.call(student, "scaled_dot_product_attention", q, k, v, **kwargs)
    expected, atol = C.reference_tolerance(_sdpa_reference(q, k, v, mask), q.dtype)
    inputs = {"q": q, "k": k, "v": v, "mask": mask}
    if note:
        inputs = C.describe_inputs(inputs) + f" ({note})"
    C.assert_close(out, expected, what=what, inputs=inputs, atol=atol, dtype=q.dtype,
                   mistakes=_sdpa_mistakes(q, k, v, mask) if hints else None, nonfinite_hint=_OVERFLOW_HINT)


def _masked_cases():
    """(q shape, k shape, mask) with masks broadcasting over batch, heads and queries."""
    return [
        ((2, 5, 4), (2, 5, 4), C.random_bool_mask(5, 5, seed=10)),
        ((2, 3, 5, 8), (2, 3, 5, 8), C.random_bool_mask(2, 1, 5, 5, seed=11)),
        ((2, 3, 4, 8), (2, 3, 6, 8), C.random_bool_mask(1, 3, 1, 6, seed=12)),
        ((1, 4, 5), (1, 6, 5), C.random_bool_mask(4, 6, seed=13)),
        ((2, 2, 6, 4), (2, 2, 6, 4), C.tril_mask(6)),
    ]


# --- causal_mask --------------------------------------------------------------------------------------------

def test_causal_mask_shape_and_dtype(student):
    """causal_mask(seq_len) returns a torch.bool tensor of shape [seq_len, seq_len] (also with device="cpu")."""
    for seq_len, kwargs in ((1, {}), (5, {}), (8, {"device": "cpu"})):
        out = _causal_mask(student, seq_len, **kwargs)
        C.expect_tensor(out, what=f"causal_mask({seq_len})", shape=(seq_len, seq_len), dtype=torch.bool,
                        inputs={"seq_len": seq_len, **kwargs})


def test_causal_mask_values(student):
    """causal_mask(seq_len)[i, j] is True exactly when query i may attend to key j, i.e. when j <= i (the
    diagonal included)."""
    for seq_len in (5, 2, 7, 1):
        ref = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
        out = _causal_mask(student, seq_len)
        C.expect_equal(out, ref, what=f"causal_mask({seq_len})", inputs={"seq_len": seq_len}, mistakes={
            "your mask excludes the diagonal: a position may attend to itself (j <= i, not j < i)":
                ref.tril(-1),
            "your mask is transposed: row i is the query, column j the key, and True where j <= i":
                ref.T,
            "your mask uses the opposite convention (True where j > i): True must mean 'may attend', "
            "i.e. j <= i": ~ref,
        })


# --- attention_weights --------------------------------------------------------------------------------------

def test_attention_weights_shape_and_dtype(student):
    """attention_weights(q, k) returns [..., S_q, S_k] in the input dtype, for 3-D and 4-D inputs, S_q != S_k,
    a single position, and float32 / float64.
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    cases = [((2, 5, 4), (2, 7, 4), F32), ((2, 3, 5, 8), (2, 3, 5, 8), F32), ((1, 1, 3), (1, 1, 3), F32),
             ((2, 4, 6), (2, 4, 6), F64)]
    for i, (sq, sk, dtype) in enumerate(cases):
        q, k, _ = _qkv(sq, sk, 1, 20 + 3 * i, dtype)
        out = C.call_leaving_inputs(student, "attention_weights", q, k)
        C.expect_tensor(out, what="attention_weights output", inputs={"q": q, "k": k},
                        shape=sq[:-1] + (sk[-2],), dtype=dtype)


def test_attention_weights_match_torch_without_mask(student):
    """attention_weights(q, k) equals softmax(q k^T / sqrt(d_k)) over the keys, as in torch's
    F.scaled_dot_product_attention (3-D and 4-D, S_q != S_k, odd d_k, seq_len == d_k, float32 and float64)."""
    cases = [((2, 5, 4), (2, 5, 4), F32), ((2, 3, 6, 8), (2, 3, 7, 8), F32), ((1, 5, 5), (1, 5, 5), F32),
             ((2, 4, 6), (2, 4, 6), F64)]
    for i, (sq, sk, dtype) in enumerate(cases):
        q, k, _ = _qkv(sq, sk, 1, 40 + 3 * i, dtype)
        _check_weights(student, q, k, None)


def test_attention_weights_with_bool_masks(student):
    """attention_weights(q, k, mask) with bool masks (True = may attend) matches F.scaled_dot_product_attention,
    including masks that broadcast over batch, heads or queries, and a causal mask."""
    for i, (sq, sk, mask) in enumerate(_masked_cases()):
        dtype = F64 if i == 1 else F32
        q, k, _ = _qkv(sq, sk, 1, 60 + 3 * i, dtype)
        _check_weights(student, q, k, mask)


def test_attention_weights_large_scores_float32(student):
    """attention_weights is numerically stable in float32 for large scores (|q k^T / sqrt(d_k)| in the
    hundreds): no overflow to inf or NaN, with and without a mask."""
    q, k, _ = _qkv((2, 6, 8), (2, 6, 8), 1, 80, F32, std=10.0)
    # no mistake hints here: with near one-hot weights, the scaling mistakes are indistinguishable
    _check_weights(student, q, k, None, note="q, k with std 10, scores of order 100", hints=False)
    _check_weights(student, q, k, C.random_bool_mask(2, 6, 6, seed=84), note="q, k with std 10, scores of order 100",
                   hints=False)


# --- scaled_dot_product_attention ---------------------------------------------------------------------------

def test_sdpa_shape_and_dtype(student):
    """scaled_dot_product_attention(q, k, v) returns [..., S_q, d_v] in the input dtype (d_v != d_k, S_q != S_k,
    3-D and 4-D, float32 / float64).
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    cases = [((2, 5, 4), (2, 6, 4), 3, F32), ((2, 3, 5, 8), (2, 3, 5, 8), 8, F32), ((1, 1, 3), (1, 1, 3), 2, F32),
             ((2, 4, 6), (2, 4, 6), 5, F64)]
    for i, (sq, sk, d_v, dtype) in enumerate(cases):
        q, k, v = _qkv(sq, sk, d_v, 100 + 3 * i, dtype)
        out = C.call_leaving_inputs(student, "scaled_dot_product_attention", q, k, v)
        C.expect_tensor(out, what="scaled_dot_product_attention output", inputs={"q": q, "k": k, "v": v},
                        shape=sq[:-1] + (d_v,), dtype=dtype)


def test_sdpa_matches_torch(student):
    """scaled_dot_product_attention(q, k, v, mask) matches torch's F.scaled_dot_product_attention without a
    mask and with bool masks (broadcast over batch / heads / queries, causal), 3-D and 4-D, float32 / float64."""
    cases = [((2, 5, 4), (2, 5, 4), None), ((2, 3, 6, 8), (2, 3, 7, 8), None)] + _masked_cases()
    for i, (sq, sk, mask) in enumerate(cases):
        dtype = F64 if i in (1, 3) else F32
        q, k, v = _qkv(sq, sk, 3 + i % 3, 120 + 3 * i, dtype)
        _check_sdpa(student, q, k, v, mask)


def test_sdpa_large_scores_float32(student):
    """scaled_dot_product_attention is numerically stable in float32 for scores in the hundreds (no inf or
    NaN), with a causal mask."""
    q, k, v = _qkv((2, 6, 8), (2, 6, 8), 4, 150, F32, std=10.0)
    _check_sdpa(student, q, k, v, C.tril_mask(6), note="q, k with std 10, scores of order 100", hints=False)


def test_sdpa_causal_has_no_future_dependence(student):
    """With mask = causal mask, output position t of scaled_dot_product_attention does not depend AT ALL on
    keys/values at positions j > t (gradient exactly 0, output bit-identical when they change), but does depend
    on every value at j <= t; without a mask it does depend on later positions (float64)."""
    q, k, v = _qkv((2, 5, 4), (2, 5, 4), 3, 170, F64)
    mask = C.tril_mask(5)
    what = "scaled_dot_product_attention with a causal mask (float64, q, k [2, 5, 4], v [2, 5, 3])"

    def vjp_fn(cots):
        out, grads = C.vjp(student, "scaled_dot_product_attention", [q, k, v], {"mask": mask}, cots)
        C.expect_tensor(out, what=what, shape=(2, 5, 3), dtype=F64)
        return grads

    C.check_causal_jacobian(vjp_fn, [q, k, v], ["q", "k", "v"], (2, 5, 3), must_matter=["v"], what=what, seed=175)
    C.check_causal_perturbation(lambda xs: C.call(student, "scaled_dot_product_attention", *xs, mask=mask),
                                [q, k, v], what=what, seed=180)
    C.check_depends_on_future(lambda xs: C.call(student, "scaled_dot_product_attention", *xs), [q, k, v],
                              what="scaled_dot_product_attention without a mask (float64)", seed=190)


def test_sdpa_gradients_match_torch(student):
    """Back-propagating through scaled_dot_product_attention (with a random bool mask) gives the same
    gradients for q, k and v as torch's F.scaled_dot_product_attention (float64)."""
    q, k, v = _qkv((2, 2, 5, 4), (2, 2, 6, 4), 3, 200, F64)
    mask = C.random_bool_mask(2, 1, 5, 6, seed=205)
    cots = [C.randn(2, 2, 5, 3, seed=206 + i, dtype=F64) for i in range(2)]
    _, grads = C.vjp(student, "scaled_dot_product_attention", [q, k, v], {"mask": mask}, cots)

    def reference(dt):
        leaves = [t.to(dt).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, attn_mask=mask)
        return torch.cat([torch.cat([g.flatten() for g in torch.autograd.grad((out * c.to(dt)).sum(), leaves,
                                                                              retain_graph=True)])
                          for c in cots])

    expected, atol = C.reference_tolerance(reference, F64)
    if not isinstance(grads, list) or len(grads) != len(cots):
        C.fail("gradients of scaled_dot_product_attention: could not back-propagate through your code")
    flat = []
    for gs in grads:
        for name, g, ref in zip(("q", "k", "v"), gs, (q, k, v)):
            if g is None:
                C.fail(f"gradient of scaled_dot_product_attention with respect to {name}: your output does not "
                       f"depend on {name} (no gradient). Is something detached?")
            C.expect_tensor(g, what=f"gradient of scaled_dot_product_attention with respect to {name}",
                            shape=ref.shape)
            flat.append(g.flatten())
    C.assert_close(torch.cat(flat), expected, what="gradients of scaled_dot_product_attention w.r.t. q, k, v",
                   inputs={"q": q, "k": k, "v": v, "mask": mask}, atol=atol)


def test_fully_masked_rows_attend_to_nothing(student):
    """A query that may attend no key at all gets weights 0 and output 0 (not NaN), as torch 2.13's
    F.scaled_dot_product_attention returns, and back-propagating through it gives finite gradients equal to
    torch's.  The mask is a key-padding mask [B, 1, 1, S] (padding at the front, different per batch element,
    one element all padding) combined with the causal mask [S, S] (float64)."""
    b, h, s, d = 3, 2, 5, 4
    padding = torch.arange(s) < torch.tensor([[0], [2], [s]])  # True = padding: 0, 2 and all 5 positions
    mask = ~padding[:, None, None, :] & C.tril_mask(s)  # rows 0-1 of element 1 and all of element 2 see nothing
    q, k, v = _qkv((b, h, s, d), (b, h, s, d), 3, 220, F64)
    note = "key-padding mask combined with the causal mask; some queries may attend no key"
    inputs = C.describe_inputs({"q": q, "k": k, "mask": mask}) + f" ({note})"
    # the contract, whatever torch's version returns there: the queries that see no key get 0
    nothing = ~mask.any(dim=-1, keepdim=True)
    expected, atol = C.reference_tolerance(lambda dt: _torch_weights(q.to(dt), k.to(dt), mask).masked_fill(
        nothing, 0.0), F64)
    weights = C.call(student, "attention_weights", q, k, mask=mask)
    C.assert_close(weights, expected, what="attention_weights output", inputs=inputs, atol=atol, dtype=F64,
                   mistakes=_fully_masked_mistakes(q, k, torch.eye(s, dtype=F64), mask),
                   nonfinite_hint=_FULLY_MASKED_HINT)
    cot = C.randn(b, h, s, 3, seed=225, dtype=F64)
    out, grads = C.vjp(student, "scaled_dot_product_attention", [q, k, v], {"mask": mask}, [cot])
    expected, atol = C.reference_tolerance(lambda dt: _sdpa_reference(q, k, v, mask)(dt).masked_fill(nothing, 0.0),
                                           F64)
    inputs = C.describe_inputs({"q": q, "k": k, "v": v, "mask": mask}) + f" ({note})"
    C.assert_close(out, expected, what="scaled_dot_product_attention output", inputs=inputs, atol=atol, dtype=F64,
                   mistakes=_fully_masked_mistakes(q, k, v, mask), nonfinite_hint=_FULLY_MASKED_HINT)

    def reference(dt):
        leaves = [t.to(dt).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, attn_mask=mask)
        return torch.cat([g.flatten() for g in torch.autograd.grad((out * cot.to(dt)).sum(), leaves)])

    if not isinstance(grads, list) or len(grads) != 1 or any(g is None for g in grads[0]):
        C.fail("gradients of scaled_dot_product_attention with fully-masked queries: could not back-propagate "
               "to q, k and v through your code")
    for name, g, ref in zip(("q", "k", "v"), grads[0], (q, k, v)):
        C.expect_tensor(g, what=f"gradient of scaled_dot_product_attention with respect to {name}", shape=ref.shape)
    expected, atol = C.reference_tolerance(reference, F64)
    C.assert_close(torch.cat([g.flatten() for g in grads[0]]), expected, atol=atol,
                   what="gradients of scaled_dot_product_attention w.r.t. q, k, v (some queries fully masked)",
                   inputs=inputs, nonfinite_hint="NaN gradients poison every weight they reach in training: "
                   "produce the zero weights of a fully-masked query without a NaN on the way (e.g. keep "
                   "torch.softmax and zero the masked weights afterwards)")
