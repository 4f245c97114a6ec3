"""Part `layer_norm` (20 points): the `layer_norm` function and the `LayerNorm` module.

References are computed live with torch: `F.layer_norm` and `torch.nn.LayerNorm`.

Tolerances (see autograder.judging.checks.reference_tolerance): the reference is evaluated in float64 and float32 on
the same input values; the allowed absolute error is 30x the observed float32 error of the reference (scaled
by eps64/eps32 = 2**-29 when the student's output is float64) plus 16 ulps of the output's largest
magnitude.  Honest float32 implementations (two-pass mean/variance, var_mean, rsqrt, float64 internals) have
errors of the same order as torch's own float32 kernel; the bugs below are off by orders of magnitude more.

Which input amplifies which bug:
  * d_model = 512 in float64: the unbiased variance rescales the output by sqrt((d-1)/d), a relative error of
    ~1e-3, against a float64 tolerance of ~1e-13.
  * std 1e-3 with eps = 1e-2 (variance 1e-6 << eps): eps outside the sqrt divides by ~0.011 instead of ~0.1
    (9x), an ignored eps by 1e-3 (100x).
  * std 3e-3 with the default eps (variance ~1e-5 ~ eps): a default other than 1e-5 changes the output by
    tens of percent.
  * mean 1e3, std 1 in float32: E[x^2] - E[x]^2 cancels catastrophically (E[x^2] ~ 1e6, float32 spacing
    ~0.06 there), while subtracting the mean first is accurate to ~1e-4.
  * seq_len == d_model (2-D [6, 6], [1, 6, 6], [6, 6, 6]): reducing over the wrong dim, or a mean without
    keepdim (which then broadcasts along the wrong axis), still gives the right shape, so only values tell.
  * random weight and bias everywhere: ignoring or swapping them is visible.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.judging import checks as C

F32, F64 = torch.float32, torch.float64


def _reference(x, weight, bias, eps):
    d = x.shape[-1]
    return lambda dt: F.layer_norm(x.to(dt), (d,), weight.to(dt), bias.to(dt), eps)


def _affine(d, seed, dtype):
    return (C.randn(d, seed=seed, dtype=dtype, mean=1.0, std=0.5), C.randn(d, seed=seed + 1, dtype=dtype, std=0.5))


def _mistakes(x, weight, bias, eps):
    """Outputs of known-buggy versions, computed in float64 on the trusted side."""
    x, w, b = x.double(), weight.double(), bias.double()
    d = x.shape[-1]
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc ** 2).mean(-1, keepdim=True)
    out = {
        "your output matches layer norm with the unbiased variance: use the biased variance (divide by d, not "
        "d - 1), as torch.nn.LayerNorm does": xc / torch.sqrt(xc.pow(2).sum(-1, keepdim=True) / max(d - 1, 1) + eps) * w + b,
        "your output matches (x - mean) / (sqrt(var) + eps): eps belongs inside the square root, "
        "(x - mean) / sqrt(var + eps)": xc / (torch.sqrt(var) + eps) * w + b,
        "your output matches layer norm without eps: add eps to the variance before the square root":
            xc / torch.sqrt(var) * w + b,
        "your output matches layer norm without the affine step: multiply by weight, then add bias":
            xc / torch.sqrt(var + eps),
        "your output matches layer norm with weight and bias swapped": xc / torch.sqrt(var + eps) * b + w,
        "your output matches (x - mean) / sqrt(std + eps): divide by the square root of the variance, not of "
        "the standard deviation": xc / torch.sqrt(torch.sqrt(var) + eps) * w + b,
        "your output matches (x - mean) / (var + eps), without the square root: divide by sqrt(var + eps)":
            xc / (var + eps) * w + b,
    }
    if eps != 1e-5:
        out[f"your output matches eps = 1e-5 although eps={eps:g} was passed: use the eps argument"] = (
            xc / torch.sqrt(var + 1e-5) * w + b)
    if x.dim() >= 2:
        m2 = x.mean(-2, keepdim=True)
        v2 = ((x - m2) ** 2).mean(-2, keepdim=True)
        out["your output matches normalising over dimension -2: normalise over the last dimension "
            "(dim=-1), i.e. over the d_model features of each position"] = (x - m2) / torch.sqrt(v2 + eps) * w + b
        try:
            m3 = x.mean(-1)
            v3 = ((x - m3) ** 2).mean(-1)
            wrong = (x - m3) / torch.sqrt(v3 + eps) * w + b
            if wrong.shape == x.shape:
                out["your output matches a mean/variance computed without keepdim=True, which then broadcasts "
                    "along the wrong axis: use keepdim=True"] = wrong
        except RuntimeError:
            pass
    return out


def _check(student, x, weight, bias, *, eps=None, what, factor=C.DEFAULT_FACTOR, note=""):
    kwargs = {} if eps is None else {"eps": eps}
    out = C.call(student, "layer_norm", x, weight, bias, **kwargs)
    expected, atol = C.reference_tolerance(_reference(x, weight, bias, 1e-5 if eps is None else eps), x.dtype,
                                           factor=factor)
    inputs = {"x": x, "weight": weight, "bias": bias, **({"eps": eps} if eps is not None else {"eps": "default"})}
    if note:
        inputs = C.describe_inputs(inputs) + f" ({note})"
    C.assert_close(out, expected, what=what, inputs=inputs, atol=atol, dtype=x.dtype,
                   mistakes=_mistakes(x, weight, bias, 1e-5 if eps is None else eps))


def test_layer_norm_output_shape_and_dtype(student):
    """layer_norm returns a tensor with the same shape and dtype as x (float32 and float64; 2-D, 3-D and
    4-D inputs, batch size 1, odd sizes).
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    for i, (shape, dtype) in enumerate([((3, 4), F32), ((2, 5, 6), F32), ((1, 1, 7), F32), ((2, 5, 6), F64),
                                        ((2, 3, 4, 5), F32)]):
        x = C.randn(*shape, seed=100 + i, dtype=dtype)
        w, b = _affine(shape[-1], 200 + i, dtype)
        out = C.call_leaving_inputs(student, "layer_norm", x, w, b)
        C.expect_tensor(out, what="layer_norm output", inputs={"x": x, "weight": w, "bias": b},
                        shape=shape, dtype=dtype)


