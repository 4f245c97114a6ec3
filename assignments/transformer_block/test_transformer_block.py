"""Part `transformer_block` (20 points): the `TransformerBlock` module (post-norm and pre-norm).

The reference is computed live with `torch.nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0,
activation="relu", batch_first=True, norm_first=...)` loaded with the same weights (self_attn.in_proj_weight =
cat(Wq, Wk, Wv), ..., norm1 = ln1, norm2 = ln2, linear1 = ffn.0, linear2 = ffn.2).  Causal mode is compared with
src_mask = ~causal (bool, True = blocked) and, in some cases, with is_causal=True plus the equivalent float mask.
LayerNorm weights and biases are RANDOM (weight ~ N(1, 0.3^2), bias ~ N(0, 0.3^2)): with ones/zeros a shared or
swapped LayerNorm would be invisible.

Tolerances (see autograder.judging.checks.reference_tolerance): the reference layer is evaluated in float64 and float32
on the same input and weights; allowed absolute error = 30 x the observed float32 error (x 2**-29 for float64
outputs) + 16 ulps of the largest output magnitude.  For the 12-block stack gradient the same derivation is
applied to the input gradient, and its norm must lie within a band of relative half-width
max(1e-3, 30 x the reference's float32 relative error) around the reference norm.

Which input amplifies which bug:
  * random LayerNorm parameters: using ln1 for both sublayers, or swapping ln1/ln2, is off by O(0.3).
  * norm_first=True vs False on the same weights: the wrong norm order, or a pre-norm residual taken from the
    normalised input (x = ln1(x) + attn(ln1(x))), is off by O(1); in the 12-block pre-norm stack the latter
    also changes the input-gradient norm (the residual path no longer carries the gradient unchanged).
  * causal in float64: the input Jacobian of one block is exactly 0 for j > t (vjp with one-hot cotangents);
    perturbing future inputs of a 2-block causal stack leaves outputs <= t bit-identical.
  * odd sizes (d_model = 6, S = 5), one head, d_model heads, seq_len == d_model, batch 1.
  * the deep-stack loss is a random projection of the output (a plain sum after a LayerNorm would have zero
    gradient by construction).

Structure checks judge the parameters (names and shapes) and loading the test's weights; extra buffers, such as
a causal mask registered by the attention, are accepted (see test_multi_head_attention).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

from .states import block_state, block_state_to_torch

F32, F64 = torch.float32, torch.float64

# (d_model, num_heads, d_ff, batch, seq_len)
CONFIGS = [(8, 2, 16, 2, 5), (6, 3, 10, 1, 5), (8, 1, 12, 2, 8), (6, 6, 12, 2, 4)]



def _expected_shapes(d, d_ff):
    shapes = {f"attn.{n}.{p}": ((d, d) if p == "weight" else (d,)) for n in C.MHA_PROJECTIONS
              for p in ("weight", "bias")}
    shapes.update({"ln1.weight": (d,), "ln1.bias": (d,), "ln2.weight": (d,), "ln2.bias": (d,),
                   "ffn.0.weight": (d_ff, d), "ffn.0.bias": (d_ff,), "ffn.2.weight": (d, d_ff), "ffn.2.bias": (d,)})
    return shapes


def _torch_layer(state, d, h, d_ff, norm_first, dtype):
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=norm_first, dtype=dtype)
    layer.load_state_dict(block_state_to_torch(C.cast_floats(state, dtype)), strict=True)
    return layer.train()  # training mode (dropout is 0): the plain, non-fused code path


def _torch_forward(layer, x, causal, float_mask=False):
    seq = x.shape[-2]
    if not causal:
        return layer(x)
    if float_mask:
        mask = torch.zeros(seq, seq, dtype=x.dtype).masked_fill(~C.tril_mask(seq), float("-inf"))
        return layer(x, src_mask=mask, is_causal=True)
    return layer(x, src_mask=~C.tril_mask(seq))


def _reference(x, state, h, d_ff, norm_first, causal, float_mask=False):
    d = x.shape[-1]

    def run(dt):
        with torch.no_grad():
            return _torch_forward(_torch_layer(state, d, h, d_ff, norm_first, dt), x.to(dt), causal, float_mask)
    return run


def _manual_block(x, state, h, d_ff, norm_first, causal, *, from_normed=False, attn_residual=True,
                  ffn_residual=True, norm_inside=False, activation=F.relu):
    """Known-buggy blocks, in float64 on the trusted side, from the torch layer's own sublayers:
    from_normed: pre-norm residuals start from the NORMALISED input (x = ln1(x) + attn(ln1(x)));
    attn_residual / ffn_residual=False: that sublayer's residual connection is missing;
    norm_inside: post-norm written x + ln(sublayer(x)); activation: the feed-forward nonlinearity."""
    layer = _torch_layer(state, x.shape[-1], h, d_ff, True, F64)
    x = x.double()
    mask = ~C.tril_mask(x.shape[-2]) if causal else None

    def attn(t):
        return layer.self_attn(t, t, t, need_weights=False, attn_mask=mask)[0]

    def ffn(t):
        return layer.linear2(activation(layer.linear1(t)))

    with torch.no_grad():
        if norm_first:
            n1 = layer.norm1(x)
            x = (n1 if from_normed else x) * attn_residual + attn(n1)
            n2 = layer.norm2(x)
            return (n2 if from_normed else x) * ffn_residual + ffn(n2)
        if norm_inside:
            x = x + layer.norm1(attn(x))
            return x + layer.norm2(ffn(x))
        x = layer.norm1(x * attn_residual + attn(x))
        return layer.norm2(x * ffn_residual + ffn(x))


@C.once
def _mistakes(x, state, h, d_ff, norm_first, causal):
    def variant(st=state, nf=norm_first, c=causal):
        return _reference(x, st, h, d_ff, nf, c)(F64)

    ln1_twice = {**state, "ln2.weight": state["ln1.weight"], "ln2.bias": state["ln1.bias"]}
    ln2_twice = {**state, "ln1.weight": state["ln2.weight"], "ln1.bias": state["ln2.bias"]}
    swapped = {**state, "ln1.weight": state["ln2.weight"], "ln1.bias": state["ln2.bias"],
               "ln2.weight": state["ln1.weight"], "ln2.bias": state["ln1.bias"]}
    out = [
        ("your output matches a block that uses ln1 for both sublayers: the feed-forward sublayer must use its "
         "own LayerNorm, ln2", variant(ln1_twice)),
        ("your output matches a block that uses ln2 for both sublayers: the attention sublayer must use ln1",
         variant(ln2_twice)),
        ("your output matches a block with ln1 and ln2 swapped: ln1 belongs to the attention sublayer, ln2 to "
         "the feed-forward sublayer", variant(swapped)),
        (f"your output matches the {'post' if norm_first else 'pre'}-norm block, but norm_first={norm_first} "
         f"asks for {'pre' if norm_first else 'post'}-norm", variant(nf=not norm_first)),
        ("your output matches the block WITHOUT the causal mask: pass causal on to the attention" if causal else
         "your output matches the causal block, but causal=False was asked for", variant(c=not causal)),
    ]
    manual = [
        ("your output matches the block without the residual connection around the attention sublayer: add "
         "the sublayer's input back", {"attn_residual": False}),
        ("your output matches the block without the residual connection around the feed-forward sublayer: add "
         "the sublayer's input back", {"ffn_residual": False}),
        ("your output matches GELU in the feed-forward sublayer: use ReLU (nn.ReLU), as "
         "torch.nn.TransformerEncoderLayer does by default", {"activation": F.gelu}),
    ]
    if norm_first:
        manual.append(("your output matches a pre-norm block whose residual starts from the normalised input "
                       "(x = ln1(x) + attn(ln1(x))): add the sublayer output to the un-normalised x, "
                       "x = x + attn(ln1(x)), then x = x + ffn(ln2(x))", {"from_normed": True}))
    else:
        manual.append(("your output matches a post-norm block written x + ln(sublayer(x)): normalise after the "
                       "residual sum, x = ln1(x + attn(x)), then ln2(x + ffn(x))", {"norm_inside": True}))
    out += [(hint, _manual_block(x, state, h, d_ff, norm_first, causal, **options)) for hint, options in manual]
    return out


def _build(student, d, h, d_ff, norm_first, state, dtype=F32, pass_norm_first=True):
    kwargs = {"norm_first": norm_first} if (norm_first or pass_norm_first) else {}
    module = C.new(student, "TransformerBlock", d, h, d_ff, **kwargs)
    if dtype != F32:
        module.to(dtype)
    module.load_weights(state)
    return module


@C.once
def _expected(x, state, h, d_ff, norm_first, causal, float_mask):
    return C.reference_tolerance(_reference(x, state, h, d_ff, norm_first, causal, float_mask), x.dtype)


def _compare(module, x, state, h, d_ff, norm_first, causal, float_mask=False, pass_flag=True):
    out = module(x, causal=causal) if (causal or pass_flag) else module(x)
    expected, atol = _expected(x, state, h, d_ff, norm_first, causal, float_mask)
    C.assert_close(out, expected, what=f"{module.label} forward (causal={causal})", atol=atol, dtype=x.dtype,
                   inputs={"x": x, "causal": causal, "weights": "random, LayerNorm weights/biases included"},
                   mistakes=_mistakes(x, state, h, d_ff, norm_first, causal))


def test_block_parameter_names_and_shapes(student):
    """TransformerBlock(d_model, num_heads, d_ff) has exactly the parameters attn.{Wq,Wk,Wv,Wo}.{weight,bias},
    ln1.{weight,bias}, ln2.{weight,bias}, ffn.0.{weight,bias} and ffn.2.{weight,bias} with the right shapes
    (named_parameters), for both norm orders.  Buffers, such as a causal mask registered by the attention, are
    not parameters and are fine."""
    advice = ("Use self.attn = MultiHeadAttention(...), self.ln1, self.ln2 = LayerNorm(d_model) and self.ffn = "
              "nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model)).")
    for norm_first in (False, True):
        module = C.new(student, "TransformerBlock", 8, 2, 12, norm_first=norm_first)
        C.expect_parameters(module.named_parameters(), _expected_shapes(8, 12),
                            what=f"{module.label}.named_parameters()", advice=advice)


def test_block_loads_random_state_dict(student):
    """A random state_dict (with distinct ln1 and ln2 values) loads into TransformerBlock (extra buffers are
    fine and keep their values); its parameters then hold exactly the loaded values (so ln1 and ln2 are
    separate modules)."""
    module = C.new(student, "TransformerBlock", 6, 3, 10)
    module.load_weights(block_state("", 6, 10, seed=2000, dtype=F32))


def test_block_output_shape_and_dtype(student):
    """The forward of TransformerBlock maps x [batch, seq_len, d_model] to the same shape and dtype (float32,
    and float64 after .to(torch.float64)), for both norm orders, causal and not."""
    d, h, d_ff, b, s = CONFIGS[1]
    for dtype in (F32, F64):
        for norm_first in (False, True):
            state = block_state("", d, d_ff, seed=2100 + 10 * norm_first, dtype=dtype)
            module = _build(student, d, h, d_ff, norm_first, state, dtype)
            x = C.randn(b, s, d, seed=2105, dtype=dtype)
            for causal in (False, True):
                C.expect_tensor(module(x, causal=causal), what=f"{module.label} forward (causal={causal})",
                                inputs={"x": x, "causal": causal}, shape=(b, s, d), dtype=dtype)


def _matches(student, norm_first, causal, seed):
    for i, (d, h, d_ff, b, s) in enumerate(CONFIGS):
        state = block_state("", d, d_ff, seed=seed + 10 * i, dtype=F32)
        module = _build(student, d, h, d_ff, norm_first, state, pass_norm_first=i % 2 == 0)
        x = C.randn(b, s, d, seed=seed + 10 * i + 5, dtype=F32, std=1.5)
        _compare(module, x, state, h, d_ff, norm_first, causal, float_mask=causal and i % 2 == 1,
                 pass_flag=i % 2 == 0)


def test_block_post_norm_matches_torch(student):
    """TransformerBlock with norm_first=False (the default) matches torch.nn.TransformerEncoderLayer
    (norm_first=False, dropout=0, relu) with the same weights: x = ln1(x + attn(x)); y = ln2(x + ffn(x))."""
    _matches(student, False, False, 2200)


def test_block_pre_norm_matches_torch(student):
    """TransformerBlock with norm_first=True matches torch.nn.TransformerEncoderLayer(norm_first=True) with
    the same weights: x = x + attn(ln1(x)); y = x + ffn(ln2(x))."""
    _matches(student, True, False, 2300)


def test_block_causal_matches_torch(student):
    """TransformerBlock with causal=True matches torch.nn.TransformerEncoderLayer with a causal mask, for both
    norm orders."""
    _matches(student, False, True, 2400)
    _matches(student, True, True, 2500)


def test_block_float64_matches_torch(student):
    """After .to(torch.float64), TransformerBlock matches torch's float64 TransformerEncoderLayer to float64
    precision (both norm orders, causal and not)."""
    d, h, d_ff, b, s = CONFIGS[0]
    for norm_first in (False, True):
        state = block_state("", d, d_ff, seed=2600 + 10 * norm_first, dtype=F64)
        module = _build(student, d, h, d_ff, norm_first, state, F64)
        x = C.randn(b, s, d, seed=2605, dtype=F64, std=1.5)
        for causal in (False, True):
            _compare(module, x, state, h, d_ff, norm_first, causal)


def test_block_causal_has_no_future_dependence(student):
    """With causal=True, output position t of a block (and of two blocks stacked) does not depend AT ALL on
    input positions j > t (gradient exactly 0, output bit-identical when they change) but depends on every
    j <= t; with causal=False it does depend on later positions (float64)."""
    d, h, d_ff, b, s = 8, 2, 16, 2, 5
    block_a = _build(student, d, h, d_ff, False, block_state("", d, d_ff, seed=2700, dtype=F64), F64)
    block_b = _build(student, d, h, d_ff, True, block_state("", d, d_ff, seed=2710, dtype=F64), F64)
    x = C.randn(b, s, d, seed=2720, dtype=F64)
    for block in (block_a, block_b):
        what = f"{block.label} forward with causal=True (float64, x [{b}, {s}, {d}])"

        def vjp_fn(cots, block=block, what=what):
            out, grads = block.vjp([x], {"causal": True}, cots)
            C.expect_tensor(out, what=what, shape=(b, s, d), dtype=F64)
            return grads

        C.check_causal_jacobian(vjp_fn, [x], ["x"], (b, s, d), must_matter=["x"], what=what, seed=2730)

    def stack(xs, causal=True):
        hidden = C.expect_tensor(block_a(xs[0], causal=causal), what=f"{block_a.label} forward", shape=(b, s, d))
        return block_b(hidden, causal=causal)

    C.check_causal_perturbation(stack, [x], seed=2740,
                                what=f"two stacked causal blocks ({block_a.label} then {block_b.label}, float64)")
    C.check_depends_on_future(lambda xs: stack(xs, causal=False), [x], seed=2750,
                              what="two stacked blocks with causal=False (float64)")


@C.once
def _stack_reference(states, x, projection, d, h, d_ff):
    """The input gradient of (stack(x) * projection).sum() through pre-norm torch layers with these states:
    (float64 reference, allowed error for float32, relative error of the float32 reference)."""
    def reference(dt):
        layers = [_torch_layer(st, d, h, d_ff, True, dt) for st in states]
        xs = x.to(dt).requires_grad_()
        out = xs
        for layer in layers:
            out = layer(out)
        return torch.autograd.grad((out * projection.to(dt)).sum(), xs)[0]

    expected, atol = C.reference_tolerance(reference, F32)
    rel32 = float((reference(F32).double() - expected).norm()) / float(expected.norm())
    return expected, atol, rel32


def test_block_deep_pre_norm_stack_input_gradient(student):
    """The input gradient through 12 stacked pre-norm TransformerBlocks (loss: a random projection of the
    output) matches the gradient through 12 torch.nn.TransformerEncoderLayer(norm_first=True) with the same
    weights: the residual path must carry the gradient through the whole stack (float32)."""
    d, h, d_ff, b, s, depth = 16, 4, 32, 2, 6, 12
    states = [block_state("", d, d_ff, seed=3000 + 100 * i, dtype=F32, attn_gain=1.0) for i in range(depth)]
    x = C.randn(b, s, d, seed=2990, dtype=F32)
    projection = C.randn(b, s, d, seed=2991, dtype=F32)

    blocks = [_build(student, d, h, d_ff, True, st) for st in states]
    hidden = [x]
    for block in blocks:
        hidden.append(C.expect_tensor(block(hidden[-1]), what=f"{block.label} forward (in a 12-block stack)",
                                      shape=(b, s, d), dtype=F32))
    grad = projection
    for i in reversed(range(depth)):
        _, grads = blocks[i].vjp([hidden[i]], {}, [grad])
        if not isinstance(grads, list) or len(grads) != 1 or grads[0][0] is None:
            C.fail(f"{blocks[i].label}: no gradient with respect to the input came back (block {i} of the stack); "
                   f"is the output detached from the input?")
        grad = C.expect_tensor(grads[0][0], what=f"input gradient of block {i} of the stack", shape=(b, s, d))

    expected, atol, rel32 = _stack_reference(states, x, projection, d, h, d_ff)
    ref_norm = float(expected.norm())
    band = max(1e-3, C.DEFAULT_FACTOR * rel32)
    got = grad.detach().double()
    ratio = float(got.norm()) / ref_norm
    what = "input gradient through 12 stacked pre-norm blocks"
    inputs = {"x": x, "blocks": f"12 x TransformerBlock({d}, {h}, {d_ff}, norm_first=True)",
              "loss": "random projection of the output"}
    if not math.isfinite(ratio) or abs(ratio - 1) > band:
        C.fail(f"{what}: its norm is {ratio:.4g} times the reference norm (allowed: within {band:.2g} of 1; input: "
               f"{C.describe_inputs(inputs)}). In a pre-norm stack the residual x + sublayer(ln(x)) keeps the "
               f"gradient flowing; a residual taken from the normalised input or a wrong block breaks this.")
    C.assert_close(grad, expected, what=what, inputs=inputs, atol=atol, dtype=F32)


# the own-parts check's settings, (d_model, num_heads, d_ff, batch, seq_len, dtype): two of CONFIGS in float64,
# and seq_len == d_model with batch 1 in float32, where even a layer norm whose statistics lose their last
# axis (no keepdim) runs, and a MultiHeadAttention whose layers .to(float64) does not reach (a plain list)
OWN_CONFIGS = [(*CONFIGS[0], F64), (*CONFIGS[1], F64), (6, 3, 10, 1, 6, F32)]
PIECES = ("ln1", "ln2", "attn", "ffn")


def _your_block(student, d, h, d_ff, norm_first, state, seed, dtype):
    """The student's block in `dtype` holding the test's weights under whichever of its parameter names match
    them (random ones under the others: a LayerNorm whose parameters are named gamma/beta still gets distinct
    values in ln1 and ln2), and its own ln1, ln2, attn and ffn as it holds them."""
    block = C.new(student, "TransformerBlock", d, h, d_ff, norm_first=norm_first)
    if dtype != F32:
        block.to(dtype)
    block.load_fitting(state, seed=seed)
    return block, {name: block.child(name) for name in PIECES}


def _expect_distinct_norms(block, parts):
    """ln1 and ln2 must be two modules: the same parameters in both after distinct values were loaded (one
    module under two names) would make the composition below agree with a block that uses one norm twice.
    A LayerNorm without registered parameters cannot be told from the other; that is Part 1's to mark."""
    first, second = parts["ln1"].named_parameters(), parts["ln2"].named_parameters()
    if first and first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first):
        C.fail(f"{block.label}: its ln1 and ln2 hold the same parameters after different values were loaded "
               "into them: one LayerNorm under two names (self.ln2 = self.ln1?), so the block's wiring cannot be "
               "judged on your own parts; give each sublayer its own LayerNorm")


