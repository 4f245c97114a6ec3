"""The kit's own tests for the transformer_block hidden suites, run in-process with ModuleSubmission.

* the reference solution passes every test, with a safety margin;
* an untouched template, code returning None and a missing function fail cleanly and only where they should;
  extra buffers fail nothing, an extra parameter is named; constructors alone score 0 under the rubric;
* failure messages are student-facing (no source, no traceback); the suites never import the solutions,
  never use bare `assert`, document every test, and make a modest number of requests.

Known mistakes and legitimate alternative implementations live in one place, the assignment's catalogue
(assignments/transformer_block/catalogue/), and are graded through the real sandboxed grader by
tests/test_catalogue.py and `python -m autograder check-suite`.
"""
from __future__ import annotations

import ast
import sys
import types

import pytest
import torch
import torch.nn as nn

from autograder import REPO_ROOT as ROOT  # noqa: E402
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from autograder.judging import judge  # noqa: E402
from autograder.judging.checks import comparison  # noqa: E402
from autograder.grading.rubric import STRUCTURE_ALONE, load_rubric, score  # noqa: E402
from autograder.model.submission import ModuleSubmission  # noqa: E402

SUITE_DIR = ROOT / "assignments" / "transformer_block"
REFERENCE = ROOT / "solutions" / "transformer_block.py"
PARTS = {part.name: part.suite for part in load_rubric("transformer_block").parts}
TESTS_PER_PART = (3, 15)  # a "Part Nb" sub-part measures one small thing (parameter_count has three checks)


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

    def call_inputs(self, function, *args, **kwargs):
        self.requests += 1
        return super().call_inputs(function, *args, **kwargs)

    def vjp(self, function, args, kwargs, cotangents):
        self.requests += 1
        return super().vjp(function, args, kwargs, cotangents)

    def new(self, class_name, *args, **kwargs):
        self.requests += 1
        handle = super().new(class_name, *args, **kwargs)
        owner = self

        class Counted(type(handle)):
            pass

        for name in ("__call__", "forward_inputs", "vjp", "state_dict", "named_parameters", "load_state_dict", "to", "info"):
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


# the contract's functions (its classes are LayerNorm, MultiHeadAttention and TransformerBlock)
FUNCTIONS = ("layer_norm", "causal_mask", "attention_weights", "scaled_dot_product_attention", "mask_dependence",
             "largest_dependence", "ideal_head_weights", "guaranteed_share", "permutation_error", "input_grad_norm",
             "batch_normalise", "batch_dependence", "block_parameter_count", "layer_grad_norms")


def template_not_implemented() -> types.ModuleType:
    """What an untouched assignment template looks like: every function and forward raises."""
    module = types.ModuleType("template")

    def todo(*args, **kwargs):
        raise NotImplementedError("TODO")

    class Todo(nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        forward = todo

    for name in FUNCTIONS:
        setattr(module, name, todo)
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        setattr(module, name, type(name, (Todo,), {}))
    return module


def returns_none(mod):
    for name in FUNCTIONS:
        setattr(mod, name, lambda *args, **kwargs: None)
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        setattr(mod, name, type(name, (getattr(mod, name),), {"forward": lambda self, *a, **k: None}))


def extra_buffers(mod):
    """Registers buffers next to the required parameters, persistent and not, one of them named `bias` as
    minGPT's causal mask is: the contract fixes parameters only, so nothing may fail."""
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        base = getattr(mod, name)

        def __init__(self, *args, _base=base, _name=name, **kwargs):
            _base.__init__(self, *args, **kwargs)
            self.register_buffer("calls", torch.zeros(()))
            self.register_buffer("scratch", torch.ones(3), persistent=False)
            if _name == "MultiHeadAttention":
                self.register_buffer("bias", torch.ones(16, 16).tril().view(1, 1, 16, 16))
        setattr(mod, name, type(name, (base,), {"__init__": __init__}))


def extra_parameter(mod):
    """MultiHeadAttention with one parameter too many (a learned temperature)."""
    base = mod.MultiHeadAttention

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self.temperature = nn.Parameter(torch.ones(()))
    mod.MultiHeadAttention = type("MultiHeadAttention", (base,), {"__init__": __init__})


def constructors_only(mod):
    """Constructors as in the reference; every function, forward and helper raises, as released."""
    def todo(*args, **kwargs):
        raise NotImplementedError()

    for name in FUNCTIONS:
        setattr(mod, name, todo)
    for name in ("LayerNorm", "MultiHeadAttention", "TransformerBlock"):
        setattr(mod, name, type(name, (getattr(mod, name),), {"forward": todo, "split_heads": todo}))


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
    comparison.observers.append(lambda what, ratio: ratios.append((what, ratio)))
    try:
        results = run_suite(submission)
    finally:
        comparison.observers.clear()
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
    assert requests < 800, requests  # 539 before the six sub-parts and padding masks (about 190 together)


def test_suites_are_clean():
    """No bare assert, no solutions import, a docstring on every test and every module, helpers included."""
    for filename in sorted(p.name for p in SUITE_DIR.glob("*.py") if p.name != "__init__.py"):
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
    for path in (ROOT / "autograder" / "judging" / "checks").glob("*.py"):
        assert not any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(path.read_text()))), path.name


