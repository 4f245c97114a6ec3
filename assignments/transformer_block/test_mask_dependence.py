"""Part `mask_dependence` (6 points): `mask_dependence(seq_len, d_model, causal, seed=0, eps=1e-3)` and
`largest_dependence(table)`.

The reference is recomputed live in the test with torch: inside torch.random.fork_rng, torch.manual_seed(seed)
then x = torch.randn(seq_len, d_model, dtype=float64); out(x) = softmax(x x^T / sqrt(d_model) + mask) x with
the trusted mask; entry [t, j] = max over (c, i) of |out(x + eps e_jc)[t, i] - out(x - eps e_jc)[t, i]| / (2 eps).
All 2 * seq_len * d_model perturbed inputs go through one batched evaluation.

Tolerance: both sides take the same central differences in float64, so they differ only by the rounding of
two attention implementations (about 1e-16 on outputs of order 1), magnified by 1 / (2 eps): at eps = 1e-3
about 1e-13.  atol = 1e-9 leaves four orders of magnitude for any faithful implementation (vmap, a batched
perturbation, another loop order) and is far below what the known mistakes change: a one-sided difference
is off by O(eps) = 1e-3, dividing by eps doubles every entry, the transposed table or a sum over features
differ by O(1), and nudging a whole position at once by O(0.1).  autograd's exact Jacobian is off by
O(eps^2) = 1e-6 at eps = 1e-3 and by O(1e-2) at eps = 0.1: the contract asks for the central difference.

Which input amplifies which bug: causal and not, so the transposed table's zeros sit below the diagonal;
(3, 6) and (5, 4), seq_len below and above d_model; eps = 0.1 shows an ignored eps; seeds 3 and 5 an ignored
seed; the judge draws x in float64 as the contract says, so drawing float32 and converting is recognised.

`largest_dependence` is judged on tables the judge makes (random, with a zero upper triangle, with its
largest entry on the diagonal), so a mistake there does not depend on mask_dependence being right.

Own parts: the student's scaled_dot_product_attention and causal_mask are asked once each (all perturbed
inputs as one batch [2 * seq_len * d_model, seq_len, d_model]); the table the judge builds from those outputs
must equal the student's table.  When it does and Part 2 lost points, this part's failures are carried forward.
"""
from __future__ import annotations

import math

import torch

from autograder.judging import checks as C

F64 = torch.float64


def _input(seq_len, d_model, seed, draw_dtype=F64):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.randn(seq_len, d_model, dtype=draw_dtype).to(F64)


def _nudged(x, eps, *, whole_position=False):
    """[2 * S * D, S, D]: x + eps e_jc for every (j, c) in order, then x - eps e_jc (one-hot nudges); with
    whole_position, every feature of position j moves at once (the rows for c > 0 repeat c = 0)."""
    s, d = x.shape
    basis = torch.eye(s * d, dtype=F64).reshape(s * d, s, d)
    if whole_position:
        basis = torch.zeros(s, d, s, d, dtype=F64)
        for j in range(s):
            basis[j, :, j, :] = 1.0
        basis = basis.reshape(s * d, s, d)
    return torch.cat([x + eps * basis, x - eps * basis])


def _attend(inputs, causal):
    scores = inputs @ inputs.transpose(-2, -1) / math.sqrt(inputs.shape[-1])
    if causal:
        scores = scores.masked_fill(~C.tril_mask(inputs.shape[-2]), float("-inf"))
    return torch.softmax(scores, dim=-1) @ inputs


def _table(x, outputs, eps, *, divide=2.0, reduce="max"):
    """The dependence table from the outputs on _nudged(x, eps): [t, j] = max (or sum) over (c, i) |slope|."""
    s, d = x.shape
    slopes = ((outputs[: s * d] - outputs[s * d:]) / (divide * eps)).reshape(s, d, s, d).abs()  # [j, c, t, i]
    reduced = slopes.sum(dim=(1, 3)) if reduce == "sum" else slopes.amax(dim=(1, 3))
    return reduced.transpose(0, 1)  # [t, j]


@C.once
def _reference(seq_len, d_model, causal, seed, eps):
    x = _input(seq_len, d_model, seed)
    return _table(x, _attend(_nudged(x, eps), causal), eps)


