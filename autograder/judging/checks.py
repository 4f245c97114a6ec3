"""Shared helpers for the hidden suites: deterministic inputs, student-facing checks, tolerance derivation.

Every student-facing failure goes through `fail()` (pytest's Failed with pytrace=False and no chained
exception context), so a student sees what was compared, on which input (sizes, dtypes, settings; never
values), by how much it was off and, when the output matches a known mistake, a hint.  Never a traceback,
never test source, never full reference values (a single compared number is reported to one significant
digit of relative error only).  Suites must not use bare `assert` for anything a submission can influence.

A failure can carry evidence for the pictures in feedback (autograder.judging.evidence), computed here from
the values the submission returned: `assert_close` attaches where the error sits, the causality checks which
output position depends on which input position, and a suite adds its own with `evidence_on_failure`.

Requests to the submission go through the wrappers here (`call`, `vjp`, `new` and the `Module` wrapper),
which turn a `StudentError` into a readable failure ("while calling layer_norm(float32[2, 5, 6], ...), your
code raised ValueError: ...").  `SubmissionBroken` is deliberately left alone: the judge handles it.

Tolerances (`reference_tolerance`): the trusted reference is evaluated twice, in float64 and in float32, on
the same input values.  The observed float32 error `err32 = max|ref32 - ref64|` measures how hard the input is
for an honest float32 implementation; the allowed absolute error is `factor * err32` plus a floor of a few
ulps of the output's largest magnitude.  For float64 comparisons the observed float32 error is scaled by the
ratio of the unit roundoffs (eps64 / eps32 = 2**-29), because rounding errors scale with the unit roundoff.
The expected value is always the float64 reference.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Callable, Iterable, Iterator, Mapping, NoReturn, Sequence

import pytest
import torch
import torch.nn.functional as F

from autograder.judging import evidence
from autograder.judging.evidence import Figure
from autograder.judging.submission import ModuleHandle, Opaque, StudentError, Submission
from autograder.protocol import clean_text

F32_EPS = torch.finfo(torch.float32).eps
F64_EPS = torch.finfo(torch.float64).eps
EPS_RATIO = F64_EPS / F32_EPS  # 2**-29
DEFAULT_FACTOR = 30.0  # safety factor over the reference's own float32 error
FLOOR_ULPS = 16.0  # floor: this many ulps (of the compared dtype) of the output's largest magnitude

_MAX_ERROR_TEXT = 800

# Kit hook: callables receiving (what, max error / allowed error) for every assert_close; used by the kit's
# own tests to measure safety margins, never by the suites.
observers: list[Callable[[str, float], None]] = []


def _value_key(value):
    """A hashable stand-in, equal exactly when the values are: a tensor by dtype, shape, strides and bytes;
    a container element by element; anything else by type and value."""
    if isinstance(value, torch.Tensor):
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return ("tensor", value.dtype, tuple(value.shape), value.stride(), value.requires_grad, data)
    if isinstance(value, dict):
        return ("dict", tuple((k, _value_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    return (type(value).__name__, value)


def _copied(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


def once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn computed once per process for each set of argument values, and a copy of the result handed out each
    time, so that no caller can alter what the next one gets.  Only for references: arguments derived from
    fixed seeds, never from a submission's outputs (the cache would grow with every submission).  torch's
    thread count and default dtype are part of the key because they could change the low-order bits."""
    results = {}

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        key = (_value_key(args), _value_key(kwargs), torch.get_num_threads(), torch.get_default_dtype())
        if key not in results:
            results[key] = _copied(fn(*args, **kwargs))
        return _copied(results[key])
    return cached


def fail(message: str, figure: Figure | None = None) -> NoReturn:
    """Fail the current test with a student-facing message only: no traceback (pytrace=False) and no chained
    exception context (a failure raised while a StudentError or torch error is being handled would otherwise
    be printed under "During handling of the above exception ...").  `figure`: the evidence the feedback
    draws (autograder.judging.evidence), computed here from what the submission returned."""
    failure = pytest.fail.Exception(msg=message, pytrace=False)
    failure.__suppress_context__ = True
    failure.figure = figure
    raise failure


@contextlib.contextmanager
def evidence_on_failure(build: Callable[[], Figure | None]) -> Iterator[None]:
    """A failure inside the block that carries no evidence gets `build()`'s, which may ask the submission for
    more values.  Evidence is a courtesy: when building it fails in any way (the student's code raises, its
    process dies or runs out of time), the failure stands as it was."""
    try:
        yield
    except pytest.fail.Exception as failure:
        if getattr(failure, "figure", None) is None:
            with contextlib.suppress(Exception, pytest.fail.Exception):
                failure.figure = build()
        raise


