"""Part `norm_placement` (5 points): `layer_grad_norms(blocks, x, target) -> list[float]`.

The checks pass stacks of the student's own TransformerBlock (built with C.new, random weights loaded, LayerNorm
weights and biases included) and compute the expected norms live with torch.nn.TransformerEncoderLayer holding
the same weights (norm_first=False and True, dropout 0, relu): run x through the layers, loss = (output *
target).sum(), and take the norm of the loss's gradient with respect to each layer's input.  The reference runs
in float64 and float32 on the same weights; allowed absolute error = 30 x the observed float32 error + 16 ulps
of the largest norm (autograder.judging.checks.reference_tolerance).

The part measures the student's blocks, so it is built on Parts 1 to 4.  The own-parts check judges the
function on the student's own blocks in float64 (and once in float32, seq_len == d_model), holding the test's
weights wherever their parameter names fit and random ones under the others (so misnamed parameters, which the
value checks cannot load, do not keep it from judging): the trusted side runs the same blocks forward,
back-propagates the target through them block by block (vjp requests) and compares the norms it finds with the
function's.  Both value checks compare end to end, so a mistake in Parts 1-4 fails both; when the own-parts
check passes, it costs the end-to-end share of the part (rubric.toml, 5 % by default).

The blocks are the caller's: afterwards they must hold the same values, buffers, requires_grad flags and
training modes (autograder.judging.checks.untouched); .grad, which a backward pass fills, is not looked at.

Which input amplifies which bug: random LayerNorm weights keep output.sum() from having a zero gradient, so a
loss of output.sum() gives other (nonzero) values; stacks of 3 and 4 blocks make a reversed list and a list of
another length visible; the norms of the activations and of the parameters' gradients are of another size.
"""
from __future__ import annotations


import torch
import torch.nn as nn

from autograder.judging import checks as C

from .states import block_state, block_state_to_torch

F32, F64 = torch.float32, torch.float64
D, H, D_FF, B, S = 16, 4, 32, 2, 5


def _torch_layer(state, norm_first, dtype):
    layer = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=norm_first, dtype=dtype)
    layer.load_state_dict(block_state_to_torch(C.cast_floats(state, dtype)), strict=True)
    return layer.train()  # training mode (dropout is 0): the plain, non-fused code path


def _states(depth, seed, dtype):
    return [block_state("", D, D_FF, seed=seed + 100 * i, dtype=dtype, attn_gain=1.0) for i in range(depth)]


def _stack(student, states, norm_first, dtype=F32):
    blocks = []
    for state in states:
        block = C.new(student, "TransformerBlock", D, H, D_FF, norm_first=norm_first)
        if dtype != F32:
            block.to(dtype)
        block.load_weights(state)
        blocks.append(block)
    return blocks


def _torch_norms(states, x, target, norm_first, dt, *, loss="target", of="input"):
    """Per-layer norms through torch layers: of the loss's gradient at each layer's input (the recipe), or the
    known mistakes: of="params" (the gradient of each layer's parameters), "inputs" / "outputs" (the activations
    themselves), loss="sum" (output.sum())."""
    layers = [_torch_layer(st, norm_first, dt) for st in states]
    h = x.to(dt).requires_grad_()
    inputs, outputs = [], []
    for layer in layers:
        inputs.append(h)
        h = layer(h)
        outputs.append(h)
    if of in ("inputs", "outputs"):
        return torch.stack([t.detach().norm() for t in (inputs if of == "inputs" else outputs)])
    total = (h * target.to(dt)).sum() if loss == "target" else h.sum()
    if of == "params":
        params = [list(layer.parameters()) for layer in layers]
        grads = torch.autograd.grad(total, [p for ps in params for p in ps])
        flat, norms = iter(grads), []
        for ps in params:
            norms.append(torch.cat([next(flat).flatten() for _ in ps]).norm())
        return torch.stack(norms)
    return torch.stack([g.norm() for g in torch.autograd.grad(total, inputs)])


@C.once
def _expected(states, x, target, norm_first):
    return C.reference_tolerance(lambda dt: _torch_norms(states, x, target, norm_first, dt), F32)


