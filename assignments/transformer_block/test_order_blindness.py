"""Part `order_blindness` (4 points): `permutation_error(module, x, perm, causal=False)`.

The suite hands the student's own MultiHeadAttention (float64, random weights) to permutation_error, by its
handle.  Two references:

* end to end (the value checks): the same error computed here on torch.nn.MultiheadAttention with the same
  weights, max |ref(x[:, perm]) - ref(x)[:, perm]|.  Without the mask it is rounding noise (about 1e-16), with
  the causal mask of order 1.  Tolerance: twice the allowed error of one output
  (autograder.judging.checks.reference_tolerance on both outputs: 30 x the observed float32 error scaled to
  float64 + 16 ulps of the largest output), since the error is a difference of two outputs.
* own parts (no points): the same error computed here from the student's module's own outputs on x[:, perm]
  and on x, asked in separate requests; the student's value must equal it (composition tolerance).  So a
  MultiHeadAttention that is not permutation-equivariant (heads split without the transpose) or ignores
  causal, which Part 3 already marks down, is carried forward here.

Which input amplifies which bug: permutations that are not their own inverse (the inverse permutation on the
output is off by O(1) even without the mask); batch == seq_len in the first configuration, so permuting the
batch axis runs and gives ~0 with the mask, where the reference is O(1); causal=True, where the mean of the
differences is well below their max, and ignoring `causal` gives ~0.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from autograder.judging import checks as C

from .states import mha_state_to_torch

F64 = torch.float64

# (d_model, num_heads, batch, seq_len, perm): batch == seq_len first; neither perm is its own inverse
CONFIGS = [(6, 3, 5, 5, (2, 4, 0, 1, 3)), (8, 2, 2, 6, (3, 0, 5, 1, 4, 2))]


def _setting(i):
    d, h, b, s, perm = CONFIGS[i]
    state = C.mha_state("", d, seed=4300 + 10 * i, dtype=F64)
    return d, h, state, C.randn(b, s, d, seed=4305 + 10 * i, dtype=F64), torch.tensor(perm, dtype=torch.int64)


def _build(student, d, h, state):
    module = C.new(student, "MultiHeadAttention", d, h)
    module.to(F64)
    module.load_weights(state)
    return module


def _torch_mha(state, d, h, dtype):
    ref = nn.MultiheadAttention(d, h, batch_first=True, dtype=dtype)
    ref.load_state_dict(mha_state_to_torch(C.cast_floats(state, dtype)), strict=True)
    return ref


def _error(a, b, reduce="max"):
    diff = (a - b).abs()
    return float(diff.max() if reduce == "max" else diff.mean())


@C.once
def _reference(x, perm, state, h, causal):
    """(expected error, its tolerance, [(hint, value a known mistake gives)]) on torch's attention."""
    d, s = x.shape[-1], x.shape[-2]

    def run(dt, xs=None, mask_on=causal):
        ref, xs = _torch_mha(state, d, h, dt), (x if xs is None else xs).to(dt)
        mask = ~C.tril_mask(s) if mask_on else None
        with torch.no_grad():
            return ref(xs, xs, xs, need_weights=False, attn_mask=mask)[0]

    both, atol = C.reference_tolerance(lambda dt: torch.stack([run(dt, x[:, perm]), run(dt)[:, perm]]), F64)
    first, after = both[0], both[1]
    mistakes = [
        ("your value matches permuting the output with the inverse permutation: apply the same perm to the "
         "input positions and to the output positions", _error(first, run(F64)[:, perm.argsort()])),
        ("your value is the mean of the absolute differences: return the largest one (max)",
         _error(first, after, "mean")),
    ]
    if causal:
        mistakes.append(("your value is about 0 with causal=True: pass causal=causal to both calls of the module, "
                         "and permute the positions (x[:, perm], dimension 1), not the batch (x[perm])",
                         _error(run(F64, x[:, perm], False), run(F64, None, False)[:, perm])))
    return _error(first, after), 2 * atol, mistakes


def _student_error(student, module, x, perm, causal):
    label = f"permutation_error(your {module.label}, x [{', '.join(map(str, x.shape))}], perm, causal={causal})"
    value = C.call(student, "permutation_error", module, x, perm, causal=causal)
    return C.expect_number(value, what=label), label