@C.once
def _mistakes(seq_len, d_model, causal, seed, eps):
    x = _input(seq_len, d_model, seed)
    s, d = x.shape
    outputs = _attend(_nudged(x, eps), causal)
    plus = outputs[: s * d].reshape(s, d, s, d)
    one_sided = ((plus - _attend(x, causal)) / eps).abs().amax(dim=(1, 3)).transpose(0, 1)
    right = _table(x, outputs, eps)
    return [
        ("your table matches the one-sided difference (out(x + eps) - out(x)) / eps: use the central difference "
         "(out(x + eps) - out(x - eps)) / (2 * eps)", one_sided),
        ("your table is twice the reference: divide the central difference by 2 * eps, not eps",
         _table(x, outputs, eps, divide=1.0)),
        ("your table matches the reference transposed: entry [t, j] is output position t (row) against input "
         "position j (column)", right.transpose(0, 1)),
        ("your table matches summing the slopes over the features: take the largest |slope| over the input "
         "feature c and the output feature i", _table(x, outputs, eps, reduce="sum")),
        ("your table matches nudging every feature of position j at once: perturb one entry x[j, c] at a time",
         _table(x, _attend(_nudged(x, eps, whole_position=True), causal), eps)),
        ("your table matches x drawn in float32 and converted: draw torch.randn(seq_len, d_model, "
         "dtype=torch.float64) right after torch.manual_seed(seed)",
         _table(xf := _input(seq_len, d_model, seed, torch.float32), _attend(_nudged(xf, eps), causal), eps)),
        ("your table matches the other setting of causal: use causal_mask(seq_len) exactly when causal=True",
         _table(x, _attend(_nudged(x, eps), not causal), eps)),
    ]


def _call(student, seq_len, d_model, causal, **kwargs):
    label = C.describe_call("mask_dependence", (seq_len, d_model, causal), kwargs)
    table = C.expect_tensor(C.call(student, "mask_dependence", seq_len, d_model, causal, **kwargs), what=label,
                            shape=(seq_len, seq_len), dtype=F64)
    return table, label


def _check_value(student, seq_len, d_model, causal, **kwargs):
    seed, eps = kwargs.get("seed", 0), kwargs.get("eps", 1e-3)
    table, label = _call(student, seq_len, d_model, causal, **kwargs)
    C.assert_close(table, _reference(seq_len, d_model, causal, seed, eps), what=label, atol=1e-9, dtype=F64,
                   inputs={"seq_len": seq_len, "d_model": d_model, "causal": causal, "seed": seed, "eps": eps},
                   mistakes=_mistakes(seq_len, d_model, causal, seed, eps))


def test_mask_dependence_shape_and_dtype(student):
    """mask_dependence(seq_len, d_model, causal) returns a float64 tensor [seq_len, seq_len]."""
    for seq_len, d_model, causal in ((4, 3, True), (3, 5, False)):
        _call(student, seq_len, d_model, causal)


def test_masked_future_is_exactly_zero_and_past_is_not(student):
    """With causal=True every entry above the diagonal (j > t) is exactly 0.0 and every entry on and below
    it is positive; with causal=False every entry is positive."""
    for causal in (True, False):
        table, label = _call(student, 5, 4, causal)
        future = ~C.tril_mask(5)
        if causal and not bool((table[future] == 0.0).all()):
            C.fail(f"{label}: some entries with j > t are not exactly 0. The causal mask removes the path from "
                   f"the future: perturbing a later position must leave earlier outputs bit-identical (are row t "
                   f"and column j the output and the input position?)")
        if not bool((table[~future] > 0).all()) or (not causal and not bool((table[future] > 0).all())):
            C.fail(f"{label}: some entries that should be positive are 0 or not finite: output t depends on "
                   + ("every input j <= t" if causal else "every input j without a mask"))


def test_mask_dependence_matches_central_differences(student):
    """mask_dependence(5, 4, causal) with the default seed and eps equals the table the judge builds by
    central differences on its own attention for the same x (atol 1e-9), causal and not."""
    for causal in (True, False):
        _check_value(student, 5, 4, causal)


def test_mask_dependence_honours_seed_eps_and_sizes(student):
    """mask_dependence honours seq_len, d_model, seed and eps: it equals the judge's table for (3, 6) with
    seed 3, and for (4, 4) with eps = 0.1 (where a one-sided difference or the exact derivative is far off)."""
    _check_value(student, 3, 6, False, seed=3)
    _check_value(student, 4, 4, True, eps=0.1)
    _check_value(student, 4, 4, False, seed=5, eps=0.1)