def _from_your_parts(parts, x, norm_first, causal):
    """The block as the trusted side wires it from the student's own ln1, ln2, attn and ffn (as the student's
    block holds them), in the asked norm order, and the same parts wired in the other order: the wiring the
    check must be able to tell apart.  Run inside OwnParts.compose: a piece that raises fails there."""
    def run(name, t):
        """The part's output, and t as the part left it: a part that changes its input in place changes the
        block's residual too, and that is the part's mistake, judged (and charged) in its own Part."""
        module = parts[name]
        what = f"your {module.label} on the block's intermediate values ({C.describe_value(x.dtype)})"
        with C.student_code(f"running {what}"):
            value, left, _ = module.handle.forward_inputs(t, **({"causal": causal} if name == "attn" else {}))
        return (C.expect_tensor(value, what=what, shape=t.shape, dtype=x.dtype),
                C.expect_tensor(left[0].value, what=f"the input {what} left", shape=t.shape, dtype=x.dtype))

    def pre_norm():  # x + attn(ln1(x)) adds the x that ln1 and attn left, as Python evaluates it
        normed, x_left = run("ln1", x)
        attended, _ = run("attn", normed)
        y = x_left + attended
        normed, y_left = run("ln2", y)
        return y_left + run("ffn", normed)[0]

    def post_norm():
        attended, x_left = run("attn", x)
        y, _ = run("ln1", x_left + attended)
        fed, y_left = run("ffn", y)
        return run("ln2", y_left + fed)[0]

    return (pre_norm(), post_norm()) if norm_first else (post_norm(), pre_norm())


