"""The kit's own tests for the transformer_block hidden suites, run in-process with ModuleSubmission.

* the reference solution passes every test;
* legitimate alternative implementations (var_mean/rsqrt, float64 internals, einsum, baddbmm, -1e9 /
  finfo.min / additive -inf masks, fused QKV, ...) pass every test, with a safety margin;
* known-buggy variants each fail at least one test of their own part (with the expected hint where one
  exists);
* failure messages are student-facing (no source, no traceback); the suites never import the solutions,
  never use bare `assert`, document every test, and make a modest number of requests.
"""
from __future__ import annotations

import ast
import math
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from autograder import checks, judge  # noqa: E402
from autograder.submission import ModuleSubmission  # noqa: E402

SUITE_DIR = ROOT / "autograder" / "assignments" / "transformer_block"
REFERENCE = ROOT / "solutions" / "transformer_block.py"
PARTS = {"layer_norm": "test_layer_norm.py", "attention": "test_attention.py",
         "multi_head_attention": "test_multi_head_attention.py", "transformer_block": "test_transformer_block.py",
         "gradient_experiment": "test_gradient_experiment.py"}
TESTS_PER_PART = (6, 15)


# --- harness -----------------------------------------------------------------------------------------------

def run_suite(submission, parts=None) -> dict[str, tuple[str, str]]:
    """Run the hidden suite (or some parts of it) on a Submission through the real judge:
    {'test_file.py::test_name': ('passed' | 'failed', student-facing message)}."""
    outcomes = judge.run_suite([SUITE_DIR / PARTS[p] for p in (parts or PARTS)], submission)
    return {f"{o.module}.py::{o.name}": ("passed" if o.passed else "failed", o.message) for o in outcomes}


class CountingSubmission(ModuleSubmission):
    """ModuleSubmission that counts requests (each one an IPC round trip against a sandboxed submission)."""

    def __init__(self, module) -> None:
        super().__init__(module)
        self.requests = 0

    def call(self, function, *args, **kwargs):
        self.requests += 1
        return super().call(function, *args, **kwargs)

    def vjp(self, function, args, kwargs, cotangents):
        self.requests += 1
        return super().vjp(function, args, kwargs, cotangents)

    def new(self, class_name, *args, **kwargs):
        self.requests += 1
        handle = super().new(class_name, *args, **kwargs)
        owner = self

        class Counted(type(handle)):
            pass

        for name in ("__call__", "vjp", "state_dict", "named_parameters", "load_state_dict", "to", "info"):
            def counted(self_, *a, _name=name, **k):
                owner.requests += 1
                return getattr(super(Counted, self_), _name)(*a, **k)
            setattr(Counted, name, counted)
        handle.__class__ = Counted
        return handle


def fresh_reference(name: str = "variant") -> types.ModuleType:
    """A private copy of the reference solution; patching its globals changes what its classes use."""
    module = types.ModuleType(name)
    module.__file__ = str(REFERENCE)
    exec(compile(REFERENCE.read_text(), str(REFERENCE), "exec"), module.__dict__)
    return module


# --- legitimate alternative implementations ---------------------------------------------------------------

def legit_var_mean_einsum_fused_qkv(mod):
    def layer_norm(x, weight, bias, eps=1e-5):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(var + eps) * weight + bias

    def attention_weights(q, k, mask=None):
        scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        return scores.softmax(dim=-1)

    class FusedMHA(mod.MultiHeadAttention):
        def forward(self, x, causal=False):
            b, s, d = x.shape
            w = torch.cat([self.Wq.weight, self.Wk.weight, self.Wv.weight])
            bias = None if self.Wq.bias is None else torch.cat([self.Wq.bias, self.Wk.bias, self.Wv.bias])
            qkv = F.linear(x, w, bias).reshape(b, s, 3, self.num_heads, self.d_head).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            o = mod.scaled_dot_product_attention(q, k, v, mod.causal_mask(s) if causal else None)
            return self.Wo(o.permute(0, 2, 1, 3).reshape(b, s, d))

    def input_grad_norm(n_layers, residual, d_model=16, seed=0):
        torch.manual_seed(seed)
        layers = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        x = torch.randn(1, d_model, requires_grad=True)
        h = x
        for layer in layers:
            h = torch.tanh(layer(h)) + h if residual else torch.tanh(layer(h))
        (g,) = torch.autograd.grad(h.sum(), x)
        return float(torch.linalg.vector_norm(g))

    mod.layer_norm, mod.attention_weights, mod.MultiHeadAttention = layer_norm, attention_weights, FusedMHA
    mod.input_grad_norm = input_grad_norm


