"""Part `batch_dependence` (4 points): `batch_normalise(x, eps=1e-5)` and `batch_dependence(kind, batch_size=8,
d_model=16, seed=0)`.

batch_normalise is compared with torch's F.batch_norm(x, None, None, training=True, eps=eps) (no running
statistics, no affine step), computed here in the judge; the child may not call it.  Tolerances as in
test_layer_norm (reference in float64 and float32, 30 x the observed float32 error plus 16 ulps).

The recipe of batch_dependence is recomputed live (inside torch.random.fork_rng, so the grading process's
global RNG is untouched): torch.manual_seed(seed); x = randn(batch_size, d_model); others = randn(batch_size - 1,
d_model); y = cat(x[:1], others); the result is max |N(y)[0] - N(x)[0]| with N = batch norm over dim 0 (biased
variance, eps 1e-5).  The recipe runs in float32 (as specified) and in float64 on the same draws; the allowed
relative error is max(1e-4, 30 x the observed float32 relative error).  For kind="layer" the answer is exactly
0.0: layer norm's row 0 is computed from row 0 alone, so any faithful code gives bit-identical rows.

Which input amplifies which bug: the default batch of 8 x 16 and two other sizes (4 x 6, 32 x 10) with other
seeds; square inputs (6 x 6) for batch_normalise, where statistics over the wrong dimension keep the shape; a
large eps (0.5) on an input of variance ~1 shows where eps goes; float64 with d_model 512 shows d - 1.

Any other kind must raise ValueError (the notebook's rule): names, capitalisations, the empty string and a
trailing space are passed, so a fallback branch or a case-folding comparison shows.

kind="layer" uses the student's own layer_norm, so the part is built on Part 1: the own-parts check applies the
student's layer_norm to the recipe's two batches here and compares the change with batch_dependence("layer").
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from autograder.judging import checks as C

F32, F64 = torch.float32, torch.float64

# (batch_size, d_model, seed) besides the defaults (8, 16, 0)
SETTINGS = ((4, 6, 3), (32, 10, 11))


def _batch_norm(x, eps=1e-5, *, dim=0, correction=0, eps_inside=True):
    """Batch norm as the trusted side writes its known-buggy versions (the right one is F.batch_norm)."""
    mean = x.mean(dim=dim, keepdim=True)
    var = ((x - mean) ** 2).sum(dim=dim, keepdim=True) / max(x.shape[dim] - correction, 1)
    return (x - mean) / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)


def _draws(batch_size, d_model, seed, *, replace_first=False):
    """The recipe's two batches (float32): x, and x with every example but the first drawn anew."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        x = torch.randn(batch_size, d_model)
        if replace_first:
            return x, torch.randn(batch_size, d_model)
        return x, torch.cat([x[:1], torch.randn(batch_size - 1, d_model)])


def _change(normalise, x, y, reduce="max"):
    diff = (normalise(y)[0] - normalise(x)[0]).abs()
    return float(diff.max() if reduce == "max" else diff.mean())


def _recipe(batch_size, d_model, seed, dtype=F32, **variant):
    return _recipe_once(batch_size, d_model, seed, dtype, tuple(sorted(variant.items())), torch.get_num_threads())


@functools.lru_cache(maxsize=None)
def _recipe_once(batch_size, d_model, seed, dtype, variant, threads):
    """The "batch" recipe's value; variants: replace_first (the first example redrawn too), reduce="mean",
    and the batch-norm bugs of _batch_norm (dim, correction)."""
    options = dict(variant)
    x, y = _draws(batch_size, d_model, seed, replace_first=options.pop("replace_first", False))
    reduce = options.pop("reduce", "max")
    if options:
        return _change(lambda t: _batch_norm(t.to(dtype), **options), x, y, reduce)
    return _change(lambda t: F.batch_norm(t.to(dtype), None, None, training=True, eps=1e-5), x, y, reduce)


def _call(student, kind, batch_size=None, d_model=None, seed=None):
    args = (kind,) if batch_size is None else (kind, batch_size, d_model)
    kwargs = {} if seed is None else {"seed": seed}
    label = C.describe_call("batch_dependence", args, kwargs)
    return C.expect_number(C.call(student, "batch_dependence", *args, **kwargs), what=label), label