def test_layer_norm_matches_torch_with_random_weight_and_bias(student):
    """layer_norm matches torch's F.layer_norm for random weight and bias and an explicitly passed eps
    (float32 and float64, several sizes)."""
    cases = [((2, 5, 6), F32, 1e-3), ((1, 7, 10), F32, 1e-5), ((3, 4), F64, 1e-4), ((2, 3, 4, 5), F32, 0.1)]
    for i, (shape, dtype, eps) in enumerate(cases):
        x = C.randn(*shape, seed=300 + i, dtype=dtype, mean=0.5, std=2.0)
        w, b = _affine(shape[-1], 400 + i, dtype)
        _check(student, x, w, b, eps=eps, what="layer_norm output")


def test_layer_norm_default_eps_is_1e_5(student):
    """layer_norm uses eps = 1e-5 when no eps is passed (checked on inputs whose variance is close to 1e-5)."""
    x = C.randn(3, 4, 8, seed=500, dtype=F64, std=3e-3)
    w, b = _affine(8, 501, F64)
    out = C.call(student, "layer_norm", x, w, b)
    expected, atol = C.reference_tolerance(_reference(x, w, b, 1e-5), F64)
    xc = x - x.mean(-1, keepdim=True)
    var = xc.pow(2).mean(-1, keepdim=True)
    wrong = {f"your output matches eps = {e:g}: the default must be eps=1e-5": xc / torch.sqrt(var + e) * w + b
             for e in (1e-3, 1e-4, 1e-6, 1e-8, 1e-12, 0.0)}
    wrong.update(_mistakes(x, w, b, 1e-5))
    C.assert_close(out, expected, what="layer_norm output with the default eps",
                   inputs={"x": x, "weight": w, "bias": b, "eps": "not passed", "input std": 3e-3},
                   atol=atol, dtype=F64, mistakes=wrong)


def test_layer_norm_normalises_last_dim_when_seq_len_equals_d_model(student):
    """layer_norm normalises over the last dimension even when the other sizes equal d_model (inputs [6, 6],
    [1, 6, 6] and [6, 6, 6]), where reducing over the wrong dimension or forgetting keepdim=True still gives
    the right shape."""
    for i, shape in enumerate([(6, 6), (1, 6, 6), (6, 6, 6)]):
        x = C.randn(*shape, seed=600 + i, dtype=F32, mean=0.3, std=1.5)
        w, b = _affine(6, 700 + i, F32)
        _check(student, x, w, b, eps=1e-5, what="layer_norm output")