def legit_float64_internals_baddbmm_finfo(mod):
    def layer_norm(x, weight, bias, eps=1e-5):
        xd = x.double()
        mean = xd.mean(-1, keepdim=True)
        var = ((xd - mean) ** 2).mean(-1, keepdim=True)
        return ((xd - mean) / torch.sqrt(var + eps)).to(x.dtype) * weight + bias

    def attention_weights(q, k, mask=None):
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        sq, d = q.shape[-2:]
        sk = k.shape[-2]
        qb = q.expand(*lead, sq, d).reshape(-1, sq, d)
        kb = k.expand(*lead, sk, d).reshape(-1, sk, d)
        scores = torch.baddbmm(torch.zeros(qb.shape[0], sq, sk, dtype=q.dtype), qb, kb.transpose(1, 2),
                               beta=0.0, alpha=1 / math.sqrt(d)).reshape(*lead, sq, sk)
        if mask is not None:
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        e = torch.exp(scores - scores.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    mod.layer_norm, mod.attention_weights = layer_norm, attention_weights


def legit_additive_mask_scaled_q(mod):
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.sum(-1, keepdim=True) / x.shape[-1]
        var = x.var(-1, keepdim=True, unbiased=False)
        return weight * ((x - mean) / (var + eps).sqrt()) + bias

    def attention_weights(q, k, mask=None):
        scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores + torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
        return F.softmax(scores, dim=-1)

    def scaled_dot_product_attention(q, k, v, mask=None):
        return torch.matmul(attention_weights(q, k, mask), v)

    def causal_mask(seq_len, device=None):
        i = torch.arange(seq_len, device=device)
        return i[None, :] <= i[:, None]

    mod.layer_norm, mod.attention_weights, mod.causal_mask = layer_norm, attention_weights, causal_mask
    mod.scaled_dot_product_attention = scaled_dot_product_attention


LEGIT = {"var_mean/einsum/fused-qkv": legit_var_mean_einsum_fused_qkv,
         "float64-internals/baddbmm/finfo.min": legit_float64_internals_baddbmm_finfo,
         "additive-mask/scaled-q": legit_additive_mask_scaled_q}


# --- known-buggy variants: (part, patch, hint substring expected in some failure or None) ------------------

def _ln_body(var_fn=None, eps_outside=False):
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        var = var_fn(x, mean) if var_fn else ((x - mean) ** 2).mean(-1, keepdim=True)
        denom = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
        return (x - mean) / denom * weight + bias
    return layer_norm


def bug_unbiased_variance(mod):
    mod.layer_norm = _ln_body(lambda x, m: x.var(-1, keepdim=True, unbiased=True))


def bug_eps_outside_sqrt(mod):
    mod.layer_norm = _ln_body(eps_outside=True)


def bug_naive_variance(mod):
    mod.layer_norm = _ln_body(lambda x, m: (x * x).mean(-1, keepdim=True) - m * m)


def bug_missing_keepdim(mod):
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1)
        var = ((x - mean) ** 2).mean(-1)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias
    mod.layer_norm = layer_norm


def bug_layernorm_default_eps(mod):
    class LN(mod.LayerNorm):
        def __init__(self, d_model, eps=1e-6):
            super().__init__(d_model, eps)
    mod.LayerNorm = LN


def bug_no_scaling(mod):
    def attention_weights(q, k, mask=None):
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1)
    mod.attention_weights = attention_weights


def bug_inverted_mask(mod):
    def attention_weights(q, k, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1)

    def causal_mask(seq_len, device=None):  # consistent with the inverted convention
        return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
    mod.attention_weights, mod.causal_mask = attention_weights, causal_mask


def bug_strictly_lower_mask(mod):
    mod.causal_mask = lambda seq_len, device=None: torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-1)


