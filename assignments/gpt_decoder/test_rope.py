"""Part `rope` (20 points): `apply_rope(x, positions, base=10000.0)`.

The reference is computed live in the test, another way than the notebook suggests: each interleaved pair
(x[..., 2i], x[..., 2i+1]) is read as the complex number x[2i] + i x[2i+1] (torch.view_as_complex) and
multiplied by exp(i * position * base**(-2i / head_dim)) (torch.polar), everything in the input's dtype.

Tolerances (see autograder.judging.checks.reference_tolerance): the reference is evaluated in float64 and in
float32 on the same values; the allowed absolute error is 30 x the observed float32 error (x 2**-29 for float64
outputs) + 16 ulps of the largest output magnitude.  Honest implementations (cos/sin and slices, complex
numbers, a 2x2 rotation matrix with einsum, angles in float64 cast back) stay far inside; every bug below is
off by O(1).  The relative-position and norm checks are exact identities of the student's own outputs, held to
a float64 tolerance of 1e-10 of the compared magnitude.

Which input amplifies which bug:
  * head_dim 8 and 16 with positions up to 31: pairing feature i with i + head_dim/2 (GPT-NeoX's
    rotate_half), an exponent i/d instead of 2i/d, growing frequencies, a rotation in the other direction or
    the rotated halves concatenated instead of interleaved are all off by O(1) (head_dim 2 alone would hide
    the pairing bugs: it has one pair only);
  * positions 5..12 and positions with gaps ([0, 3, 4, 9, 20], [31, 2, 17, 8]): code that uses
    arange(seq) instead of the positions argument;
  * base 100 and 500000: a hard-coded 10000;
  * float64 inputs: angles computed in float32 are off by ~1e-7, a million times the float64 tolerance (the
    failure then says so);
  * 2-D, 3-D and 4-D inputs: code that assumes one layout.
"""
from __future__ import annotations

import torch

from autograder.judging import checks as C

from . import reference

F32, F64 = torch.float32, torch.float64


# --- trusted reference and known mistakes -------------------------------------------------------------------

def _reference(x, positions, base):
    return lambda dt: reference.rope(x.to(dt), positions, base)


def _variant(x, positions, base, *, pairs="interleaved", exponent="2i/d", direction=1.0, use_positions=True,
             output="interleaved", second="b cos + a sin", use_base=True):
    """Known-buggy RoPE in float64 (sizes and positions as given)."""
    x = x.double()
    d = x.shape[-1]
    half = d // 2
    i = torch.arange(half, dtype=F64)
    e = {"2i/d": 2 * i / d, "i/d": i / d, "growing": -2 * i / d}[exponent]
    pos = positions if use_positions else torch.arange(x.shape[-2])
    angles = direction * pos.to(F64)[:, None] * (base if use_base else 10000.0) ** (-e)
    cos, sin = angles.cos(), angles.sin()
    a, b = (x[..., 0::2], x[..., 1::2]) if pairs == "interleaved" else (x[..., :half], x[..., half:])
    ra = a * cos - b * sin
    rb = a * sin + b * cos if second == "b cos + a sin" else a * sin - b * cos
    if pairs == "interleaved" and output == "interleaved":
        return torch.stack((ra, rb), dim=-1).flatten(-2)
    return torch.cat((ra, rb), dim=-1)


@C.once
def _mistakes(x, positions, base):
    out = [
        ("your output matches pairing feature i with feature i + head_dim/2 (the GPT-NeoX 'rotate_half' "
         "layout): this assignment rotates the interleaved pairs (x[..., 2i], x[..., 2i+1])",
         _variant(x, positions, base, pairs="half")),
        ("your output matches rotating the interleaved pairs but returning them concatenated, [all x'_2i, all "
         "x'_2i+1], instead of interleaved back in place: use torch.stack((a, b), dim=-1).flatten(-2)",
         _variant(x, positions, base, output="concat")),
        ("your output matches the frequencies base**(-i/head_dim): the exponent is 2i/head_dim for pair i "
         "(torch.arange(0, head_dim, 2) / head_dim)", _variant(x, positions, base, exponent="i/d")),
        ("your output matches frequencies base**(+2i/head_dim), which grow with i: the angle of pair i is "
         "position * base**(-2i/head_dim)", _variant(x, positions, base, exponent="growing")),
        ("your output matches a rotation in the other direction (by minus the angle): x'_2i = x_2i cos - "
         "x_2i+1 sin, x'_2i+1 = x_2i sin + x_2i+1 cos", _variant(x, positions, base, direction=-1.0)),
        ("your output matches x'_2i+1 = x_2i sin - x_2i+1 cos, which is not a rotation: the second component "
         "is x_2i sin + x_2i+1 cos", _variant(x, positions, base, second="a sin - b cos")),
    ]
    if not torch.equal(positions, torch.arange(x.shape[-2])):
        out.append(("your output matches the positions 0, 1, ..., seq-1: rotate row j by positions[j], the "
                    "positions argument", _variant(x, positions, base, use_positions=False)))
    if base != 10000.0:
        out.append((f"your output matches base 10000 although base={base:g} was passed: use the base argument",
                    _variant(x, positions, base, use_base=False)))
    return out