def _layer_variants(batch_size, d_model, seed):
    """Known mistakes that make kind="layer" nonzero even with a right layer_norm."""
    def ln(t):
        return F.layer_norm(t, (d_model,))
    x, fresh = _draws(batch_size, d_model, seed, replace_first=True)
    return [("your value matches replacing EVERY example, the first one included: keep x[0] and draw only "
             "batch_size - 1 new examples (torch.cat([x[:1], others]))", _change(ln, x, fresh))]


def test_batch_normalise_matches_torch_batch_norm(student):
    """batch_normalise(x, eps) matches torch's batch norm in training mode without affine parameters (each
    feature normalised over the batch, dim 0, biased variance, eps inside the square root), float32 and float64,
    square inputs included.
    The tensors it is given are left as they were (C.call_leaving_inputs)."""
    cases = [((8, 16), F32, None), ((6, 6), F32, 1e-5), ((5, 3), F64, 0.5), ((4, 512), F64, 1e-5)]
    for i, (shape, dtype, eps) in enumerate(cases):
        x = C.randn(*shape, seed=4000 + i, dtype=dtype, mean=0.7, std=1.3)
        e = 1e-5 if eps is None else eps
        kwargs = {} if eps is None else {"eps": eps}
        out = C.call_leaving_inputs(student, "batch_normalise", x, **kwargs)
        expected, atol = C.reference_tolerance(
            lambda dt, x=x, e=e: F.batch_norm(x.to(dt), None, None, training=True, eps=e), dtype)
        xd = x.double()
        mistakes = [
            ("your output matches statistics over the features (dim -1): batch norm takes each feature's mean and "
             "variance over the batch, dim 0", _batch_norm(xd, e, dim=-1)),
            ("your output matches the unbiased variance: divide by the batch size, not batch_size - 1",
             _batch_norm(xd, e, correction=1)),
            ("your output matches (x - mean) / (sqrt(var) + eps): eps belongs inside the square root",
             _batch_norm(xd, e, eps_inside=False)),
        ]
        if eps is None:
            mistakes.append(("your output matches no eps at all: the default is eps=1e-5", _batch_norm(xd, 0.0)))
        C.assert_close(out, expected, what="batch_normalise output", atol=atol, dtype=dtype, mistakes=mistakes,
                       inputs={"x": x, "eps": "default" if eps is None else eps})


def test_batch_dependence_returns_python_float(student):
    """batch_dependence returns a plain Python float (e.g. via .item()) for both kinds."""
    for kind in ("layer", "batch"):
        C.expect_exact_type(C.call(student, "batch_dependence", kind), float, what=f"batch_dependence({kind!r})",
                            advice="Convert the largest change with .item() (or float(...)).")


def test_layer_norm_output_does_not_depend_on_the_batch(student):
    """batch_dependence("layer") is exactly 0.0 for the defaults and other sizes and seeds: layer norm's output
    for the first example is computed from that example alone."""
    for setting in ((None, None, None), *SETTINGS):
        value, label = _call(student, "layer", *setting)
        if value != 0.0:
            b, d, s = setting if setting[0] is not None else (8, 16, 0)
            hints = [h for h, v in _layer_variants(b, d, s) if math.isclose(value, v, rel_tol=1e-4)]
            C.fail(f"{label} = {value:.3g}: layer norm's output for the first example must not change at all "
                   f"(exactly 0.0) when only the other examples change.", hints=hints)