@C.once
def _mistakes(states, x, target, norm_first):
    right = _torch_norms(states, x, target, norm_first, F64)
    return [
        ("your values match the loss output.sum(): use (output * target).sum()",
         _torch_norms(states, x, target, norm_first, F64, loss="sum")),
        ("your list is in reverse order: its first entry must belong to the first block (the gradient at x)",
         right.flip(0)),
        ("your values match the norms of the gradients with respect to each block's PARAMETERS: take the "
         "gradient with respect to each block's input", _torch_norms(states, x, target, norm_first, F64, of="params")),
        ("your values match the norms of the blocks' outputs (the activations): take the norm of the loss's "
         "gradient at each block's input", _torch_norms(states, x, target, norm_first, F64, of="outputs")),
        ("your values match the norms of the blocks' inputs (the activations): take the norm of the loss's "
         "gradient at each block's input", _torch_norms(states, x, target, norm_first, F64, of="inputs")),
    ]


def _norms_of(student, blocks, x, target, what):
    """The student's list, as a float64 tensor of len(blocks) entries (anything else fails)."""
    value = C.call(student, "layer_grad_norms", blocks, x, target)
    if type(value) not in (list, tuple):
        C.fail(f"{what}: expected a list of Python floats, got {C.kind_of(value)}")
    if len(value) != len(blocks):
        C.fail(f"{what}: expected one norm per block ({len(blocks)}), got a list of {len(value)}")
    numbers = []
    for i, v in enumerate(value):
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            v = float(v.reshape(()).item())
        if type(v) not in (float, int):
            C.fail(f"{what}: entry {i} is {C.kind_of(v)}, not a number")
        numbers.append(float(v))
    return torch.tensor(numbers, dtype=F64)


def _matches(student, depth, norm_first, seed):
    states = _states(depth, seed, F32)
    x = C.randn(B, S, D, seed=seed + 1, dtype=F32)
    target = C.randn(B, S, D, seed=seed + 2, dtype=F32)
    blocks = _stack(student, states, norm_first)
    what = f"layer_grad_norms of {depth} stacked TransformerBlocks (norm_first={norm_first})"
    got = _norms_of(student, blocks, x, target, what)
    expected, atol = _expected(states, x, target, norm_first)
    C.assert_close(got, expected, what=what, atol=atol, mistakes=_mistakes(states, x, target, norm_first),
                   inputs={"x": x, "target": target, "blocks": f"{depth} x TransformerBlock({D}, {H}, {D_FF}, "
                           f"norm_first={norm_first}), random weights, LayerNorm weights/biases included"})


def test_layer_grad_norms_post_norm_matches_torch(student):
    """layer_grad_norms on 4 post-norm TransformerBlocks with random weights equals the norms of the gradient of
    (output * target).sum() at each layer's input through torch.nn.TransformerEncoderLayer(norm_first=False)
    holding the same weights, in the blocks' order."""
    _matches(student, 4, False, 5000)


def test_layer_grad_norms_pre_norm_matches_torch(student):
    """The same on 3 pre-norm TransformerBlocks against TransformerEncoderLayer(norm_first=True)."""
    _matches(student, 3, True, 5600)


def test_layer_grad_norms_returns_one_float_per_block(student):
    """layer_grad_norms returns a list with one Python float per block (3 blocks here).
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    states = _states(3, 6200, F32)
    value = C.call_leaving_inputs(student, "layer_grad_norms", _stack(student, states, True),
                                  C.randn(B, S, D, seed=6210), C.randn(B, S, D, seed=6211))
    if type(value) is not list or len(value) != 3:
        C.fail(f"layer_grad_norms of 3 blocks: expected a list of 3 Python floats, got {C.kind_of(value)}"
               + (f" of length {len(value)}" if type(value) in (list, tuple) else ""))
    for i, v in enumerate(value):
        C.expect_exact_type(v, float, what=f"layer_grad_norms(...)[{i}]",
                            advice="Convert each norm with .item() (or float(...)).")


# the own-parts check's settings, (depth, norm_first, batch, seq_len, dtype): two in float64, and one with
# seq_len == d_model and batch 1 in float32, where blocks run whose layer norm loses its last axis (no keepdim)
# or whose attention keeps its layers where .to(float64) does not reach them
OWN_SETTINGS = [(3, False, B, S, F64), (2, True, B, S, F64), (2, False, 1, D, F32)]


def _backpropagated_norms(blocks, x, target):
    """The norms of the target's gradient at each block's input, found by running the student's blocks forward
    and back-propagating through them block by block (vjp requests), in the blocks' order."""
    dtype, depth = x.dtype, len(blocks)
    hidden = [x]
    for block in blocks:
        hidden.append(C.expect_tensor(block(hidden[-1]), what=f"{block.label} forward (in a {depth}-block "
                                      f"stack, {C.describe_value(dtype)})", shape=tuple(x.shape), dtype=dtype))
    grad, norms = target, []
    for i in reversed(range(depth)):
        _, grads = blocks[i].vjp([hidden[i]], {}, [grad])
        if not isinstance(grads, list) or len(grads) != 1 or grads[0][0] is None:
            C.fail(f"{blocks[i].label}: no gradient with respect to the input came back (block {i} of the "
                   "stack); is the output detached from the input?")
        grad = C.expect_tensor(grads[0][0], what=f"input gradient of block {i} of the stack", shape=tuple(x.shape))
        norms.append(float(grad.double().norm()))
    return torch.tensor(norms[::-1], dtype=dtype)


