"""torch's own implementations of graded operations are noticed by every route, as the child watches them: the
dispatcher overrides of autograder.child.forbidden and the code autograder.child.provenance swaps report each
call they refuse to the recorder; hand-written code is not noticed.  The recorder watches no torch call itself
(no torch-function mode): every name such a mode could see is refused, and reported, by those levels.
forbidden.disable cannot be undone in a process, so the routes run in a fresh interpreter."""
import json
import subprocess
import sys

import pytest

from autograder.authoring.assignment import assignment_names
from conftest import REPO

ROUTES = {
    "F.layer_norm": "F.layer_norm(x, (8,))",
    "getattr(F, 'layer' + '_norm')": "getattr(F, 'layer' + '_norm')(x, (8,))",
    "torch.layer_norm": "torch.layer_norm(x, [8])",
    "torch.ops.aten.native_layer_norm": "torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5)",
    "nn.LayerNorm subclass": "SubclassedLayerNorm(8)(x)",
    "F.group_norm over one group": "F.group_norm(x.transpose(1, 2), 1)",
    "F.scaled_dot_product_attention": "F.scaled_dot_product_attention(x, x, x)",
    "torch.ops.aten flash kernel": ("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu("
                                    "x.unsqueeze(1), x.unsqueeze(1), x.unsqueeze(1))"),
    "nn.MultiheadAttention": "nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x)",
    "nn.MultiheadAttention fast path": ("no_grad(lambda: nn.MultiheadAttention(8, 2, batch_first=True).eval()"
                                        "(x, x, x, need_weights=False))"),
    "nn.TransformerEncoderLayer fast path": ("no_grad(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, "
                                             "batch_first=True).eval()(x))"),
    "torch.batch_norm": "torch.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, False)",
    "torch._C._nn.scaled_dot_product_attention": "torch._C._nn.scaled_dot_product_attention(x, x, x)",
    # no kernel computes these here (shapes only, or not on the CPU): refused all the same, before dispatch
    "torch.native_layer_norm on meta tensors": ("torch.native_layer_norm(torch.empty(2, 5, 8, device='meta'), [8], "
                                                "None, None, 1e-5)"),
    "torch.quantized_batch_norm": "torch.quantized_batch_norm(x, None, None, x.mean(), x.var(), 1e-5, 1.0, 0)",
    "torch.miopen_batch_norm": "torch.miopen_batch_norm(x, x, None, None, None, True, 0.1, 1e-5)",
}
HAND_WRITTEN = """
mean = x.mean(-1, keepdim=True)
var = ((x - mean) ** 2).mean(-1, keepdim=True)
y = (x - mean) / torch.sqrt(var + 1e-5)
weights = torch.softmax(y @ y.transpose(-2, -1) / 8 ** 0.5, dim=-1)
(weights @ nn.Linear(8, 8)(y)).sum().backward()
"""
SCRIPT = """
import json, sys
import torch, torch.nn as nn, torch.nn.functional as F
from autograder.child import forbidden
from autograder.child.op_recorder import OpRecorder
from autograder.grading.rubric import load_rubric

class SubclassedLayerNorm(nn.LayerNorm):
    pass

def no_grad(make):
    with torch.no_grad():
        return make()

recorder = OpRecorder(frozenset(load_rubric("transformer_block").forbidden_ops))
forbidden.disable(recorder.forbidden, recorder.saw, recorder.refused)
x = torch.randn(2, 5, 8)
seen, modes = {}, set()
for name, code in json.loads(sys.argv[1]).items():
    recorder.take()
    with recorder:
        modes.add(torch._C._is_torch_function_mode_enabled())
        try:
            exec(code, globals())
        except forbidden.ForbiddenOperation:
            pass
    seen[name] = sorted(recorder.take())
F.layer_norm  # outside the context: not recorded
try:
    F.layer_norm(x, (8,))
except forbidden.ForbiddenOperation:
    pass
seen["outside the context"] = sorted(recorder.seen)
seen["torch-function mode during a request"] = sorted(modes)
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen() -> dict[str, list[str]]:
    routes = {**ROUTES, "hand-written": HAND_WRITTEN}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(routes)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_to_torchs_implementation_is_noticed(seen, route):
    assert seen[route], route


def test_hand_written_layer_norm_and_attention_are_not_flagged(seen):
    assert seen["hand-written"] == []


def test_a_call_outside_a_request_is_refused_and_reported_all_the_same(seen):
    assert seen["outside the context"] == ["layer_norm"]  # told by the dispatcher override, which always refuses


def test_a_request_runs_under_no_torch_function_mode(seen):
    """A mode would cost a Python call on each of a request's torch calls (over a quarter of its CPU time) and see
    nothing the dispatcher does not report (test below)."""
    assert seen["torch-function mode during a request"] == [False]


# Every torch function a torch-function mode could be handed (torch.overrides' list, and every native binding:
# torch.X, torch._C._nn.X, Tensor.X, ...) whose name is forbidden is refused and reported without one: a binding
# of the aten operator of its name, whose kernels forbidden overrides, or a Python function whose code was swapped.
WATCHED = """
import json, sys, types
import torch
from torch.overrides import get_overridable_functions
from autograder.child import forbidden
from autograder.child.op_recorder import OpRecorder
from autograder.grading.rubric import load_rubric

patterns = load_rubric(sys.argv[1]).forbidden_ops
matches = forbidden.matcher(patterns)
functions = {}
for namespace, listed in get_overridable_functions().items():
    for function in listed:
        functions[id(function)] = (f"{getattr(namespace, '__name__', namespace)}.{function.__name__}", function)
for namespace in (torch._C._VariableFunctions, torch._C._nn, torch._C._linalg, torch._C._special, torch._C._fft,
                  torch._C._nested, torch._C.TensorBase):
    for name in dir(namespace):
        if callable(function := getattr(namespace, name, None)):
            functions.setdefault(id(function), (f"{type(namespace).__name__}.{name}", function))
named = [(where, f) for where, f in functions.values() if matches(getattr(f, "__name__", None) or "")]
recorder = OpRecorder(frozenset(patterns))
forbidden.disable(patterns, recorder.saw, recorder.refused)
overridden = {name for name, _, _ in forbidden.kernel_plan(tuple(sorted(patterns)))}
missed = [where for where, f in named if not (
    f.__code__.co_filename == "<refused>" if isinstance(f, types.FunctionType) else f.__name__ in overridden)]
print(json.dumps({"named": sorted(where for where, _ in named), "missed": missed}))
"""


@pytest.mark.parametrize("assignment", assignment_names())
def test_every_forbidden_name_a_torch_function_mode_could_see_is_refused_by_the_dispatcher_or_provenance(assignment):
    done = subprocess.run([sys.executable, "-c", WATCHED, assignment], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert len(found["named"]) >= 10, found  # the forbidden names are found at all (F.*, torch.*, aten bindings)
    assert found["missed"] == [], found["missed"]