def _check(student, causal):
    for i in range(len(CONFIGS)):
        d, h, state, x, perm = _setting(i)
        module = _build(student, d, h, state)
        got, label = _student_error(student, module, x, perm, causal)
        expected, atol, mistakes = _reference(x, perm, state, h, causal)
        if abs(got - expected) <= atol:
            continue
        hint = next((m for m, v in mistakes if abs(got - v) <= atol + 1e-9 * abs(v)), None)
        why = "large: the mask makes the order matter" if causal else "about 0: without the mask order does not matter"
        C.fail(f"{label}: does not match max |module(x[:, perm]) - module(x)[:, perm]| computed with the reference "
               f"attention ({why}).", hints=[hint] if hint else [])


def test_permutation_error_returns_python_float(student):
    """permutation_error returns a plain Python float (e.g. via .item()), not a tensor.
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    d, h, state, x, perm = _setting(1)
    value = C.call_leaving_inputs(student, "permutation_error", _build(student, d, h, state), x, perm)
    C.expect_exact_type(value, float, what="permutation_error(module, x, perm)",
                        advice="Convert the largest difference with .item() (or float(...)).")


def test_unmasked_attention_is_order_blind(student):
    """Without the mask (causal=False, the default) permuting the input positions only permutes the output:
    permutation_error(your MultiHeadAttention, x, perm) is rounding noise, as for torch's attention with the
    same weights."""
    _check(student, False)


def test_causal_mask_breaks_order_blindness(student):
    """With causal=True the order matters: permutation_error(your MultiHeadAttention, x, perm, causal=True)
    equals the error computed with torch's attention and the causal mask (large)."""
    _check(student, True)


def _your_outputs(module, x, perm, causal):
    """module(x[:, perm]) and module(x)[:, perm], asked in separate requests."""
    first = C.expect_tensor(module(x[:, perm], causal=causal), what=f"{module.label} forward", shape=tuple(x.shape),
                            dtype=x.dtype)
    after = C.expect_tensor(module(x, causal=causal), what=f"{module.label} forward", shape=tuple(x.shape),
                            dtype=x.dtype)[:, perm]
    return first, after


def test_permutation_error_is_right_on_your_own_mha(student):
    """permutation_error's own logic, judged on the student's own MultiHeadAttention (no points of its own:
    when it passes and Part 2 or 3 lost points, this part's failed checks are carried forward).  It equals
    max |module(x[:, perm]) - module(x)[:, perm]| computed here from the module's outputs, asked separately,
    causal and not, on the module holding the test's weights wherever its parameter names match them (float64,
    and once float32, where a module whose layers .to() does not reach runs).  A setting where the module
    raises is Part 2's or 3's failure: skipped, if permutation_error fails there too (C.OwnParts)."""
    own = C.OwnParts("your permutation_error")
    for i, dtype in [(i, F64) for i in range(len(CONFIGS))] + [(1, torch.float32)]:
        d, h, state, x, perm = _setting(i)
        x = x.to(dtype)
        module = C.new(student, "MultiHeadAttention", d, h)
        if dtype != torch.float32:
            module.to(dtype)
        module.load_fitting(state, seed=4400 + 10 * i)
        for causal in (False, True):
            label = (f"permutation_error(your {module.label}, x [{', '.join(map(str, x.shape))}], perm, "
                     f"causal={causal}) ({C.describe_value(dtype)})")
            outputs = own.compose(label, lambda: _your_outputs(module, x, perm, causal))
            if outputs is None:
                own.expect_fails_too(label, lambda: C.call(student, "permutation_error", module, x, perm,
                                                           causal=causal))
                continue
            got, _ = _student_error(student, module, x, perm, causal)
            expected = _error(*outputs)
            if abs(got - expected) > C.composition_tolerance(torch.stack(outputs), dtype):
                C.fail(f"{label}: does not match max |module(x[:, perm]) - module(x)[:, perm]| computed from your "
                       f"own module's outputs")
            own.judged(label)
    own.finish()


def test_permutation_error_leaves_the_module_alone(student):
    """permutation_error only runs the module it is given: afterwards the module holds the same parameter
    values, buffers, requires_grad flags and training modes (autograder.judging.checks.untouched)."""
    d, h, state, x, perm = _setting(0)
    module = _build(student, d, h, state)
    before = C.module_state(module)
    # a number first: the state is judged after a call that did its job, not after a bare return
    C.expect_number(C.call(student, "permutation_error", module, x, perm, causal=True),
                    what="permutation_error(module, x, perm, causal=True)")
    C.expect_unchanged(module, before, what="the module", where="permutation_error(module, x, perm, causal=True)")