@C.once
def _expected(x, positions, base):
    return C.reference_tolerance(_reference(x, positions, base), x.dtype)


@C.once
def _float32_level(x, positions, base):
    """The allowed error for a float32 output on the same values (a float64 output within it, but not within
    the float64 tolerance, was computed at float32 precision somewhere)."""
    return C.reference_tolerance(_reference(x, positions, base), F32)[1]


def _check(student, x, positions, base=None, *, what="apply_rope output", note=""):
    kwargs = {} if base is None else {"base": base}
    out = C.call(student, "apply_rope", x, positions, **kwargs)
    base = 10000.0 if base is None else base
    expected, atol = _expected(x, positions, base)
    inputs = {"x": x, "positions": f"{positions.tolist()}", **({"base": kwargs["base"]} if kwargs else {})}
    if note:
        inputs = C.describe_inputs(inputs) + f" ({note})"
    hints = []
    if x.dtype == F64 and C.is_close(out, expected, atol=_float32_level(x, positions, base)):
        hints.append("your float64 output is only as accurate as float32 arithmetic: compute the angles, cos and "
                     "sin in x's dtype (positions.to(x.dtype), torch.arange(..., dtype=x.dtype)), not in float32")
    C.assert_close(out, expected, what=what, inputs=inputs, atol=atol, dtype=x.dtype,
                   mistakes=_mistakes(x, positions, base), hints=hints)


# --- checks -------------------------------------------------------------------------------------------------

def test_rope_output_shape_and_dtype(student):
    """apply_rope returns a tensor of x's shape and dtype: 2-D [seq, head_dim], 3-D, 4-D [batch, heads, seq,
    head_dim], a single position, float32 and float64.
    The tensors it is given are left as they were (C.call_leaving_inputs): no rotation written into x."""
    cases = [((5, 8), F32), ((2, 5, 8), F32), ((2, 3, 5, 8), F32), ((1, 1, 1, 2), F32), ((2, 4, 6), F64)]
    for i, (shape, dtype) in enumerate(cases):
        x = C.randn(*shape, seed=100 + i, dtype=dtype)
        positions = torch.arange(shape[-2])
        out = C.call_leaving_inputs(student, "apply_rope", x, positions)
        C.expect_tensor(out, what="apply_rope output", inputs={"x": x, "positions": f"{positions.tolist()}"},
                        shape=shape, dtype=dtype)


def test_rope_matches_reference(student):
    """apply_rope(x, arange(seq)) rotates each interleaved pair (x[2i], x[2i+1]) by position * base**(-2i/d),
    as the complex product (x[2i] + i x[2i+1]) * exp(i * angle) does (float32; 2-D, 3-D and 4-D inputs,
    head_dim 2 to 16, up to 16 positions)."""
    cases = [(6, 8), (2, 6, 8), (2, 3, 7, 16), (3, 2, 16, 4), (2, 5, 2)]
    for i, shape in enumerate(cases):
        x = C.randn(*shape, seed=200 + i, dtype=F32)
        _check(student, x, torch.arange(shape[-2]))


def test_rope_float64_matches_reference(student):
    """For float64 inputs, apply_rope computes in float64 and matches the reference to float64 precision
    (4-D input, positions from 0 and from 9)."""
    for i, (shape, start) in enumerate((((2, 3, 7, 8), 0), ((2, 10, 16), 9))):
        x = C.randn(*shape, seed=300 + i, dtype=F64)
        _check(student, x, torch.arange(start, start + shape[-2]), what="apply_rope output (float64)")