def bug_naive_softmax(mod):
    def attention_weights(q, k, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        e = torch.exp(scores)
        if mask is not None:
            e = e * mask
        return e / e.sum(-1, keepdim=True)
    mod.attention_weights = attention_weights


def bug_mask_after_softmax(mod):
    def attention_weights(q, k, mask=None):
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return p * mask if mask is not None else p
    mod.attention_weights = attention_weights


def bug_view_without_transpose(mod):
    class MHA(mod.MultiHeadAttention):
        def forward(self, x, causal=False):
            b, s, d = x.shape
            q, k, v = (t.view(b, self.num_heads, s, self.d_head) for t in (self.Wq(x), self.Wk(x), self.Wv(x)))
            o = mod.scaled_dot_product_attention(q, k, v, mod.causal_mask(s) if causal else None)
            return self.Wo(o.view(b, s, d))
    mod.MultiHeadAttention = MHA


def bug_assertion_error(mod):
    base = mod.MultiHeadAttention

    class MHA(base):
        def __init__(self, d_model, num_heads, bias=True):
            assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
            super().__init__(d_model, num_heads, bias)
    mod.MultiHeadAttention = MHA


def bug_scale_by_d_model(mod):
    class MHA(mod.MultiHeadAttention):
        def forward(self, x, causal=False):
            b, s, d = x.shape
            q, k, v = (self.split_heads(t) for t in (self.Wq(x), self.Wk(x), self.Wv(x)))
            scores = q @ k.transpose(-2, -1) / math.sqrt(d)
            if causal:
                scores = scores.masked_fill(~mod.causal_mask(s), float("-inf"))
            o = torch.softmax(scores, -1) @ v
            return self.Wo(o.transpose(1, 2).reshape(b, s, d))
    mod.MultiHeadAttention = MHA


def bug_mha_ignores_causal(mod):
    class MHA(mod.MultiHeadAttention):
        def forward(self, x, causal=False):
            return super().forward(x, causal=False)
    mod.MultiHeadAttention = MHA


def bug_mha_ignores_bias_flag(mod):
    class MHA(mod.MultiHeadAttention):
        def __init__(self, d_model, num_heads, bias=True):
            super().__init__(d_model, num_heads, True)
    mod.MultiHeadAttention = MHA


def bug_prenorm_residual_from_normed(mod):
    class Block(mod.TransformerBlock):
        def forward(self, x, causal=False):
            if self.norm_first:
                h = self.ln1(x)
                x = h + self.attn(h, causal=causal)
                h = self.ln2(x)
                return h + self.ffn(h)
            return super().forward(x, causal)
    mod.TransformerBlock = Block


def bug_shared_layernorm(mod):
    class Block(mod.TransformerBlock):
        def forward(self, x, causal=False):
            if self.norm_first:
                x = x + self.attn(self.ln1(x), causal=causal)
                return x + self.ffn(self.ln1(x))
            x = self.ln1(x + self.attn(x, causal=causal))
            return self.ln1(x + self.ffn(x))
    mod.TransformerBlock = Block


def bug_block_drops_causal(mod):
    class Block(mod.TransformerBlock):
        def forward(self, x, causal=False):
            return super().forward(x, False)
    mod.TransformerBlock = Block


def bug_block_ignores_norm_first(mod):
    class Block(mod.TransformerBlock):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, False)
    mod.TransformerBlock = Block


def bug_grad_norm_tensor(mod):
    ref = mod.input_grad_norm

    def input_grad_norm(n_layers, residual, d_model=16, seed=0):
        return torch.tensor(ref(n_layers, residual, d_model, seed))
    mod.input_grad_norm = input_grad_norm


def bug_x_before_layers(mod):
    def input_grad_norm(n_layers, residual, d_model=16, seed=0):
        torch.manual_seed(seed)
        x = torch.randn(1, d_model, requires_grad=True)
        layers = [nn.Linear(d_model, d_model) for _ in range(n_layers)]
        h = x
        for layer in layers:
            h = h + torch.tanh(layer(h)) if residual else torch.tanh(layer(h))
        h.sum().backward()
        return x.grad.norm().item()
    mod.input_grad_norm = input_grad_norm


def bug_ignores_seed(mod):
    ref = mod.input_grad_norm
    mod.input_grad_norm = lambda n_layers, residual, d_model=16, seed=0: ref(n_layers, residual, d_model, 0)