def _check_batch(student, batch_size, d_model, seed, defaults=False):
    value, label = _call(student, "batch", *((None, None, None) if defaults else (batch_size, d_model, seed)))
    v64 = _recipe(batch_size, d_model, seed, F64)
    v32 = _recipe(batch_size, d_model, seed, F32)
    rtol = max(1e-4, C.DEFAULT_FACTOR * abs(v32 - v64) / abs(v64))
    mistakes = [
        ("your value matches replacing EVERY example, the first one included: keep x[0] and draw only "
         "batch_size - 1 new examples (torch.cat([x[:1], others]))", _recipe(batch_size, d_model, seed, F64,
                                                                            replace_first=True)),
        ("your value is the MEAN change over the first example's features: return the largest one (max)",
         _recipe(batch_size, d_model, seed, F64, reduce="mean")),
        ("your value matches batch_normalise with the unbiased variance: divide by the batch size",
         _recipe(batch_size, d_model, seed, F64, correction=1)),
    ]
    hints = ["a value of 0 means the first example's output did not change: batch_normalise must take its "
             "statistics over the batch (dim 0), where the other examples enter"] if value == 0.0 else []
    C.assert_close(torch.tensor(value, dtype=F64), torch.tensor(v64, dtype=F64), what=label, atol=0.0, rtol=rtol,
                   inputs={"batch_size": batch_size, "d_model": d_model, "seed": seed},
                   mistakes=[(h, torch.tensor(v, dtype=F64)) for h, v in mistakes], hints=hints)


def test_batch_dependence_batch_matches_recipe(student):
    """batch_dependence("batch") equals the recipe recomputed with torch's batch norm, for the defaults and for
    other batch sizes, widths and seeds (relative error about 1e-4)."""
    _check_batch(student, 8, 16, 0, defaults=True)
    for setting in SETTINGS:
        _check_batch(student, *setting)


def _from_your_layer_norm(student, b, d, s):
    """The largest change of row 0 when the trusted side applies the student's layer_norm, with ones and zeros,
    to the recipe's two batches."""
    x, y = _draws(b, d, s)
    ones, zeros = torch.ones(d), torch.zeros(d)
    outs = [C.expect_tensor(C.call(student, "layer_norm", t, ones, zeros), what="your layer_norm on the recipe's "
                            "batch", shape=(b, d)) for t in (x, y)]
    return float((outs[1][0] - outs[0][0]).abs().max())


def test_batch_dependence_is_right_on_your_own_layer_norm(student):
    """batch_dependence's own logic, judged on the student's own layer_norm (no points of its own: when it passes
    and Part 1 lost points, the failed checks are carried forward from there).  batch_dependence("layer")
    equals the largest change of row 0 when the trusted side applies the student's layer_norm, with ones and
    zeros, to the recipe's two batches: for the defaults, one other setting, and batch_size == d_model, where
    even a layer norm whose statistics lose their last axis (no keepdim) runs.  A setting where the student's
    layer_norm raises is Part 1's failure: skipped, if batch_dependence fails there too (C.OwnParts)."""
    own = C.OwnParts('your batch_dependence("layer")')
    for b, d, s in ((8, 16, 0), SETTINGS[0], (6, 6, 5)):
        label = C.describe_call("batch_dependence", ("layer",) + (() if s == 0 else (b, d)),
                                {} if s == 0 else {"seed": s})
        expected = own.compose(label, lambda: _from_your_layer_norm(student, b, d, s))
        if expected is None:
            own.expect_fails_too(label, lambda: _call(student, "layer", *(() if s == 0 else (b, d, s))))
            continue
        value, label = _call(student, "layer", *(() if s == 0 else (b, d, s)))
        if not (value == expected or math.isclose(value, expected, rel_tol=1e-6)):
            C.fail(f"{label} = {value:.3g}, but your own layer_norm applied to the recipe's two batches changes the "
                   f"first example's output by {expected:.3g}: follow the recipe's random draws and return the "
                   f"largest absolute change of row 0")
        own.judged(label)
    own.finish()


# kinds the notebook names as refused, and look-alikes a fallback or a loose comparison would accept
REFUSED_KINDS = ("Layer", "BATCH", "instance", "batch_norm", "", "layer ")


def test_batch_dependence_refuses_unknown_kinds(student):
    """batch_dependence raises ValueError (or a subclass) for any kind but "layer" and "batch": other names,
    other capitalisations, the empty string, a trailing space.  A fallback to one of the two normalisers
    (an else branch, a dict.get with a default) returns a number instead."""
    for kind in REFUSED_KINDS:
        C.expect_raises(ValueError, lambda kind=kind: student.call("batch_dependence", kind),
                        what=f"batch_dependence({kind!r})")
