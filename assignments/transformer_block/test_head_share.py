"""Part `head_share` (5 points): `ideal_head_weights(targets, num_heads, seq_len)` and
`guaranteed_share(weights, targets)`.

ideal_head_weights is judged by what it must achieve and by the dealing the notebook names: its rows must be
distributions (non-negative, each summing to 1 within 1e-6), the share the judge measures on them (min over
targets of the max over heads, computed here in float64) must equal 1/ceil(k/h) within 1e-6, the best any
weights can give (some head is the best head of at least ceil(k/h) targets, and its weights on them sum to at
most 1), and the tensor must be the round robin one within 1e-6: targets[i] to head i % h, each head uniform
over its own targets, a head without a target uniform over all seq_len positions.  Contiguous blocks of
ceil(k/h) targets, round robin over the sorted targets and an idle head on one position reach the same share
and differ from it on CASES (the first case already tells contiguous dealing from round robin).

Which input amplifies which bug: unsorted, non-adjacent targets (a solution that assumes targets 0..k-1 puts
weight elsewhere); h > k (idle heads must still be distributions, not rows of zeros or NaN from 0/0);
k = 8, h = 3 and k = 7, h = 4, where chunks of floor(k/h) targets overload the last head; k = 3, h = 2, where
the average share h/k = 0.667 differs from the guaranteed 0.5.  Every head uniform over all targets gives 1/k,
below 1/ceil(k/h) whenever h > 1.

guaranteed_share is judged on weight tensors the judge makes (random rows, float64 and float32), where max
over heads then min over targets differs from the swapped order, from a mean over targets and from a sum over
heads; its value must equal the judge's within 1e-12 relative (float32 inputs: the float32 value, exactly
representable in a Python float).
"""
from __future__ import annotations

import math

import torch

from autograder.judging import checks as C

F64 = torch.float64

# (targets, num_heads, seq_len): sorted and not, adjacent and not, h below, equal to and above k
CASES = [([4, 1, 6], 2, 8), ([0, 2, 5, 7, 9, 3, 11, 13], 3, 14), ([6, 2, 0, 5, 3, 1, 4], 4, 7), ([5], 3, 6),
         ([9, 3], 4, 10), ([2, 7, 4, 0], 1, 8), ([1, 3, 5, 7, 9], 5, 12), ([11, 0, 6, 3, 8, 1], 4, 12)]


def _share(weights, targets):
    return float(weights.to(F64)[:, targets].amax(dim=0).min())


def _weights(student, targets, num_heads, seq_len):
    label = C.describe_call("ideal_head_weights", (targets, num_heads, seq_len))
    weights = C.expect_tensor(C.call(student, "ideal_head_weights", list(targets), num_heads, seq_len), what=label,
                              shape=(num_heads, seq_len))
    if not weights.is_floating_point():
        C.fail(f"{label}: expected a floating-point tensor, got {weights.dtype}")
    return weights.to(F64), label