def test_layer_norm_tiny_variance_eps_inside_sqrt(student):
    """layer_norm adds eps to the variance inside the square root: on inputs with standard deviation 1e-3
    and eps = 1e-2 the result must still match F.layer_norm (float32 and float64)."""
    for i, dtype in enumerate([F32, F64]):
        x = C.randn(2, 5, 16, seed=800 + i, dtype=dtype, mean=0.5, std=1e-3)
        w, b = _affine(16, 900 + i, dtype)
        _check(student, x, w, b, eps=1e-2, what="layer_norm output on a tiny-variance input",
               note="input std 1e-3, variance much smaller than eps")


def test_layer_norm_large_mean_float32(student):
    """layer_norm is accurate in float32 when the features have a large mean (mean 1e3, std 1): subtract the
    mean before squaring instead of using E[x^2] - E[x]^2."""
    x = C.randn(4, 6, 64, seed=1000, dtype=F32, mean=1e3, std=1.0)
    w, b = _affine(64, 1001, F32)
    out = C.call(student, "layer_norm", x, w, b, eps=1e-5)
    expected, atol = C.reference_tolerance(_reference(x, w, b, 1e-5), F32)
    # the same values shifted to mean 0 (exact in float32): layer norm is shift-invariant, so an implementation
    # that is right there but wrong here loses precision to the large mean
    centred = x - 1e3
    out_centred = C.call(student, "layer_norm", centred, w, b, eps=1e-5)
    ref_centred, atol_centred = C.reference_tolerance(_reference(centred, w, b, 1e-5), F32)
    cancellation = ("on the same values shifted to mean 0 your output is right: in float32, E[x^2] - E[x]^2 "
                    "cancels catastrophically when the mean is large; use the mean of (x - mean)^2")
    hints = [cancellation] if C.is_close(out_centred, ref_centred, atol=atol_centred) else []
    C.assert_close(out, expected, what="layer_norm output on a large-mean float32 input",
                   inputs={"x": x, "weight": w, "bias": b, "eps": 1e-5, "input mean": 1e3, "input std": 1.0},
                   atol=atol, dtype=F32, mistakes=_mistakes(x, w, b, 1e-5), hints=hints,
                   nonfinite_hint="the variance came out negative or zero: in float32, E[x^2] - E[x]^2 cancels "
                                  "catastrophically when the mean is large; use the mean of (x - mean)^2")


def test_layer_norm_biased_variance_large_d_model(student):
    """layer_norm uses the biased variance (divide by d): checked in float64 with d_model = 512, where
    dividing by d - 1 changes the output by about 0.1 percent."""
    x = C.randn(2, 3, 512, seed=1100, dtype=F64, mean=-0.7, std=1.3)
    w, b = _affine(512, 1101, F64)
    _check(student, x, w, b, eps=1e-5, what="layer_norm output (float64, d_model=512)")


def test_layer_norm_gradients_match_torch(student):
    """Back-propagating through layer_norm gives the same gradients for x, weight and bias as
    F.layer_norm (float64)."""
    x = C.randn(2, 5, 6, seed=1200, dtype=F64, mean=0.2, std=1.5)
    w, b = _affine(6, 1201, F64)
    cots = [C.randn(2, 5, 6, seed=1203 + i, dtype=F64) for i in range(2)]
    _, grads = C.vjp(student, "layer_norm", [x, w, b], {"eps": 1e-3}, cots)

    def reference(dt):
        leaves = [t.to(dt).requires_grad_() for t in (x, w, b)]
        out = F.layer_norm(leaves[0], (6,), leaves[1], leaves[2], 1e-3)
        return torch.cat([torch.cat([g.flatten() for g in torch.autograd.grad((out * c.to(dt)).sum(), leaves,
                                                                              retain_graph=True)])
                          for c in cots])

    expected, atol = C.reference_tolerance(reference, F64)
    names = ("x", "weight", "bias")
    if not isinstance(grads, list) or len(grads) != len(cots):
        C.fail("gradients of layer_norm: could not back-propagate through your code")
    flat = []
    for gs in grads:
        for name, g, ref in zip(names, gs, (x, w, b)):
            if g is None:
                C.fail(f"gradient of layer_norm with respect to {name}: your output does not depend on {name} "
                       f"(no gradient). Is something detached?")
            C.expect_tensor(g, what=f"gradient of layer_norm with respect to {name}", shape=ref.shape)
            flat.append(g.flatten())
    C.assert_close(torch.cat(flat), expected, what="gradients of layer_norm with respect to x, weight and bias",
                   inputs={"x": x, "weight": w, "bias": b, "eps": 1e-3}, atol=atol)