BUGGY = {
    "unbiased-variance": ("layer_norm", bug_unbiased_variance, "unbiased variance"),
    "eps-outside-sqrt": ("layer_norm", bug_eps_outside_sqrt, "eps belongs inside the square root"),
    "naive-variance": ("layer_norm", bug_naive_variance, None),
    "missing-keepdim": ("layer_norm", bug_missing_keepdim, None),
    "LayerNorm-default-eps-1e-6": ("layer_norm", bug_layernorm_default_eps, "the default must be 1e-5"),
    "no-1/sqrt(d_k)": ("attention", bug_no_scaling, "without scaling"),
    "inverted-mask-convention": ("attention", bug_inverted_mask, "opposite"),
    "strictly-lower-causal-mask": ("attention", bug_strictly_lower_mask, "excludes the diagonal"),
    "softmax-without-max-subtraction": ("attention", bug_naive_softmax, "subtract the row maximum"),
    "mask-after-softmax": ("attention", bug_mask_after_softmax, "after the softmax"),
    "heads-view-without-transpose": ("multi_head_attention", bug_view_without_transpose, ".view("),
    "AssertionError-not-ValueError": ("multi_head_attention", bug_assertion_error, "AssertionError"),
    "scale-by-sqrt(d_model)": ("multi_head_attention", bug_scale_by_d_model, "1/sqrt(d_head)"),
    "mha-ignores-causal": ("multi_head_attention", bug_mha_ignores_causal, "WITHOUT the causal mask"),
    "mha-ignores-bias=False": ("multi_head_attention", bug_mha_ignores_bias_flag, "unexpected"),
    "pre-norm-residual-from-normalised": ("transformer_block", bug_prenorm_residual_from_normed,
                                          "residual starts from the normalised input"),
    "one-layernorm-for-both": ("transformer_block", bug_shared_layernorm, "ln1 for both sublayers"),
    "block-drops-causal": ("transformer_block", bug_block_drops_causal, "WITHOUT the causal mask"),
    "block-ignores-norm_first": ("transformer_block", bug_block_ignores_norm_first, "post-norm block"),
    "grad-norm-0-dim-tensor": ("gradient_experiment", bug_grad_norm_tensor, "torch.Tensor"),
    "x-drawn-before-layers": ("gradient_experiment", bug_x_before_layers, "BEFORE building the layers"),
    "ignores-seed": ("gradient_experiment", bug_ignores_seed, None),
}


def template_not_implemented() -> types.ModuleType:
    """What an untouched assignment template looks like: every function and forward raises."""
    module = types.ModuleType("template")

    def todo(*args, **kwargs):
        raise NotImplementedError("TODO")

    class Todo(nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        forward = todo

    for name in ("layer_norm", "causal_mask", "attention_weights", "scaled_dot_product_attention", "input_grad_norm"):
        setattr(module, name, todo)
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        setattr(module, name, type(name, (Todo,), {}))
    return module


def returns_none(mod):
    for name in ("layer_norm", "causal_mask", "attention_weights", "scaled_dot_product_attention", "input_grad_norm"):
        setattr(mod, name, lambda *args, **kwargs: None)
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        setattr(mod, name, type(name, (getattr(mod, name),), {"forward": lambda self, *a, **k: None}))


def extra_buffers(mod):
    """Registers persistent buffers next to the required parameters: only the structure tests may fail."""
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        base = getattr(mod, name)

        def __init__(self, *args, _base=base, **kwargs):
            _base.__init__(self, *args, **kwargs)
            self.register_buffer("calls", torch.zeros(()))
        setattr(mod, name, type(name, (base,), {"__init__": __init__}))


def _variant(patch) -> types.ModuleType:
    module = fresh_reference(f"variant_{patch.__name__}")
    patch(module)
    return module


def _failed(results):
    return {k: v for k, v in results.items() if v[0] != "passed"}


def _report(results):
    return "\n".join(f"{k}: {v[0]}\n{v[1]}" for k, v in _failed(results).items())


# --- the kit's tests ---------------------------------------------------------------------------------------

@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The suites' tensors are tiny: with several threads on a busy machine, OpenMP spin-waiting costs ~10x."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference_run():
    submission = CountingSubmission(fresh_reference("reference_copy"))
    ratios: list[tuple[str, float]] = []
    checks.observers.append(lambda what, ratio: ratios.append((what, ratio)))
    try:
        results = run_suite(submission)
    finally:
        checks.observers.clear()
    return results, submission.requests, ratios


def test_reference_passes_everything(reference_run):
    results, _, _ = reference_run
    assert len(results) > 0
    assert not _failed(results), _report(results)


def test_reference_has_a_safety_margin(reference_run):
    """The reference's worst error stays well inside every tolerance."""
    _, _, ratios = reference_run
    worst = max(ratios, key=lambda r: r[1])
    assert worst[1] < 0.25, worst


def test_tests_per_part_and_request_budget(reference_run):
    results, requests, _ = reference_run
    for part, filename in PARTS.items():
        n = sum(1 for k in results if k.startswith(filename))
        assert TESTS_PER_PART[0] <= n <= TESTS_PER_PART[1], (part, n)
    assert requests < 600, requests


@pytest.mark.parametrize("name", list(LEGIT))
def test_legitimate_variants_pass_with_margin(name):
    ratios: list[tuple[str, float]] = []
    checks.observers.append(lambda what, ratio: ratios.append((what, ratio)))
    try:
        results = run_suite(ModuleSubmission(_variant(LEGIT[name])))
    finally:
        checks.observers.clear()
    assert not _failed(results), _report(results)
    worst = max(ratios, key=lambda r: r[1])
    assert worst[1] < 0.5, worst


@pytest.mark.parametrize("name", list(BUGGY))
def test_buggy_variant_fails_its_part(name):
    part, patch, hint = BUGGY[name]
    results = run_suite(ModuleSubmission(_variant(patch)), parts=[part])
    failed = _failed(results)
    assert failed, f"{name}: no test of part {part} failed"
    if hint is not None:
        assert any(hint in text for _, text in failed.values()), _report(results)
    _assert_clean_failures(results)


def test_suites_are_clean():
    """No bare assert, no solutions import, a docstring on every test and every module."""
    for filename in PARTS.values():
        source = (SUITE_DIR / filename).read_text()
        tree = ast.parse(source)
        assert ast.get_docstring(tree), filename
        assert "solutions" not in source, filename
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Assert), (filename, node.lineno)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("solution" in n for n in names), (filename, node.lineno)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                assert ast.get_docstring(node), (filename, node.name)
    tree = ast.parse((ROOT / "autograder" / "checks.py").read_text())
    assert not any(isinstance(n, ast.Assert) for n in ast.walk(tree))