def test_block_is_right_on_your_own_parts(student):
    """TransformerBlock's own logic, judged on the student's own parts (no points of its own: when it passes
    and Part 1, 2 or 3 lost points, this part's failed checks are carried forward from there).  Its output
    equals the trusted side's residual connections and norm order around the block's own ln1, ln2, attn and
    ffn, as the block holds them after the test's weights were loaded wherever their names match (float64,
    both norm orders, causal and not; and seq_len == d_model in float32).  A setting where one of those parts raises is
    Part 1's, 2's or 3's failure: skipped, if the block fails there too; the check fails as "cannot be judged"
    only when no setting could be judged, or the parts are too degenerate to tell the norm orders apart
    anywhere (C.OwnParts).  What it cannot tell apart: which of ln1 and ln2 each sublayer uses, when the
    student's LayerNorm registers no parameters (both then hold the same values, their own)."""
    own = C.OwnParts("your TransformerBlock")
    for i, (d, h, d_ff, b, s, dtype) in enumerate(OWN_CONFIGS):
        state = block_state("", d, d_ff, seed=3000 + 100 * i, dtype=dtype)
        x = C.randn(b, s, d, seed=3005 + 100 * i, dtype=dtype, std=1.5)
        for norm_first in (False, True):
            block, parts = _your_block(student, d, h, d_ff, norm_first, state, 3010 + 100 * i, dtype)
            if i == 0 and not norm_first:
                _expect_distinct_norms(block, parts)
            for causal in (False, True):
                label = f"{block.label} forward (causal={causal}, x {C.describe_value(x)})"
                composed = own.compose(label, lambda: _from_your_parts(parts, x, norm_first, causal))
                if composed is None:
                    own.expect_fails_too(label, lambda: block(x, causal=causal))
                    continue
                expected, other_order = composed
                atol = C.composition_tolerance(expected, dtype)
                C.assert_close(block(x, causal=causal), expected, atol=atol, dtype=dtype,
                               what=f"{label} against the same wiring of its own ln1, ln2, attn and ffn",
                               inputs={"x": x, "causal": causal, "weights": "random, LayerNorm weights/biases included"},
                               mistakes=[(f"your output matches the {'post' if norm_first else 'pre'}-norm wiring "
                                          f"of your parts, but norm_first={norm_first} asks for "
                                          f"{'pre' if norm_first else 'post'}-norm", other_order)])
                own.judged(label, discriminating=not C.is_close(other_order, expected, atol=100 * atol),
                           degenerate="your LayerNorm and MultiHeadAttention give outputs too degenerate to tell "
                                      "the two norm orders apart")
    own.finish()


def test_block_forward_leaves_its_input_alone(student):
    """TransformerBlock's forward leaves the tensor x it is given as it was (values, dtype, shape,
    requires_grad, .grad), for both norm orders (C.forward_leaving_inputs, causal, on the constructor's
    weights): a residual added in place (x += self.attn(...)) returns the right output and changes the
    caller's x, which the next block of a stack, or a loss, may still use."""
    d, h, d_ff, b, s = CONFIGS[0]
    x = C.randn(b, s, d, seed=3505, dtype=F32)
    for norm_first in (False, True):
        module = C.new(student, "TransformerBlock", d, h, d_ff, norm_first=norm_first)
        C.expect_tensor(C.forward_leaving_inputs(module, x, names=("x",), causal=True),
                        what=f"{module.label} forward (causal=True)", inputs={"x": x, "causal": True},
                        shape=x.shape, dtype=F32)