def test_LayerNorm_parameters_are_ones_and_zeros(student):
    """LayerNorm(d_model) registers exactly two parameters, `weight` (initialised to ones) and `bias` (zeros),
    both of shape (d_model,).  Buffers are not parameters and are fine."""
    module = C.new(student, "LayerNorm", 7)
    params = module.named_parameters()
    if set(params) != {"weight", "bias"}:
        C.fail(f"LayerNorm(7) parameters: expected exactly ['bias', 'weight'], got {sorted(params)}. Register "
               f"them as nn.Parameter attributes named weight and bias.")
    for name, value in (("weight", torch.ones(7)), ("bias", torch.zeros(7))):
        p = C.expect_tensor(params[name], what=f"LayerNorm(7).{name}", shape=(7,), dtype=F32)
        if not torch.equal(p, value):
            C.fail(f"LayerNorm(7).{name}: must be initialised to {'ones' if name == 'weight' else 'zeros'}")


def test_LayerNorm_state_dict_is_compatible_with_torch(student):
    """The parameters of LayerNorm(d_model) load (strictly) into torch.nn.LayerNorm(d_model), and a random
    torch.nn.LayerNorm state_dict loads into LayerNorm(d_model) (extra buffers are fine and keep their
    values), whose parameters then hold exactly the loaded values."""
    module = C.new(student, "LayerNorm", 7)
    params = module.named_parameters()
    problem = None
    try:
        nn.LayerNorm(7).load_state_dict(params, strict=True)
    except (RuntimeError, TypeError, KeyError, AttributeError) as exc:
        problem = " ".join(str(exc).split())[:400] or type(exc).__name__
    if problem is not None:  # failing outside the except block keeps the torch traceback out of the message
        C.fail(f"the parameters of LayerNorm(7) do not load into torch.nn.LayerNorm(7): {problem} "
               f"(parameters: {sorted(params)})")
    module.load_weights(C.layer_norm_state("", 7, seed=1300, dtype=F32))


def test_LayerNorm_forward_matches_torch_LayerNorm(student):
    """LayerNorm(d_model) and LayerNorm(d_model, eps) with loaded random weight and bias compute the same as
    torch.nn.LayerNorm with the same eps (default eps = 1e-5; float32, and float64 after .to(torch.float64))."""
    for i, (eps, dtype) in enumerate([(None, F32), (1e-3, F32), (None, F64)]):
        d = 9
        module = C.new(student, "LayerNorm", d, **({} if eps is None else {"eps": eps}))
        if dtype == F64:
            module.to(F64)
        state = C.layer_norm_state("", d, seed=1400 + 10 * i, dtype=dtype)
        module.load_weights(state)
        x = C.randn(2, 4, d, seed=1405 + 10 * i, dtype=dtype, mean=0.1, std=3e-3)
        out = module(x)
        e = 1e-5 if eps is None else eps

        def reference(dt, x=x, state=state, e=e):
            ref = nn.LayerNorm(d, eps=e).to(dt)
            ref.load_state_dict(C.cast_floats(state, dt))
            with torch.no_grad():
                return ref(x.to(dt))

        expected, atol = C.reference_tolerance(reference, dtype)
        xc = x.double() - x.double().mean(-1, keepdim=True)
        var = xc.pow(2).mean(-1, keepdim=True)
        w, b = state["weight"].double(), state["bias"].double()
        wrong = {f"your output matches eps = {w_eps:g}: {'the default must be 1e-5' if eps is None else 'use the eps passed to the constructor'}":
                 xc / torch.sqrt(var + w_eps) * w + b for w_eps in (1e-3, 1e-5, 1e-6, 1e-8, 1e-12, 0.0) if w_eps != e}
        wrong.update(_mistakes(x, state["weight"], state["bias"], e))
        C.assert_close(out, expected, what=f"{module.label} forward", atol=atol, dtype=dtype, mistakes=wrong,
                       inputs={"x": x, "eps": "default" if eps is None else eps, "input std": 3e-3,
                               "weight/bias": "random"})


def test_LayerNorm_forward_leaves_its_input_alone(student):
    """LayerNorm's forward leaves the tensor x it is given as it was (values, dtype, shape, requires_grad,
    .grad): an in-place centring (x -= mean) returns the right output and corrupts the caller's x, the residual
    a pre-norm block adds back (C.forward_leaving_inputs, on the constructor's weights: two requests)."""
    module = C.new(student, "LayerNorm", 6)
    x = C.randn(2, 3, 6, seed=1505, dtype=F32, mean=0.5)
    C.expect_tensor(C.forward_leaving_inputs(module, x, names=("x",)), what=f"{module.label} forward",
                    inputs={"x": x}, shape=x.shape, dtype=F32)