def _title(what: str) -> str:
    return clean_text(what, evidence.MAX_TEXT)


# --- deterministic inputs (own generators: independent of the global RNG and of the student's use of it) ---

def generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, mean: float = 0.0, std: float = 1.0
          ) -> torch.Tensor:
    """Normal samples, drawn in float64 from a fixed seed, then rounded to `dtype`."""
    x = torch.randn(*shape, generator=generator(seed), dtype=torch.float64)
    return (x * std + mean).to(dtype)


def uniform(*shape: int, seed: int, low: float, high: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    x = torch.rand(*shape, generator=generator(seed), dtype=torch.float64)
    return (low + (high - low) * x).to(dtype)


def random_bool_mask(*shape: int, seed: int) -> torch.Tensor:
    """A random bool mask in which every row (last dim, length >= 2) has at least one True and one False.

    So no row is fully masked, and neither is any row of the inverted mask: a submission using the opposite
    convention produces finite output, which can be recognised and hinted at."""
    if shape[-1] < 2:
        raise ValueError("rows need at least two entries")
    g = generator(seed)
    mask = torch.rand(*shape, generator=g) < 0.5
    rows = mask.reshape(-1, shape[-1])
    n = rows.shape[0]
    on = torch.randint(0, shape[-1], (n,), generator=g)
    off = (on + torch.randint(1, shape[-1], (n,), generator=g)) % shape[-1]
    idx = torch.arange(n)
    rows[idx, on] = True
    rows[idx, off] = False
    return rows.reshape(shape)


def tril_mask(seq_len: int) -> torch.Tensor:
    """The trusted causal mask (True = may attend)."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool).tril()


def linear_state(prefix: str, out_features: int, in_features: int, *, seed: int, dtype: torch.dtype,
                 bias: bool = True, gain: float = 1.0, bias_std: float = 0.3) -> dict[str, torch.Tensor]:
    """Random nn.Linear parameters: weight ~ N(0, gain^2 / in_features), bias ~ N(0, bias_std^2)."""
    state = {f"{prefix}weight": randn(out_features, in_features, seed=seed, dtype=dtype,
                                      std=gain / math.sqrt(in_features))}
    if bias:
        state[f"{prefix}bias"] = randn(out_features, seed=seed + 1, dtype=dtype, std=bias_std)
    return state


def block_state(prefix: str, d_model: int, d_ff: int, *, seed: int, dtype: torch.dtype, attn_gain: float = 1.5
                ) -> dict[str, torch.Tensor]:
    """Random TransformerBlock parameters, LayerNorm weights and biases included (never ones/zeros)."""
    state = mha_state(f"{prefix}attn.", d_model, seed=seed, dtype=dtype, gain=attn_gain)
    state.update(layer_norm_state(f"{prefix}ln1.", d_model, seed=seed + 50, dtype=dtype))
    state.update(layer_norm_state(f"{prefix}ln2.", d_model, seed=seed + 60, dtype=dtype))
    state.update(linear_state(f"{prefix}ffn.0.", d_ff, d_model, seed=seed + 70, dtype=dtype))
    state.update(linear_state(f"{prefix}ffn.2.", d_model, d_ff, seed=seed + 80, dtype=dtype))
    return state


def block_state_to_torch(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Student TransformerBlock keys -> torch.nn.TransformerEncoderLayer keys."""
    out = mha_state_to_torch(state, "attn.", "self_attn.")
    for src, dst in (("ln1", "norm1"), ("ln2", "norm2"), ("ffn.0", "linear1"), ("ffn.2", "linear2")):
        out[f"{dst}.weight"] = state[f"{src}.weight"]
        out[f"{dst}.bias"] = state[f"{src}.bias"]
    return out


def layer_norm_state(prefix: str, d: int, *, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Random (not ones/zeros) LayerNorm parameters, so that swapped or shared norms show."""
    return {f"{prefix}weight": randn(d, seed=seed, dtype=dtype, mean=1.0, std=0.3),
            f"{prefix}bias": randn(d, seed=seed + 1, dtype=dtype, std=0.3)}


MHA_PROJECTIONS = ("Wq", "Wk", "Wv", "Wo")


def mha_state(prefix: str, d_model: int, *, seed: int, dtype: torch.dtype, bias: bool = True,
              gain: float = 1.5) -> dict[str, torch.Tensor]:
    """Random MultiHeadAttention parameters (Wq, Wk, Wv, Wo).  gain 1.5 gives attention scores of order 1,
    so the softmax is far from uniform and from one-hot: scaling and masking mistakes show."""
    state: dict[str, torch.Tensor] = {}
    for i, name in enumerate(MHA_PROJECTIONS):
        state.update(linear_state(f"{prefix}{name}.", d_model, d_model, seed=seed + 10 * i, dtype=dtype,
                                  bias=bias, gain=gain))
    return state


def mha_state_to_torch(state: Mapping[str, torch.Tensor], src: str = "", dst: str = "") -> dict[str, torch.Tensor]:
    """Student MultiHeadAttention keys (`{src}Wq.weight`, ...) -> torch.nn.MultiheadAttention keys
    (`{dst}in_proj_weight` = cat(Wq, Wk, Wv), `{dst}out_proj.weight`, ...)."""
    out = {f"{dst}in_proj_weight": torch.cat([state[f"{src}{n}.weight"] for n in MHA_PROJECTIONS[:3]]),
           f"{dst}out_proj.weight": state[f"{src}Wo.weight"]}
    if f"{src}Wq.bias" in state:
        out[f"{dst}in_proj_bias"] = torch.cat([state[f"{src}{n}.bias"] for n in MHA_PROJECTIONS[:3]])
        out[f"{dst}out_proj.bias"] = state[f"{src}Wo.bias"]
    return out


def cast_floats(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: cast_floats(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cast_floats(v, dtype) for v in value)
    return value


# --- describing inputs (sizes, dtypes and settings only) ---------------------------------------------------

def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{_dtype_name(value.dtype)}[{', '.join(str(s) for s in value.shape)}]"
    if isinstance(value, torch.dtype):
        return _dtype_name(value)
    if isinstance(value, Module):
        return f"your {value.label}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    if isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        return "{" + ", ".join(f"{k}: {describe_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def describe_inputs(inputs: str | Mapping[str, Any]) -> str:
    if isinstance(inputs, str):
        return inputs
    return ", ".join(f"{k}={v if isinstance(v, str) else describe_value(v)}" for k, v in inputs.items())


def describe_call(name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> str:
    parts = [describe_value(a) for a in args] + [f"{k}={describe_value(v)}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


def kind_of(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Opaque):
        return f"an object of type {value.type_name}"
    if isinstance(value, torch.Tensor):
        return f"a torch.Tensor of dtype {_dtype_name(value.dtype)} and shape {list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a Python {type(value).__name__}"


# --- student code ------------------------------------------------------------------------------------------

def student_error_message(err: StudentError, doing: str) -> str:
    if err.type_name == "NameError" and "is not defined" in err.message and doing.startswith("calling"):
        return f"While {doing}: {err.message}. Does your submission define it at the top level of the file?"
    text = err.message if len(err.message) <= _MAX_ERROR_TEXT else err.message[:_MAX_ERROR_TEXT] + " ..."
    return f"While {doing}, your code raised {err.type_name}" + (f": {text}" if text else "")


@contextlib.contextmanager
def student_code(doing: str) -> Iterator[None]:
    """Run requests to the submission; a StudentError becomes a student-facing failure."""
    try:
        yield
    except StudentError as err:
        fail(student_error_message(err, doing))


def _handles(value: Any) -> Any:
    """Arguments as the submission takes them: a Module (from `new`) is passed as its handle."""
    if isinstance(value, Module):
        return value.handle
    if type(value) in (list, tuple):
        return type(value)(_handles(v) for v in value)
    if type(value) is dict:
        return {k: _handles(v) for k, v in value.items()}
    return value


def call(student: Submission, function: str, *args: Any, **kwargs: Any) -> Any:
    """Call the student's `function`; tensors, plain values and Modules from `new` may be passed."""
    with student_code(f"calling {describe_call(function, args, kwargs)}"):
        return student.call(function, *_handles(args), **_handles(kwargs))


def vjp(student: Submission, function: str, args: Sequence[Any], kwargs: Mapping[str, Any],
        cotangents: Sequence[torch.Tensor]) -> tuple[Any, list[list[torch.Tensor | None]]]:
    with student_code(f"back-propagating through {describe_call(function, args, kwargs)}"):
        return student.vjp(function, list(_handles(args)), _handles(dict(kwargs)), list(cotangents))


def new(student: Submission, class_name: str, *args: Any, **kwargs: Any) -> "Module":
    label = describe_call(class_name, args, kwargs)
    with student_code(f"creating {label}"):
        handle = student.new(class_name, *_handles(args), **_handles(kwargs))
    return Module(handle, label)


class Module:
    """A student module handle whose every request turns a StudentError into a readable failure."""

    def __init__(self, handle: ModuleHandle, label: str) -> None:
        self.handle = handle
        self.label = label

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with student_code(f"running {self.label} forward on {describe_call('', args, kwargs)[1:-1] or 'no input'}"):
            return self.handle(*_handles(args), **_handles(kwargs))

    def vjp(self, args: Sequence[Any], kwargs: Mapping[str, Any], cotangents: Sequence[torch.Tensor]
            ) -> tuple[Any, list[list[torch.Tensor | None]]]:
        with student_code(f"back-propagating through {self.label} on "
                          f"{describe_call('', args, kwargs)[1:-1]}"):
            return self.handle.vjp(list(_handles(args)), _handles(dict(kwargs)), list(cotangents))

    def state_dict(self) -> dict[str, torch.Tensor]:
        with student_code(f"calling state_dict() on {self.label}"):
            return self.handle.state_dict()

    def named_parameters(self) -> dict[str, torch.Tensor]:
        with student_code(f"listing the parameters of {self.label}"):
            return self.handle.named_parameters()

    def load_state_dict(self, state: Mapping[str, torch.Tensor], strict: bool = True) -> None:
        keys = ", ".join(sorted(state))
        with student_code(f"loading a state_dict with keys [{keys}] into {self.label} (strict={strict})"):
            self.handle.load_state_dict(dict(state), strict=strict)

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None:
        """Load the test's weights: exactly the parameters the contract names (random, or torch's).

        The contract fixes the parameters, not the rest of the module's state, so the load is not strict:
        extra buffers (a registered causal mask, persistent or not) and other non-parameter state belong to
        the student and keep their values.  What strictness would catch for parameters is checked here
        instead: named_parameters() must be exactly the loaded names, each holding its loaded values."""
        self.load_state_dict(state, strict=False)
        params = self.named_parameters()
        what = f"{self.label}: loading the test's weights"
        # values first: a parameter registered under two names (one module assigned to two attributes) is
        # listed once by named_parameters and ends up holding the values loaded into the other name
        for name, value in state.items():
            got = params.get(name) if isinstance(params, Mapping) else None
            if isinstance(got, torch.Tensor) and got.shape == value.shape and not torch.equal(got.to(value.dtype),
                                                                                             value):
                twin = next((other for other, v in state.items() if other != name and v.shape == value.shape
                             and torch.equal(got.to(v.dtype), v)), None)
                fail(f"{what}: parameter '{name}' does not hold the values loaded into it"
                     + (f"; it holds those loaded into '{twin}', so the two names share one module or parameter"
                        if twin else ""))
        expect_parameters(params, {k: v.shape for k, v in state.items()}, what=f"{what}: named_parameters()")

    def to(self, dtype: torch.dtype) -> None:
        with student_code(f"calling .to({dtype}) on {self.label}"):
            self.handle.to(dtype)

    def info(self):
        with student_code(f"inspecting {self.label}"):
            return self.handle.info()


def expect_raises(exc_type: type[BaseException], action: Callable[[], Any], *, what: str) -> StudentError:
    """`action` must make the student's code raise `exc_type` (or a subclass)."""
    try:
        action()
    except StudentError as err:
        if err.is_a(exc_type):
            return err
        text = f": {err.message[:_MAX_ERROR_TEXT]}" if err.message else ""
        message = (f"{what}: expected {exc_type.__name__} (or a subclass), but your code raised "
                   f"{err.type_name}{text}")
    else:
        message = f"{what}: expected {exc_type.__name__}, but nothing was raised"
    fail(message)


# --- shape, dtype and type checks --------------------------------------------------------------------------



def expect_tensor(value: Any, *, what: str, inputs: str | Mapping[str, Any] = "",
                  shape: Sequence[int] | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    where = f" (input: {describe_inputs(inputs)})" if inputs else ""
    if not isinstance(value, torch.Tensor):
        extra = " Did you forget a `return`?" if value is None else ""
        fail(f"{what}: expected a torch.Tensor, got {kind_of(value)}{where}.{extra}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(f"{what}: expected shape {list(shape)}, got {list(value.shape)}{where}")
    if dtype is not None and value.dtype != dtype:
        fail(f"{what}: expected dtype {_dtype_name(dtype)} (same as the input), got "
             f"{_dtype_name(value.dtype)}{where}")
    return value


def expect_exact_type(value: Any, expected: type, *, what: str, advice: str = "") -> Any:
    if type(value) is not expected:
        fail(f"{what}: expected a Python {expected.__name__}, got {kind_of(value)}." + (f" {advice}" if advice else ""))
    return value


def expect_equal(actual: Any, expected: torch.Tensor, *, what: str, inputs: str | Mapping[str, Any],
                 mistakes: Mapping[str, torch.Tensor] | None = None) -> None:
    """Exact equality (values and dtype) for discrete outputs such as masks."""
    actual = expect_tensor(actual, what=what, inputs=inputs, shape=expected.shape, dtype=expected.dtype)
    if torch.equal(actual, expected):
        return
    wrong = (actual != expected).nonzero().tolist()
    lines = [f"{what}: wrong values for input {describe_inputs(inputs)}: {len(wrong)} of {expected.numel()} "
             f"entries differ (first at index {tuple(wrong[0])})"]
    for hint, tensor in _pairs(mistakes):
        if tensor.shape == actual.shape and torch.equal(actual, tensor.to(actual.dtype)):
            lines.append(f"  Hint: {hint}")
    fail("\n".join(lines))


# --- numeric comparison ------------------------------------------------------------------------------------

def _pairs(mistakes: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None
           ) -> list[tuple[str, torch.Tensor]]:
    if mistakes is None:
        return []
    return list(mistakes.items()) if isinstance(mistakes, Mapping) else list(mistakes)


def _within(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    ok = (actual - expected).abs() <= atol + rtol * expected.abs()
    same_nonfinite = (torch.isnan(actual) & torch.isnan(expected)) | (
        torch.isinf(actual) & torch.isinf(expected) & (actual == expected))
    return ok | same_nonfinite


def assert_close(actual: Any, expected: torch.Tensor, *, what: str, inputs: str | Mapping[str, Any],
                 atol: float, rtol: float = 0.0,
                 mistakes: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None = None,
                 dtype: torch.dtype | None = None, nonfinite_hint: str | None = None,
                 hints: Sequence[str] = ()) -> torch.Tensor:
    """`actual` (from the student) must be a tensor of `expected`'s shape (and of `dtype` if given) with
    |actual - expected| <= atol + rtol * |expected| everywhere.  `mistakes` maps a hint to the output a
    known-buggy transformation produces (computed on the trusted side); a hint is shown when the student's
    output matches it within the same tolerance.  `hints` are shown on any failure: the caller has already
    established them from other outputs of the student's code (e.g. right on an easier input)."""
    actual = expect_tensor(actual, what=what, inputs=inputs, shape=expected.shape, dtype=dtype)
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    within = _within(a, e, atol, rtol)
    if observers:
        both = torch.isfinite(a) & torch.isfinite(e)
        ratio = float(((a - e).abs() / (atol + rtol * e.abs()))[both].max()) if bool(both.any()) else 0.0
        if not bool(torch.isfinite(a).all()):
            ratio = float("inf")
        for observer in observers:
            observer(what, ratio)
    if bool(within.all()):
        return actual
    n, n_bad = e.numel(), int((~within).sum())
    lines = [f"{what}: does not match the reference.", f"  input: {describe_inputs(inputs)}"]
    bad_nonfinite = ~torch.isfinite(a) & torch.isfinite(e)
    if bool(bad_nonfinite.any()):
        lines.append(f"  your output contains NaN or inf in {int(bad_nonfinite.sum())} of {n} entries where "
                     f"the reference is finite")
        if nonfinite_hint:
            lines.append(f"  Hint: {nonfinite_hint}")
    finite = torch.isfinite(a) & torch.isfinite(e)
    if n == 1 and bool(finite.all()):
        # a single number: its exact error would give the reference value away; one significant digit only
        rel = float((a - e).abs().sum() / e.abs().sum().clamp_min(1e-300))
        lines.append(f"  your value is off by a relative error of about {rel:.0e}")
    elif bool(finite.any()):
        diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
        worst = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
        scale = float(e.abs().max())
        significant = finite & (e.abs() >= 1e-3 * scale) & (e.abs() > 0)
        rel = float((diff[significant] / e.abs()[significant]).max()) if bool(significant.any()) else float("nan")
        lines.append(f"  max abs error {float(diff.max()):.3g} (at index {worst}), max rel error {rel:.3g} "
                     f"(over entries not close to zero)")
    if n == 1 and atol == 0:
        lines.append(f"  allowed: relative error <= {rtol:.3g}")
    else:
        lines.append(f"  allowed: |error| <= {atol:.3g}" + (f" + {rtol:.3g} * |reference|" if rtol else "")
                     + f"; {n_bad} of {n} entries are outside")
    shown: set[str] = set()
    for hint, tensor in _pairs(mistakes):
        if hint in shown or tuple(tensor.shape) != tuple(a.shape):
            continue
        if bool(_within(a, tensor.detach().to(torch.float64), atol, rtol).all()):
            lines.append(f"  Hint: {hint}")
            shown.add(hint)
    lines.extend(f"  Hint: {hint}" for hint in hints if hint not in shown)
    fail("\n".join(lines), error_map(what, a, e, atol, rtol))


def is_close(actual: Any, expected: torch.Tensor, *, atol: float, rtol: float = 0.0) -> bool:
    """Whether `actual` passes `assert_close` against `expected` (no failure raised, nothing observed)."""
    return (isinstance(actual, torch.Tensor) and tuple(actual.shape) == tuple(expected.shape)
            and bool(_within(actual.detach().to(torch.float64), expected.detach().to(torch.float64), atol,
                             rtol).all()))


def reference_tolerance(reference: Callable[[torch.dtype], torch.Tensor], dtype: torch.dtype, *,
                        factor: float = DEFAULT_FACTOR, floor_ulps: float = FLOOR_ULPS
                        ) -> tuple[torch.Tensor, float]:
    """Evaluate the trusted `reference(dtype)` in float64 and float32; return (float64 reference, atol) for
    comparing an output of `dtype`: factor * (observed float32 error, scaled by eps64/eps32 for float64)
    plus `floor_ulps` ulps of the largest reference magnitude."""
    ref64 = reference(torch.float64).detach().to(torch.float64)
    ref32 = reference(torch.float32).detach().to(torch.float64)
    err32 = float((ref32 - ref64).abs().max()) if ref64.numel() else 0.0
    scale = float(ref64.abs().max()) if ref64.numel() else 0.0
    if dtype == torch.float64:
        return ref64, factor * err32 * EPS_RATIO + floor_ulps * F64_EPS * scale + 1e-300
    return ref64, factor * err32 + floor_ulps * F32_EPS * scale + 1e-38


# --- evidence of a mismatch: where the error sits ------------------------------------------------------------

def _two_significant(value: float) -> float:
    """Two significant digits are all a colour scale shows, and keep results.json small."""
    return float(f"{value:.2g}")


def error_map(what: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float
              ) -> evidence.ErrorMap | None:
    """|actual - expected| / allowed error for each cell (float64 tensors of one shape), as a map of at most
    MAX_SIDE x MAX_SIDE: worst over the batch (dim 0 of outputs with 3 or more dims), heads and positions as
    rows, the last dim as columns, each block of a larger map its worst cell.  None for a single number,
    whose error the message already states."""
    if actual.numel() <= 1:
        return None
    within = _within(actual, expected, atol, rtol)
    raw = (actual - expected).abs() / (atol + rtol * expected.abs()).clamp_min(1e-300)
    # within the tolerance, NaN is a NaN matching a NaN: no error at all
    ratio = torch.where(within, torch.nan_to_num(raw, nan=0.0, posinf=0.0).clamp(max=1.0),
                        torch.nan_to_num(raw, nan=evidence.MAX_RATIO, posinf=evidence.MAX_RATIO))
    ratio = ratio.clamp(0, evidence.MAX_RATIO)
    # a NaN or inf where the reference is finite ranks above every error, so no block maximum hides it
    ratio = torch.where(~torch.isfinite(actual) & torch.isfinite(expected), math.inf, ratio)
    shape, groups = tuple(actual.shape), 1
    rows, columns = "dim -2 (positions)", "last dim (features)"
    if ratio.dim() == 1:
        grid, rows, columns = ratio[None], "", "index"
    elif ratio.dim() == 2:
        grid = ratio
    elif ratio.dim() == 3:
        grid = ratio.amax(dim=0)
    else:
        grid = ratio.amax(dim=0).reshape(-1, shape[-1])
        groups, rows = math.prod(shape[1:-2]), "dims 1 to -2 (heads x positions)"
    side = evidence.MAX_SIDE
    if grid.shape[0] > side or grid.shape[1] > side:
        if grid.shape[0] > side:
            groups = 1  # pooled blocks straddle the groups
        grid = F.adaptive_max_pool2d(grid[None, None], (min(grid.shape[0], side), min(grid.shape[1], side)))[0, 0]
    cells = tuple(tuple(evidence.NON_FINITE if math.isinf(v) else _two_significant(v) for v in row)
                  for row in grid.tolist())
    return evidence.ErrorMap(_title(what), shape, rows, columns, groups, cells)


# --- evidence of future dependence: which output position depends on which input position ----------------------

def _dependence_row(gradient: Any, seq_in: int) -> str:
    """One row of a dependence matrix from the gradient of one output position: '1' at the input positions
    where it is nonzero (NaN counts), '0' elsewhere; '0' everywhere for a missing gradient, and '?' for one
    that is not a tensor of the input's sequence length."""
    width = min(seq_in, evidence.MAX_SIDE)
    if gradient is None:
        return "0" * width
    if not isinstance(gradient, torch.Tensor) or gradient.dim() < 2 or gradient.shape[-2] != seq_in:
        return "?" * width
    if gradient.numel() == 0:
        return "0" * width
    nonzero = (gradient.detach().movedim(-2, 0).reshape(seq_in, -1) != 0).any(dim=1)
    return "".join("1" if bool(v) else "0" for v in nonzero[:width])


def _gradient_dependence(grads: list, inputs: Sequence[torch.Tensor], names: Sequence[str],
                         must_matter: Sequence[str], seq_out: int, what: str) -> evidence.Dependence:
    """The first MAX_SIDE output positions against the first MAX_SIDE input positions of each input."""
    matrices = []
    for i, x in enumerate(inputs[:evidence.MAX_INPUTS]):
        rows = []
        for t in range(min(seq_out, evidence.MAX_SIDE)):
            per_input = grads[t] if isinstance(grads[t], list) else []
            rows.append(_dependence_row(per_input[i] if i < len(per_input) else None, x.shape[-2]))
        matrices.append(tuple(rows))
    shown = tuple(names[:evidence.MAX_INPUTS])
    return evidence.Dependence(_title(what), "gradient", tuple(clean_text(n, 40) for n in shown),
                               tuple(n in must_matter for n in shown), tuple(matrices))


def _perturbation_dependence(base: torch.Tensor, moved: Callable[[int, float], Any], what: str
                             ) -> evidence.Dependence:
    """Column j says which output positions changed when the inputs moved at every position >= j (both
    directions); column 0 is never measured.  A request that fails leaves its column and the rest unmeasured
    (a process that died is not restarted for a picture): evidence never turns into another verdict."""
    width = min(base.shape[-2], evidence.MAX_SIDE)
    columns = ["?" * width] * width
    for j in range(1, width):
        try:
            outs = [moved(j - 1, sign) for sign in (1.0, -1.0)]
        except (Exception, pytest.fail.Exception):
            break
        columns[j] = "".join("1" if any(not torch.equal(out[..., p, :], base[..., p, :]) for out in outs) else "0"
                             for p in range(width))
    rows = tuple("".join(column[p] for column in columns) for p in range(width))
    return evidence.Dependence(_title(what), "perturbation", ("every input",), (False,), (rows,))


# --- causality (exact zero future dependence) ---------------------------------------------------------------

def one_hot_cotangents(shape: Sequence[int], *, seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """For an output [..., S, F]: one cotangent per position t, random over features (and batch), zero at
    every other position."""
    seq = shape[-2]
    noise = randn(*shape, seed=seed, dtype=dtype)
    cots = []
    for t in range(seq):
        c = torch.zeros(*shape, dtype=dtype)
        c[..., t, :] = noise[..., t, :]
        cots.append(c)
    return cots


def check_causal_jacobian(vjp_fn: Callable[[list[torch.Tensor]], list[list[torch.Tensor | None]]],
                          inputs: Sequence[torch.Tensor], names: Sequence[str], out_shape: Sequence[int], *,
                          must_matter: Sequence[str], what: str, seed: int) -> None:
    """Autograd Jacobian of output position t w.r.t. every input position j > t must be exactly 0, and the
    Jacobian w.r.t. each input in `must_matter` must be nonzero at every j <= t.  `vjp_fn(cotangents)` returns,
    per cotangent, one gradient (or None) per input.  Sequence is dim -2 of every input and of the output."""
    dtype = inputs[0].dtype
    cots = one_hot_cotangents(out_shape, seed=seed, dtype=dtype)
    grads = vjp_fn(cots)
    if not isinstance(grads, list) or len(grads) != len(cots):
        fail(f"{what}: could not back-propagate through your code (no gradients came back)")
    seq = out_shape[-2]

    def dependence() -> evidence.Dependence:
        return _gradient_dependence(grads, inputs, names, must_matter, seq, what)

    for t in range(seq):
        for i, name in enumerate(names):
            g = grads[t][i] if i < len(grads[t]) else None
            if g is None:
                if name in must_matter:
                    fail(f"{what}: output position {t} does not depend on input `{name}` at all (its gradient "
                         f"is missing; is the computation detached from the input?)", dependence())
                continue
            seq_in = inputs[i].shape[-2]
            leak = [j for j in range(t + 1, seq_in) if bool((g[..., j, :] != 0).any())]
            if leak:
                mag = max(float(g[..., j, :].abs().max()) for j in leak)
                fail(f"{what}: output position {t} depends on future position(s) {leak} of `{name}` "
                     f"(gradient up to {mag:.3g}; it must be exactly 0). The causal mask must block every key "
                     f"j > t before the softmax.", dependence())
            if name in must_matter:
                dead = [j for j in range(min(t + 1, seq_in)) if not bool((g[..., j, :] != 0).any())]
                if dead:
                    fail(f"{what}: output position {t} ignores input position(s) {dead} of `{name}` (gradient "
                         f"exactly 0), but every position j <= t must be attended to. Is the mask too strict "
                         f"(e.g. excluding the diagonal)?", dependence())


def check_causal_perturbation(forward: Callable[[list[torch.Tensor]], Any], inputs: Sequence[torch.Tensor],
                              *, what: str, seed: int, h: float = 0.1) -> None:
    """Perturbing every input at positions j > t by +h*r and by -h*r must leave output positions <= t
    bit-identical."""
    base = expect_tensor(forward(list(inputs)), what=what, dtype=inputs[0].dtype)
    seq = base.shape[-2]

    def moved_output(t: int, sign: float) -> torch.Tensor:
        moved = []
        for i, x in enumerate(inputs):
            r = randn(*x.shape, seed=seed + 101 * t + i, dtype=x.dtype)
            y = x.clone()
            y[..., t + 1:, :] += sign * h * r[..., t + 1:, :]
            moved.append(y)
        return expect_tensor(forward(moved), what=what, shape=base.shape, dtype=base.dtype)

    for t in range(seq - 1):
        for sign in (1.0, -1.0):
            out = moved_output(t, sign)
            if not torch.equal(out[..., :t + 1, :], base[..., :t + 1, :]):
                changed = [p for p in range(t + 1) if not torch.equal(out[..., p, :], base[..., p, :])]
                fail(f"{what}: changing the input at positions > {t} (by {'+' if sign > 0 else '-'}{h} times a "
                     f"random direction) changed the output at position(s) {changed}; with a causal mask they "
                     f"must stay bit-identical.", _perturbation_dependence(base, moved_output, what))


def check_depends_on_future(forward: Callable[[list[torch.Tensor]], Any], inputs: Sequence[torch.Tensor],
                            *, what: str, seed: int, h: float = 0.1) -> None:
    """Sanity for the non-causal mode: perturbing positions >= 1 must change output position 0."""
    base = expect_tensor(forward(list(inputs)), what=what, dtype=inputs[0].dtype)
    moved = []
    for i, x in enumerate(inputs):
        y = x.clone()
        y[..., 1:, :] += h * randn(*x.shape, seed=seed + i, dtype=x.dtype)[..., 1:, :]
        moved.append(y)
    out = expect_tensor(forward(moved), what=what, shape=base.shape, dtype=base.dtype)
    if torch.equal(out[..., 0, :], base[..., 0, :]):
        fail(f"{what}: without the causal flag, the output at position 0 must depend on later positions, but "
             f"changing them left it unchanged. Is a causal mask applied even when it was not asked for?")


# --- module structure ---------------------------------------------------------------------------------------

def expect_parameters(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]], *, what: str,
                      advice: str = "") -> None:
    """`params` (a module's named_parameters()) must have exactly the expected names and shapes.

    Parameters are what the contract fixes (their names are the state_dict keys that torch's weights are
    loaded under); buffers are not parameters, so a registered causal mask never fails this check.  The
    failure names the missing and unexpected parameters; `advice` (how to create the expected ones) is added
    only when some are missing, since an extra parameter alone is not explained by it."""
    if not isinstance(params, Mapping):
        fail(f"{what}: expected a dict of tensors, got {kind_of(params)}")
    missing = sorted(set(expected) - set(params))
    unexpected = sorted(set(params) - set(expected))
    if missing or unexpected:
        found = ([f"missing {missing}"] if missing else []) + ([f"unexpected {unexpected}"] if unexpected else [])
        empty = (" Nothing is registered: tensors that are not nn.Parameter, and modules kept in a plain Python "
                 "list or dict, are invisible to nn.Module; use nn.Parameter, nn.ModuleList or one attribute per "
                 "module." if not params else "")
        fail(f"{what}: wrong parameters: {'; '.join(found)}. Expected exactly the parameters {sorted(expected)} "
             f"(buffers are fine)." + (f" {advice}" if advice and missing else "") + empty)
    for name, shape in expected.items():
        value = params[name]
        if not isinstance(value, torch.Tensor):
            fail(f"{what}: parameter '{name}' is {kind_of(value)}, expected a tensor")
        if tuple(value.shape) != tuple(shape):
            fail(f"{what}: parameter '{name}' has shape {list(value.shape)}, expected {list(shape)}")