def test_layer_grad_norms_is_right_on_your_own_blocks(student):
    """layer_grad_norms' own logic, judged on the student's own blocks (no points of its own: when it passes and
    Part 1, 2, 3 or 4 lost points, this part's failed checks are carried forward from there).  Its norms equal
    those the trusted side finds by running the same blocks (holding the test's weights wherever their parameter
    names fit) forward and back-propagating the target through them block by block (float64, both norm orders; and
    seq_len == d_model in float32).  A setting where the blocks raise is an earlier part's failure: skipped,
    if layer_grad_norms fails there too; the check fails as "cannot be judged" only when no setting could be
    judged (C.OwnParts)."""
    own = C.OwnParts("your layer_grad_norms")
    for index, (depth, norm_first, batch, seq_len, dtype) in enumerate(OWN_SETTINGS):
        seed = 6400 + 100 * index
        # the test's weights loaded wherever the blocks' own parameter names fit them, random ones under the
        # others (module.load_fitting): blocks whose parameters are misnamed (which the other checks cannot
        # load) still judge this function, and on weights that are not the constructor's degenerate ones/zeros
        blocks = []
        for i, state in enumerate(_states(depth, seed, dtype)):
            block = C.new(student, "TransformerBlock", D, H, D_FF, norm_first=norm_first)
            if dtype != F32:
                block.to(dtype)
            block.load_fitting(state, seed=seed + 10 * i)
            blocks.append(block)
        x = C.randn(batch, seq_len, D, seed=seed + 1, dtype=dtype)
        target = C.randn(batch, seq_len, D, seed=seed + 2, dtype=dtype)
        what = (f"layer_grad_norms of {depth} of your blocks (norm_first={norm_first}, x "
                f"{C.describe_value(x)})")
        expected = own.compose(what, lambda: _backpropagated_norms(blocks, x, target))
        if expected is None:
            own.expect_fails_too(what, lambda: _norms_of(student, blocks, x, target, what))
            continue
        got = _norms_of(student, blocks, x, target, what)
        atol = C.composition_tolerance(expected, dtype) * (1e3 if dtype == F64 else 10)
        C.assert_close(got, expected, what=f"{what} against back-propagation through the same blocks",
                       atol=atol, inputs={"x": x, "target": target},
                       mistakes=[("your list is in reverse order: its first entry must belong to the first block",
                                  expected.flip(0))])
        finite = bool(torch.isfinite(expected).all())
        own.judged(what, discriminating=finite and not C.is_close(expected.flip(0), expected, atol=atol),
                   degenerate="your blocks' gradients are not finite" if not finite else
                   "your blocks' gradient norms are the same at every depth, so their order cannot be told")
    own.finish()


def test_layer_grad_norms_leaves_the_blocks_alone(student):
    """layer_grad_norms leaves the blocks it measures as it found them: every parameter's and buffer's values,
    dtype and shape, every parameter's requires_grad and every submodule's training mode (the notebook: no
    requires_grad_(False), no .eval(), no .to(...)).  Filling the parameters' .grad by a backward pass is
    allowed and not looked at."""
    states = _states(3, 6600, F32)
    blocks = _stack(student, states, False)
    before = [C.module_state(block) for block in blocks]
    # a list of numbers first: the state is judged after a call that did its job, not after a bare return
    _norms_of(student, blocks, C.randn(B, S, D, seed=6610), C.randn(B, S, D, seed=6611),
              "layer_grad_norms of 3 stacked TransformerBlocks (norm_first=False)")
    for i, (block, state) in enumerate(zip(blocks, before)):
        C.expect_unchanged(block, state, what=f"block {i} of the stack", where="layer_grad_norms(blocks, x, target)")