def test_head_share_shapes_and_types(student):
    """ideal_head_weights returns a float tensor [num_heads, seq_len]; guaranteed_share returns a Python float.
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    _weights(student, [3, 0, 5], 2, 6)
    given, targets = _judge_weights()[0]  # every entry positive: a change to any of them shows
    value = C.call_leaving_inputs(student, "guaranteed_share", given, list(targets))
    C.expect_exact_type(value, float, what=f"guaranteed_share(weights, {targets})",
                        advice="Convert the result with .item() (or float(...)).")


def test_ideal_head_weights_rows_are_distributions(student):
    """Every row of ideal_head_weights is a distribution over the positions: finite, non-negative, summing to
    1 (within 1e-6), also for heads that received no target (num_heads > number of targets)."""
    for targets, num_heads, seq_len in CASES:
        weights, label = _weights(student, targets, num_heads, seq_len)
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            C.fail(f"{label}: every weight must be a finite, non-negative number. A head without a target must "
                   f"still be a distribution (uniform over all positions), not 0 / 0.")
        sums = weights.sum(dim=-1)
        if not bool(((sums - 1).abs() <= 1e-6).all()):
            C.fail(f"{label}: each row (one head's distribution over the {seq_len} positions) must sum to 1; "
                   f"a head without a target is uniform over all positions")


def test_ideal_head_weights_guarantee_one_over_ceil_k_over_h(student):
    """The share every target gets from ideal_head_weights (min over targets of max over heads, measured by
    the judge) is 1/ceil(k/h), the best possible, for unsorted and non-adjacent targets, h below, equal to and
    above k."""
    for targets, num_heads, seq_len in CASES:
        weights, label = _weights(student, targets, num_heads, seq_len)
        k = len(targets)
        share, best = _share(weights, targets), 1 / math.ceil(k / num_heads)
        if math.isclose(share, best, rel_tol=1e-6):
            continue
        ruled = weights[:, targets]
        if not bool((ruled.amax(dim=0) > 0).all()):
            C.fail(f"{label}: some target gets no weight from any head: every target must be covered (the "
                   f"targets are positions in any order, not 0..k-1)")
        hint = ""
        if math.isclose(share, 1 / k, rel_tol=1e-6) and num_heads > 1:
            hint = (" Your heads give every target only 1/k: deal the targets out to the heads whole, each head "
                    "uniform over its own targets, instead of spreading every target over every head.")
        elif math.isclose(share, 1 / (k - (num_heads - 1) * (k // num_heads)), rel_tol=1e-6) and k >= num_heads:
            hint = (" Your heads hold floor(k/h) targets each and the last one the rest: deal them round robin "
                    "(target i to head i % h) so that no head holds more than ceil(k/h).")
        C.fail(f"{label}: the share every target is guaranteed should be 1/ceil(k/h) = 1/{math.ceil(k / num_heads)}"
               f" with k = {k} targets and h = {num_heads} heads; your weights guarantee less.{hint}")


def _judge_weights():
    """Weight tensors the judge makes, with the targets to measure: rows of softmax(random) in float64 and
    float32, and a tensor with a zero column."""
    g = C.generator(4200)
    a = torch.softmax(3 * torch.randn(3, 7, generator=g, dtype=F64), dim=-1)
    b = torch.softmax(2 * torch.randn(4, 5, generator=g, dtype=F64), dim=-1).to(torch.float32)
    c = torch.rand(2, 6, generator=g, dtype=F64)
    c[:, 4] = 0.0
    return [(a, [5, 0, 2]), (b, [1, 3]), (a, [6]), (c, [0, 4, 5])]


def test_guaranteed_share_on_given_weights(student):
    """guaranteed_share(weights, targets) equals min over targets of max over heads of weights[head, target]
    on weight tensors the judge makes (float64 and float32, random rows, a target without weight)."""
    for weights, targets in _judge_weights():
        label = f"guaranteed_share(weights [{', '.join(map(str, weights.shape))}] {weights.dtype}, {targets})"
        value = C.expect_number(C.call(student, "guaranteed_share", weights, list(targets)), what=label)
        ruled = weights.to(F64)[:, targets]
        expected = float(ruled.amax(dim=0).min())
        if math.isclose(value, expected, rel_tol=1e-12, abs_tol=1e-300):
            continue
        mistakes = [("min and max are swapped: take the max over heads (each target's best head) first, then "
                     "the min over targets", float(ruled.amin(dim=0).max())),
                    ("your value is the mean over targets of each target's best weight: the guarantee is the "
                     "smallest of them (min over targets)", float(ruled.amax(dim=0).mean())),
                    ("your value adds each target's weights over the heads: only a target's best head counts "
                     "(max over heads)", float(ruled.sum(dim=0).min())),
                    ("your value is the minimum over heads for each target: a target is served by its best head "
                     "(max over heads)", float(ruled.amin()))]
        hint = next((h for h, v in mistakes if math.isclose(value, v, rel_tol=1e-9)), None)
        C.fail(f"{label}: does not match min over targets of max over heads of weights[head, target].",
               hints=[hint] if hint else [])


def _dealt(targets, num_heads, seq_len, owner):
    """The weights when target number i goes to head owner(i), each head uniform over its own targets and a head
    without one uniform over all positions (float64)."""
    weights = torch.zeros(num_heads, seq_len, dtype=F64)
    for i, target in enumerate(targets):
        weights[owner(i), target] = 1.0
    weights[weights.sum(dim=-1) == 0] = 1.0
    return weights / weights.sum(dim=-1, keepdim=True)


def _look_alikes(targets, num_heads, seq_len):
    """Dealings with the same guaranteed share as round robin, which the notebook does not ask for."""
    k, size = len(targets), math.ceil(len(targets) / num_heads)
    in_order = sorted(targets)
    sorted_robin = torch.zeros(num_heads, seq_len, dtype=F64)
    for i, target in enumerate(in_order):
        sorted_robin[i % num_heads, target] = 1.0
    sorted_robin[sorted_robin.sum(dim=-1) == 0] = 1.0
    idle_on_first = _dealt(targets, num_heads, seq_len, lambda i: i % num_heads)
    for head in range(k, num_heads):
        idle_on_first[head] = 0.0
        idle_on_first[head, 0] = 1.0
    return [("your heads hold contiguous blocks of the list (targets 0..c-1 to head 0, ...): deal round robin, "
             "targets[i] to head i % num_heads", _dealt(targets, num_heads, seq_len, lambda i: i // size)),
            ("your dealing follows the sorted targets: deal them in the list's order, targets[i] to head "
             "i % num_heads", sorted_robin / sorted_robin.sum(dim=-1, keepdim=True)),
            ("a head without a target must be uniform over all seq_len positions", idle_on_first)]


def test_ideal_head_weights_deal_round_robin(student):
    """ideal_head_weights is the round robin dealing of the notebook (within 1e-6): targets[i] to head
    i % num_heads in the list's order, each head uniform over its own targets, a head without a target uniform
    over all seq_len positions.  The cases tell it from contiguous blocks, from dealing the sorted targets and
    from idle heads placed on one position, which reach the same share."""
    for targets, num_heads, seq_len in CASES:
        weights, label = _weights(student, targets, num_heads, seq_len)
        expected = _dealt(targets, num_heads, seq_len, lambda i: i % num_heads)
        if bool(((weights - expected).abs() <= 1e-6).all()):
            continue
        hints = [h for h, w in _look_alikes(targets, num_heads, seq_len)
                 if not torch.equal(w, expected) and bool(((weights - w).abs() <= 1e-6).all())]
        C.fail(f"{label}: not the round robin dealing (targets[i] to head i % num_heads, each head uniform over "
               f"its own targets, a head without a target uniform over all positions).", hints=hints[:1])
