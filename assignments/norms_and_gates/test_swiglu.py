"""Part `swiglu` (50 points): the `SwiGLU` feed-forward module, down_proj(silu(gate_proj(x)) * up_proj(x)).

The reference is built in this trusted process from torch ops on the loaded weights: the three matrix
products and `F.silu`, evaluated in float64 and float32 (autograder.judging.checks.reference_tolerance: 30x
the reference's own float32 error plus 16 ulps of the output's largest magnitude).

Which input amplifies which bug:
  * random weights with gain 2 on the gate and up projections: pre-activations of order 2, where SiLU, GELU,
    ReLU and the sigmoid differ by tenths, and silu(gate) * up differs from gate * silu(up).
  * d_model = 8, d_ff = 12: a projection of the wrong shape fails the parameter check, naming it, and the
    gate and up weights are different matrices, so using one for both, or swapping them, shows.
  * random weights everywhere, loaded under the contract's names: a bias the module adds (even one
    initialised to zeros) is an unexpected parameter, so the loaded state does not fit.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.judging import checks as C

F32, F64 = torch.float32, torch.float64
NAMES = ("gate_proj", "up_proj", "down_proj")
ADVICE = ("Create self.gate_proj = nn.Linear(d_model, d_ff, bias=False), self.up_proj = nn.Linear(d_model, d_ff, "
          "bias=False) and self.down_proj = nn.Linear(d_ff, d_model, bias=False).")


def _state(d_model, d_ff, *, seed, dtype):
    state = {}
    for i, (name, out_f, in_f, gain) in enumerate([("gate_proj", d_ff, d_model, 2.0), ("up_proj", d_ff, d_model, 2.0),
                                                   ("down_proj", d_model, d_ff, 1.0)]):
        state.update(C.linear_state(f"{name}.", out_f, in_f, seed=seed + 10 * i, dtype=dtype, bias=False, gain=gain))
    return state


def _parts(x, state, dt):
    gate = x.to(dt) @ state["gate_proj.weight"].to(dt).T
    up = x.to(dt) @ state["up_proj.weight"].to(dt).T
    return gate, up, state["down_proj.weight"].to(dt)


def _reference(x, state):
    def forward(dt):
        gate, up, down = _parts(x, state, dt)
        return (F.silu(gate) * up) @ down.T
    return forward


def _mistakes(x, state):
    """Outputs of known-buggy versions, computed in float64 on the trusted side."""
    gate, up, down = _parts(x, state, F64)
    return {
        "your output matches silu applied to the up projection instead of the gate: silu(gate_proj(x)) * "
        "up_proj(x)": (gate * F.silu(up)) @ down.T,
        "your output matches GELU instead of SiLU on the gate: SwiGLU uses silu(z) = z * sigmoid(z)":
            (F.gelu(gate) * up) @ down.T,
        "your output matches sigmoid(gate) * up (the original GLU): SiLU multiplies the sigmoid by its input, "
        "silu(z) = z * sigmoid(z)": (torch.sigmoid(gate) * up) @ down.T,
        "your output matches ReLU instead of SiLU on the gate: use F.silu": (F.relu(gate) * up) @ down.T,
        "your output matches silu(gate) without the up projection: multiply it by up_proj(x)":
            F.silu(gate) @ down.T,
        "your output matches the gate and up projections used the other way round: the SiLU goes on "
        "gate_proj(x), the plain values come from up_proj(x)": (F.silu(up) * gate) @ down.T,
        "your output matches silu(gate + up), a sum instead of the product: multiply silu(gate) by up":
            F.silu(gate + up) @ down.T,
    }


def _loaded(student, d_model, d_ff, dtype, seed):
    module = C.new(student, "SwiGLU", d_model, d_ff)
    if dtype == F64:
        module.to(F64)
    state = _state(d_model, d_ff, seed=seed, dtype=dtype)
    module.load_weights(state)
    return module, state


def test_swiglu_parameter_names_and_shapes(student):
    """SwiGLU(d_model, d_ff) has exactly gate_proj.weight and up_proj.weight [d_ff, d_model] and
    down_proj.weight [d_model, d_ff]: three projections without bias.  Buffers are fine."""
    params = C.new(student, "SwiGLU", 8, 12).named_parameters()
    C.expect_parameters(params, {"gate_proj.weight": (12, 8), "up_proj.weight": (12, 8), "down_proj.weight": (8, 12)},
                        what="SwiGLU(8, 12)", advice=ADVICE)


def test_swiglu_loads_random_state_dict(student):
    """A random state_dict under the contract's names loads into SwiGLU(d_model, d_ff), whose parameters then
    hold exactly the loaded values (no bias may be left over)."""
    _loaded(student, 8, 12, F32, 100)


def test_swiglu_output_shape_and_dtype(student):
    """SwiGLU's forward returns a tensor with the shape and dtype of x ([2, 5, 8] and [3, 8], float32 and
    float64)."""
    for i, (shape, dtype) in enumerate([((2, 5, 8), F32), ((3, 8), F64)]):
        module, _ = _loaded(student, 8, 12, dtype, 200 + 50 * i)
        x = C.randn(*shape, seed=210 + 50 * i, dtype=dtype)
        C.expect_tensor(module(x), what=f"{module.label} forward", inputs={"x": x}, shape=shape, dtype=dtype)


def test_swiglu_matches_the_reference(student):
    """SwiGLU(8, 12) with loaded random weights computes down_proj(silu(gate_proj(x)) * up_proj(x)), in float32
    and in float64 after .to(torch.float64)."""
    for i, (shape, dtype) in enumerate([((2, 5, 8), F32), ((1, 3, 8), F64)]):
        module, state = _loaded(student, 8, 12, dtype, 300 + 50 * i)
        x = C.randn(*shape, seed=310 + 50 * i, dtype=dtype)
        expected, atol = C.reference_tolerance(_reference(x, state), dtype)
        C.assert_close(module(x), expected, what=f"{module.label} forward", atol=atol, dtype=dtype,
                       mistakes=_mistakes(x, state), inputs={"x": x, "weights": "random, no bias"})


def test_swiglu_wider_hidden_layer(student):
    """SwiGLU(6, 16) (d_ff = 8/3 d_model, rounded up as LLaMA does) matches the reference on a 2-D input."""
    module, state = _loaded(student, 6, 16, F64, 400)
    x = C.randn(7, 6, seed=410, dtype=F64, std=1.5)
    expected, atol = C.reference_tolerance(_reference(x, state), F64)
    C.assert_close(module(x), expected, what=f"{module.label} forward", atol=atol, dtype=F64,
                   mistakes=_mistakes(x, state), inputs={"x": x, "input std": 1.5, "weights": "random, no bias"})


def test_swiglu_works_position_by_position(student):
    """SwiGLU treats each position alone: the output for a batch equals the outputs for its rows one at a time
    (a reduction or a mix across positions fails)."""
    module, state = _loaded(student, 8, 12, F64, 500)
    x = C.randn(2, 4, 8, seed=510, dtype=F64)
    whole = C.expect_tensor(module(x), what=f"{module.label} forward", inputs={"x": x}, shape=(2, 4, 8), dtype=F64)
    row = C.expect_tensor(module(x[1:2, 2:3]), what=f"{module.label} forward", inputs={"x": x[1:2, 2:3]},
                          shape=(1, 1, 8), dtype=F64)
    expected, atol = C.reference_tolerance(_reference(x[1:2, 2:3], state), F64)
    C.assert_close(row, expected, what=f"{module.label} forward on a single position", atol=atol, dtype=F64,
                   mistakes=_mistakes(x[1:2, 2:3], state), inputs={"x": x[1:2, 2:3]})
    C.assert_close(whole[1:2, 2:3], row, what=f"{module.label} forward: position (1, 2) inside a batch against "
                   "the same position alone", atol=atol, inputs={"x": x})


def test_swiglu_gradients_match_the_reference(student):
    """Back-propagating through SwiGLU gives the same gradient with respect to x as the reference (float64)."""
    module, state = _loaded(student, 8, 12, F64, 600)
    x = C.randn(2, 3, 8, seed=610, dtype=F64)
    cots = [C.randn(2, 3, 8, seed=620 + i, dtype=F64) for i in range(2)]
    _, grads = module.vjp([x], {}, cots)

    def reference(dt):
        leaf = x.to(dt).requires_grad_()
        out = _reference(leaf, state)(dt)
        return torch.cat([torch.autograd.grad((out * c.to(dt)).sum(), leaf, retain_graph=True)[0].flatten()
                          for c in cots])

    expected, atol = C.reference_tolerance(reference, F64)
    if not isinstance(grads, list) or len(grads) != len(cots):
        C.fail(f"gradient of {module.label} forward: could not back-propagate through your code")
    flat = []
    for gs in grads:
        g = gs[0] if isinstance(gs, (list, tuple)) and gs else None
        if g is None:
            C.fail(f"gradient of {module.label} forward with respect to x: your output does not depend on x "
                   f"(no gradient). Is something detached?")
        flat.append(C.expect_tensor(g, what=f"gradient of {module.label} forward with respect to x",
                                    shape=x.shape).flatten())
    C.assert_close(torch.cat(flat), expected, what=f"gradient of {module.label} forward with respect to x",
                   inputs={"x": x, "weights": "random, no bias"}, atol=atol)
