"""Part `rms_norm` (50 points): the `rms_norm` function and the `RMSNorm` module.

References are computed live with torch: `F.rms_norm` and `torch.nn.RMSNorm`, always with an explicit eps
(torch's own default eps is the dtype's machine epsilon; the contract's default is 1e-6, as in LLaMA).

Tolerances (autograder.judging.checks.reference_tolerance): 30x the reference's own float32 error, plus 16 ulps
of the output's largest magnitude.  rsqrt, 1 / sqrt, vector_norm / sqrt(d) and float64 internals all stay
within it; every bug below is off by orders of magnitude more.

Which input amplifies which bug:
  * mean 2, std 1: centring the vector first (the LayerNorm variance) changes the output by tens of percent.
  * std 1e-3 with eps = 1e-2 (mean square 1e-6 << eps): eps outside the sqrt divides by ~0.011 instead of
    ~0.1, an ignored eps by 1e-3.
  * std 1e-3 with the default eps (mean square ~ eps): a default other than 1e-6 changes the output by tens of
    percent.
  * [6, 6] and [6, 6, 6] inputs: reducing over dim -2, or without keepdim, still gives the right shape.
  * random weight everywhere: a weight ignored, or applied to x before normalising (which it then cancels in
    part), is visible.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

F32, F64 = torch.float32, torch.float64
DEFAULT_EPS = 1e-6


def _reference(x, weight, eps):
    return lambda dt: F.rms_norm(x.to(dt), (x.shape[-1],), weight.to(dt), eps)


def _weight(d, seed, dtype):
    return C.randn(d, seed=seed, dtype=dtype, mean=1.0, std=0.5)


def _mistakes(x, weight, eps):
    """Outputs of known-buggy versions, computed in float64 on the trusted side."""
    x, w = x.double(), weight.double()
    ms = x.pow(2).mean(-1, keepdim=True)
    xc = x - x.mean(-1, keepdim=True)
    var = xc.pow(2).mean(-1, keepdim=True)
    out = {
        "your output matches x / (sqrt(mean(x^2)) + eps): eps belongs inside the square root, "
        "x / sqrt(mean(x^2) + eps)": x / (ms.sqrt() + eps) * w,
        "your output matches RMSNorm without eps: add eps to the mean of the squares before the square root":
            x / ms.sqrt() * w,
        "your output matches LayerNorm's normalisation (the mean subtracted, the variance used): RMSNorm "
        "neither centres x nor uses the variance; divide x by sqrt(mean(x^2) + eps)": xc / torch.sqrt(var + eps) * w,
        "your output matches x divided by sqrt(variance + eps): RMSNorm uses the mean of the squares of x "
        "itself, not of x - mean": x / torch.sqrt(var + eps) * w,
        "your output matches RMSNorm without the weight: multiply the normalised x by weight":
            x / torch.sqrt(ms + eps),
        "your output matches the weight applied before normalising: normalise x first, then multiply by weight":
            (x * w) / torch.sqrt((x * w).pow(2).mean(-1, keepdim=True) + eps),
        "your output matches x / (mean(x^2) + eps), without the square root: divide by sqrt(mean(x^2) + eps)":
            x / (ms + eps) * w,
    }
    if eps != DEFAULT_EPS:
        out[f"your output matches eps = 1e-6 although eps={eps:g} was passed: use the eps argument"] = (
            x / torch.sqrt(ms + DEFAULT_EPS) * w)
    if x.dim() >= 2:
        ms2 = x.pow(2).mean(-2, keepdim=True)
        out["your output matches normalising over dimension -2: normalise over the last dimension (dim=-1), "
            "the d_model features of each position"] = x / torch.sqrt(ms2 + eps) * w
        if x.shape[-2] == x.shape[-1]:  # only then does a mean without keepdim broadcast at all
            out["your output matches a mean computed without keepdim=True, which then broadcasts along the "
                "wrong axis: use keepdim=True"] = x / torch.sqrt(x.pow(2).mean(-1) + eps) * w
    return out


def _check(student, x, weight, *, eps=None, what, note=""):
    e = DEFAULT_EPS if eps is None else eps
    out = C.call(student, "rms_norm", x, weight, **({} if eps is None else {"eps": eps}))
    expected, atol = C.reference_tolerance(_reference(x, weight, e), x.dtype)
    inputs = {"x": x, "weight": weight, "eps": "default" if eps is None else eps}
    if note:
        inputs = C.describe_inputs(inputs) + f" ({note})"
    C.assert_close(out, expected, what=what, inputs=inputs, atol=atol, dtype=x.dtype, mistakes=_mistakes(x, weight, e))


def test_rms_norm_output_shape_and_dtype(student):
    """rms_norm returns a tensor with the same shape and dtype as x (float32 and float64; 2-D to 4-D)."""
    for i, (shape, dtype) in enumerate([((3, 4), F32), ((2, 5, 6), F64), ((2, 3, 4, 5), F32)]):
        x = C.randn(*shape, seed=100 + i, dtype=dtype)
        w = _weight(shape[-1], 200 + i, dtype)
        C.expect_tensor(C.call(student, "rms_norm", x, w), what="rms_norm output", inputs={"x": x, "weight": w},
                        shape=shape, dtype=dtype)


def test_rms_norm_matches_torch_with_random_weight(student):
    """rms_norm matches torch's F.rms_norm for a random weight, inputs whose mean is not zero and an explicitly
    passed eps (float32 and float64, several sizes)."""
    cases = [((2, 5, 6), F32, 1e-5), ((1, 7, 10), F64, 1e-4), ((2, 3, 4, 5), F32, 0.1)]
    for i, (shape, dtype, eps) in enumerate(cases):
        x = C.randn(*shape, seed=300 + i, dtype=dtype, mean=2.0, std=1.0)
        _check(student, x, _weight(shape[-1], 400 + i, dtype), eps=eps, what="rms_norm output")


def test_rms_norm_default_eps_is_1e_6(student):
    """rms_norm uses eps = 1e-6 when no eps is passed (checked on inputs whose mean square is close to 1e-6)."""
    x = C.randn(3, 4, 8, seed=500, dtype=F64, std=1e-3)
    w = _weight(8, 501, F64)
    out = C.call(student, "rms_norm", x, w)
    expected, atol = C.reference_tolerance(_reference(x, w, DEFAULT_EPS), F64)
    ms = x.pow(2).mean(-1, keepdim=True)
    wrong = {f"your output matches eps = {e:g}: the default must be eps=1e-6": x / torch.sqrt(ms + e) * w
             for e in (1e-5, 1e-8, 1e-12, torch.finfo(F64).eps, 0.0)}
    wrong.update(_mistakes(x, w, DEFAULT_EPS))
    C.assert_close(out, expected, what="rms_norm output with the default eps", atol=atol, dtype=F64, mistakes=wrong,
                   inputs={"x": x, "weight": w, "eps": "not passed", "input std": 1e-3})


def test_rms_norm_normalises_last_dim_when_sizes_are_equal(student):
    """rms_norm normalises over the last dimension even when the other sizes equal d_model ([6, 6] and
    [6, 6, 6]), where reducing over the wrong dimension or forgetting keepdim=True keeps the right shape."""
    for i, shape in enumerate([(6, 6), (6, 6, 6)]):
        x = C.randn(*shape, seed=600 + i, dtype=F32, mean=0.3, std=1.5)
        _check(student, x, _weight(6, 700 + i, F32), eps=1e-5, what="rms_norm output")


def test_rms_norm_tiny_inputs_eps_inside_sqrt(student):
    """rms_norm adds eps to the mean of the squares inside the square root: on inputs of standard deviation 1e-3
    with eps = 1e-2 the result must still match F.rms_norm (float32 and float64)."""
    for i, dtype in enumerate([F32, F64]):
        x = C.randn(2, 5, 16, seed=800 + i, dtype=dtype, std=1e-3)
        _check(student, x, _weight(16, 900 + i, dtype), eps=1e-2, what="rms_norm output on a tiny input",
               note="input std 1e-3, mean square much smaller than eps")


def test_rms_norm_gradients_match_torch(student):
    """Back-propagating through rms_norm gives the same gradients for x and weight as F.rms_norm (float64)."""
    x = C.randn(2, 5, 6, seed=1200, dtype=F64, mean=0.5, std=1.5)
    w = _weight(6, 1201, F64)
    cots = [C.randn(2, 5, 6, seed=1203 + i, dtype=F64) for i in range(2)]
    _, grads = C.vjp(student, "rms_norm", [x, w], {"eps": 1e-3}, cots)

    def reference(dt):
        leaves = [t.to(dt).requires_grad_() for t in (x, w)]
        out = F.rms_norm(leaves[0], (6,), leaves[1], 1e-3)
        return torch.cat([torch.cat([g.flatten() for g in torch.autograd.grad((out * c.to(dt)).sum(), leaves,
                                                                              retain_graph=True)])
                          for c in cots])

    expected, atol = C.reference_tolerance(reference, F64)
    if not isinstance(grads, list) or len(grads) != len(cots):
        C.fail("gradients of rms_norm: could not back-propagate through your code")
    flat = []
    for gs in grads:
        for name, g, ref in zip(("x", "weight"), gs, (x, w)):
            if g is None:
                C.fail(f"gradient of rms_norm with respect to {name}: your output does not depend on {name} "
                       f"(no gradient). Is something detached?")
            flat.append(C.expect_tensor(g, what=f"gradient of rms_norm with respect to {name}", shape=ref.shape).flatten())
    C.assert_close(torch.cat(flat), expected, what="gradients of rms_norm with respect to x and weight",
                   inputs={"x": x, "weight": w, "eps": 1e-3}, atol=atol)


def test_RMSNorm_weight_is_ones(student):
    """RMSNorm(d_model) registers exactly one parameter, `weight`, of shape (d_model,), initialised to ones.
    Buffers are not parameters and are fine."""
    params = C.new(student, "RMSNorm", 7).named_parameters()
    C.expect_parameters(params, {"weight": (7,)}, what="RMSNorm(7)",
                        advice="Register self.weight = nn.Parameter(torch.ones(d_model)); RMSNorm has no bias.")
    if not torch.equal(C.expect_tensor(params["weight"], what="RMSNorm(7).weight", dtype=F32), torch.ones(7)):
        C.fail("RMSNorm(7).weight: must be initialised to ones")


def test_RMSNorm_state_dict_is_compatible_with_torch(student):
    """The parameters of RMSNorm(d_model) load (strictly) into torch.nn.RMSNorm(d_model), and a random
    torch.nn.RMSNorm state_dict loads into RMSNorm(d_model), whose weight then holds exactly the loaded values."""
    module = C.new(student, "RMSNorm", 7)
    params = module.named_parameters()
    problem = None
    try:
        nn.RMSNorm(7).load_state_dict(params, strict=True)
    except (RuntimeError, TypeError, KeyError, AttributeError) as exc:
        problem = " ".join(str(exc).split())[:400] or type(exc).__name__
    if problem is not None:  # failing outside the except block keeps the torch traceback out of the message
        C.fail(f"the parameters of RMSNorm(7) do not load into torch.nn.RMSNorm(7): {problem} "
               f"(parameters: {sorted(params)})")
    module.load_weights({"weight": _weight(7, 1300, F32)})


def test_RMSNorm_forward_matches_torch_RMSNorm(student):
    """RMSNorm(d_model) and RMSNorm(d_model, eps) with a loaded random weight compute the same as
    torch.nn.RMSNorm with that eps (default 1e-6; float32, and float64 after .to(torch.float64))."""
    d = 9
    for i, (eps, dtype) in enumerate([(None, F32), (1e-3, F32), (None, F64)]):
        module = C.new(student, "RMSNorm", d, **({} if eps is None else {"eps": eps}))
        if dtype == F64:
            module.to(F64)
        weight = _weight(d, 1400 + 10 * i, dtype)
        module.load_weights({"weight": weight})
        x = C.randn(2, 4, d, seed=1405 + 10 * i, dtype=dtype, std=1e-3)
        e = DEFAULT_EPS if eps is None else eps

        def reference(dt, x=x, weight=weight, e=e):
            ref = nn.RMSNorm(d, eps=e).to(dt)
            ref.load_state_dict({"weight": weight.to(dt)})
            with torch.no_grad():
                return ref(x.to(dt))

        expected, atol = C.reference_tolerance(reference, dtype)
        ms = x.double().pow(2).mean(-1, keepdim=True)
        advice = "the default must be 1e-6" if eps is None else "use the eps passed to the constructor"
        wrong = {f"your output matches eps = {w_eps:g}: {advice}": x.double() / torch.sqrt(ms + w_eps) * weight.double()
                 for w_eps in (1e-3, 1e-5, 1e-6, 1e-8, 0.0) if w_eps != e}
        wrong.update(_mistakes(x, weight, e))
        C.assert_close(module(x), expected, what=f"{module.label} forward", atol=atol, dtype=dtype, mistakes=wrong,
                       inputs={"x": x, "eps": "default" if eps is None else eps, "input std": 1e-3, "weight": "random"})