def _judge_tables():
    """(label, table, (future, past)): tables the judge makes, each with one trap."""
    g = C.generator(4100)
    plain = torch.rand(5, 5, generator=g, dtype=F64)
    lower = plain.clone().tril()  # a masked table: the future is exactly 0
    diagonal = plain.clone()
    diagonal[2, 2] = 3.0  # largest on the diagonal: the diagonal is the present, part of j <= t
    future = ~C.tril_mask(5)
    return [(name, t, (float(t[future].max()), float(t[~future].max())))
            for name, t in (("a random table", plain), ("a table with a zero upper triangle", lower),
                            ("a table whose largest entry is on the diagonal", diagonal))]


def test_largest_dependence_returns_python_floats(student):
    """largest_dependence(table) returns a tuple (or list) of two Python floats.
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    value = C.call_leaving_inputs(student, "largest_dependence", _judge_tables()[0][1])
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        C.fail(f"largest_dependence(table): expected a pair (future, past), got {C.kind_of(value)}")
    for v in value:
        C.expect_exact_type(v, float, what="largest_dependence(table)", advice="Convert each with .item().")


def test_largest_dependence_on_given_tables(student):
    """largest_dependence(table) = (largest entry with j > t, largest with j <= t) on tables the judge makes:
    random, with a zero upper triangle, with the largest entry on the diagonal."""
    for name, table, (future, past) in _judge_tables():
        value = C.call(student, "largest_dependence", table)
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            C.fail(f"largest_dependence on {name}: expected a pair (future, past), got {C.kind_of(value)}")
        got = [float(v.item()) if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in value]
        if not all(type(v) in (float, int) for v in got):
            C.fail(f"largest_dependence on {name}: expected two numbers, got {C.kind_of(value)}")
        if (got[0], got[1]) == (past, future) and future != past:
            C.fail(f"largest_dependence on {name}: the two numbers are swapped: first the future (j > t), then "
                   f"the past (j <= t)")
        if not math.isclose(got[0], future, rel_tol=1e-12, abs_tol=0.0):
            hint = (" The diagonal (j = t) is the present: it belongs to the past side, j <= t; the future is "
                    "strictly above it (triu with diagonal=1)." if math.isclose(got[0], float(table.max())) else "")
            C.fail(f"largest_dependence on {name}: the largest dependence on the future (j > t) is wrong.{hint}")
        if not math.isclose(got[1], past, rel_tol=1e-12, abs_tol=0.0):
            C.fail(f"largest_dependence on {name}: the largest dependence on the past (j <= t, the diagonal "
                   f"included) is wrong.")


def _from_your_attention(student, x, seq_len, causal):
    """The table the judge builds by central differences from the student's own scaled_dot_product_attention
    and causal_mask, all perturbed inputs in one batch."""
    inputs = _nudged(x, 1e-3)
    mask = C.call(student, "causal_mask", seq_len) if causal else None
    outputs = C.expect_tensor(C.call(student, "scaled_dot_product_attention", inputs, inputs, inputs, mask),
                              what="your scaled_dot_product_attention on the perturbed inputs (float64)",
                              shape=tuple(inputs.shape), dtype=F64)
    return _table(x, outputs, 1e-3)


def test_mask_dependence_is_right_on_your_own_attention(student):
    """mask_dependence's own logic, judged on the student's own attention (no points of its own: when it
    passes and Part 2 lost points, this part's failed checks are carried forward from Part 2).  Its table
    equals the one the judge builds by central differences from the student's own
    scaled_dot_product_attention and causal_mask, all perturbed inputs in one batch.  A setting where the
    student's attention raises is Part 2's failure: skipped, if mask_dependence fails there too; the check
    fails as "cannot be judged" only when neither setting could be judged (C.OwnParts)."""
    seq_len, d_model = 5, 4
    own = C.OwnParts("your mask_dependence")
    for causal in (True, False):
        x = _input(seq_len, d_model, 0)
        label = C.describe_call("mask_dependence", (seq_len, d_model, causal))
        expected = own.compose(label, lambda: _from_your_attention(student, x, seq_len, causal))
        if expected is None:
            own.expect_fails_too(label, lambda: _call(student, seq_len, d_model, causal))
            continue
        table, label = _call(student, seq_len, d_model, causal)
        C.assert_close(table, expected, atol=1e-9, dtype=F64,
                       what=f"{label} against central differences of your own scaled_dot_product_attention",
                       inputs={"seq_len": seq_len, "d_model": d_model, "causal": causal})
        own.judged(label)
    own.finish()