def _assert_clean_failures(results):
    for test, (outcome, text) in _failed(results).items():
        assert outcome == "failed" and text.strip(), test
        for leak in ("Traceback", "During handling", "def test_", "checks.py", ".py:", "C.fail(", "pytest.fail",
                     "check failed ("):
            assert leak not in text, (test, leak, text)


# the checks a constructor alone can pass: exactly those rubric.toml declares structural
STRUCTURE_TESTS = {
    "test_layer_norm.py::test_LayerNorm_parameters_are_ones_and_zeros",
    "test_layer_norm.py::test_LayerNorm_state_dict_is_compatible_with_torch",
    "test_multi_head_attention.py::test_mha_parameter_names_and_shapes",
    "test_multi_head_attention.py::test_mha_loads_random_state_dict",
    "test_multi_head_attention.py::test_mha_indivisible_heads_raise_value_error",
    "test_transformer_block.py::test_block_parameter_names_and_shapes",
    "test_transformer_block.py::test_block_loads_random_state_dict",
}


def test_template_fails_everything_cleanly():
    results = run_suite(ModuleSubmission(template_not_implemented()))
    passed = [k for k, (outcome, _) in results.items() if outcome == "passed"]
    assert not passed, passed
    _assert_clean_failures(results)
    expected = ("your code raised NotImplementedError: TODO", "wrong parameters", "nothing was raised",
                "Error(s) in loading", "do not load into", "expected exactly",
                "has no attribute `ln1`")  # the block's own-parts check takes its submodules by name
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


def test_extra_buffers_fail_nothing():
    results = run_suite(ModuleSubmission(_variant(extra_buffers)))
    assert not _failed(results), _report(results)


def test_extra_parameter_is_named_and_nothing_else_is_blamed():
    results = run_suite(ModuleSubmission(_variant(extra_parameter)), parts=["multi_head_attention"])
    failed = _failed(results)
    assert failed and all("unexpected ['temperature']" in text for _, text in failed.values()), _report(results)
    assert not any("bias=bias" in text for _, text in failed.values()), _report(results)
    _assert_clean_failures(results)


def test_constructors_alone_score_zero():
    """The structure checks pass on their own, and the rubric gives them nothing without a passing behaviour
    check of the same part."""
    outcomes = judge.run_suite([SUITE_DIR / f for f in PARTS.values()],
                               ModuleSubmission(_variant(constructors_only)))
    passed = {f"{o.module}.py::{o.name}" for o in outcomes if o.passed}
    assert passed == STRUCTURE_TESTS, passed
    rubric = load_rubric("transformer_block")
    declared = {f"{p.suite}::{name}" for p in rubric.parts for name in p.structural}
    assert declared == STRUCTURE_TESTS
    parts = score(rubric, outcomes)
    assert [p.score for p in parts] == [0.0] * len(parts)
    assert all(t.message == STRUCTURE_ALONE and not t.passed for p in parts for t in p.tests
               if f"{p.part.suite}::{t.name}" in STRUCTURE_TESTS)


def test_mha_padding_reference_is_torchs_own_key_padding_mask():
    """The MHA suite hands torch's nn.MultiheadAttention the padding as a merged [batch * heads, S, S] attn_mask
    (key_padding_mask= would cost every cold grade a sympy import); that must stay exactly what torch computes
    from key_padding_mask itself, alone and with the causal mask, including the queries that see no key (the
    suite's reference sets those to Wo's bias, torch's answer on this path)."""
    from assignments.transformer_block import test_multi_head_attention as mha_suite
    from autograder.judging import checks as C

    x = C.randn(3, 5, 8, seed=1, dtype=torch.float64)
    state = C.mha_state("", 8, seed=2, dtype=torch.float64)
    at_the_end = torch.arange(5) >= torch.tensor([[5], [3], [1]])  # True = padding
    at_the_front = torch.arange(5) < torch.tensor([[2], [0], [5]])  # with causal: queries that see no key
    for padding in (at_the_end, at_the_front):
        for causal in (False, True):
            ours = mha_suite._reference(x, state, 2, causal=causal, padding=padding)(torch.float64)
            module = mha_suite._torch_mha(state, 8, 2, True, torch.float64)
            with torch.no_grad():
                theirs = module(x, x, x, need_weights=False, key_padding_mask=padding,
                                attn_mask=~C.tril_mask(5) if causal else None)[0]
            assert torch.equal(ours, theirs), (causal, padding)