def test_rope_uses_the_positions_argument(student):
    """Row j of x is rotated by the angle of positions[j], whatever the positions: offset (5..12), with gaps
    ([0, 3, 4, 9, 20]) or in any order ([31, 2, 17, 8]); float32 and float64."""
    cases = [((2, 2, 8, 8), torch.arange(5, 13), F32), ((3, 5, 6), torch.tensor([0, 3, 4, 9, 20]), F32),
             ((1, 2, 4, 16), torch.tensor([31, 2, 17, 8]), F64)]
    for i, (shape, positions, dtype) in enumerate(cases):
        x = C.randn(*shape, seed=400 + i, dtype=dtype)
        _check(student, x, positions, what="apply_rope output with offset positions")


def test_rope_uses_the_base_argument(student):
    """apply_rope(x, positions, base=...) uses the base it is given (100 and 500000, as in LLaMA 3)."""
    for i, base in enumerate((100.0, 500000.0)):
        x = C.randn(2, 2, 9, 8, seed=500 + i, dtype=F32)
        _check(student, x, torch.arange(3, 12), base, what=f"apply_rope output with base={base:g}")


def _as_f64(out, what, inputs, shape):
    return C.expect_tensor(out, what=what, inputs=inputs, shape=shape, dtype=F64)


def test_rope_scores_depend_on_relative_positions_only(student):
    """After rotation, the score of a query at position m and a key at position n depends on m - n only:
    shifting every position by the same amount (7 and 100) leaves all query-key dot products unchanged
    (float64, to 1e-10 of their magnitude)."""
    q = C.randn(2, 6, 8, seed=600, dtype=F64)
    k = C.randn(2, 6, 8, seed=601, dtype=F64)
    m, n = torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([3, 0, 5, 1, 2, 4])

    def scores(shift):
        rq = _as_f64(C.call(student, "apply_rope", q, m + shift), "apply_rope output",
                     {"x": q, "positions": f"{(m + shift).tolist()}"}, q.shape)
        rk = _as_f64(C.call(student, "apply_rope", k, n + shift), "apply_rope output",
                     {"x": k, "positions": f"{(n + shift).tolist()}"}, k.shape)
        return rq @ rk.transpose(-2, -1)

    base = scores(0)
    for shift in (7, 100):
        moved = scores(shift)
        scale = float(base.abs().max())
        if not C.is_close(moved, base, atol=1e-10 * scale):
            worst = float((moved - base).abs().max())
            C.fail(f"apply_rope: the scores (rotated q) . (rotated k) of a query at position m and a key at "
                   f"position n changed by up to {worst:.3g} when every position was shifted by {shift} "
                   f"(q, k float64[2, 6, 8]); a rotation by position * theta_i makes them depend on m - n only. "
                   f"Rotate every pair by exactly position * base**(-2i/head_dim), with the same formula for "
                   f"every position.")


def test_rope_preserves_the_length_of_every_pair(student):
    """Every interleaved pair (x[2i], x[2i+1]) keeps its length: the rotation is a rotation (float64, 4-D,
    positions with gaps)."""
    x = C.randn(2, 3, 5, 8, seed=700, dtype=F64)
    positions = torch.tensor([0, 3, 4, 9, 20])
    inputs = {"x": x, "positions": f"{positions.tolist()}"}
    out = _as_f64(C.call(student, "apply_rope", x, positions), "apply_rope output", inputs, x.shape)

    def interleaved(t):
        return t.reshape(*t.shape[:-1], -1, 2).norm(dim=-1)

    def halves(t):
        return torch.stack((t[..., :4], t[..., 4:]), dim=-1).norm(dim=-1)

    want = interleaved(x)
    if C.is_close(interleaved(out), want, atol=1e-10 * float(want.max())):
        return
    hint = ""
    if C.is_close(halves(out), halves(x), atol=1e-10 * float(want.max())):
        hint = (" Your output rotates the pairs (x[i], x[i + head_dim/2]) instead (the 'rotate_half' layout); "
                "this assignment pairs x[2i] with x[2i+1].")
    elif C.is_close(halves(out), want, atol=1e-10 * float(want.max())):
        hint = (" The rotated pairs are in your output, but concatenated ([x'_0, x'_2, ..., x'_1, x'_3, ...]) "
                "rather than interleaved back at indices 2i and 2i+1.")
    C.fail(f"apply_rope output: the length of the pairs (out[..., 2i], out[..., 2i+1]) differs from that of "
           f"(x[..., 2i], x[..., 2i+1]) (input: {C.describe_inputs(inputs)}); a rotation keeps every pair's "
           f"length.{hint}")