def _assert_clean_failures(results):
    for test, (outcome, text) in _failed(results).items():
        assert outcome == "failed" and text.strip(), test
        for leak in ("Traceback", "During handling", "def test_", "checks.py", ".py:", "C.fail(", "pytest.fail",
                     "check failed ("):
            assert leak not in text, (test, leak, text)


STRUCTURE_TESTS = {
    "test_layer_norm.py::test_LayerNorm_parameters_are_ones_and_zeros",
    "test_layer_norm.py::test_LayerNorm_state_dict_is_compatible_with_torch",
    "test_multi_head_attention.py::test_mha_state_dict_keys_and_shapes",
    "test_multi_head_attention.py::test_mha_loads_random_state_dict",
    "test_multi_head_attention.py::test_mha_indivisible_heads_raise_value_error",
    "test_transformer_block.py::test_block_state_dict_keys_and_shapes",
    "test_transformer_block.py::test_block_loads_random_state_dict",
}


def test_template_fails_everything_cleanly():
    results = run_suite(ModuleSubmission(template_not_implemented()))
    passed = [k for k, (outcome, _) in results.items() if outcome == "passed"]
    assert not passed, passed
    _assert_clean_failures(results)
    expected = ("your code raised NotImplementedError: TODO", "wrong entries", "cannot load the test's weights",
                "nothing was raised", "Error(s) in loading", "does not load into", "expected exactly")
    odd = [k for k, (_, text) in results.items() if not any(e in text for e in expected)]
    assert not odd, _report(results)


def test_returning_none_fails_every_output_test_cleanly():
    results = run_suite(ModuleSubmission(_variant(returns_none)))
    passed = {k for k, (outcome, _) in results.items() if outcome == "passed"}
    assert passed <= STRUCTURE_TESTS, passed
    _assert_clean_failures(results)
    assert any("got None" in text and "return" in text for _, text in results.values())


def test_missing_function_is_reported_by_name():
    module = fresh_reference("missing")
    del module.layer_norm
    results = run_suite(ModuleSubmission(module), parts=["layer_norm"])
    texts = [text for outcome, text in results.values() if outcome != "passed"]
    assert texts and any("name 'layer_norm' is not defined" in t and "define it" in t for t in texts), texts
    _assert_clean_failures(results)


def test_extra_buffers_only_fail_structure_tests():
    results = run_suite(ModuleSubmission(_variant(extra_buffers)))
    failed = set(_failed(results))
    assert failed == {
        "test_layer_norm.py::test_LayerNorm_parameters_are_ones_and_zeros",
        "test_layer_norm.py::test_LayerNorm_state_dict_is_compatible_with_torch",
        "test_multi_head_attention.py::test_mha_state_dict_keys_and_shapes",
        "test_multi_head_attention.py::test_mha_loads_random_state_dict",
        "test_multi_head_attention.py::test_mha_bias_false",
        "test_transformer_block.py::test_block_state_dict_keys_and_shapes",
        "test_transformer_block.py::test_block_loads_random_state_dict",
    }, _report(results)
    _assert_clean_failures(results)
