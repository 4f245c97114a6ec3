"""torch's own implementations of graded operations are noticed by every route, as the child watches them: the
recorder's torch-function mode plus the dispatcher overrides of autograder.child.forbidden; hand-written code is not.
forbidden.disable cannot be undone in a process, so the routes run in a fresh interpreter."""
import json
import subprocess
import sys

import pytest

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
seen = {}
for name, code in json.loads(sys.argv[1]).items():
    recorder.take()
    with recorder:
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


def test_recording_stops_outside_the_context_but_the_call_still_fails(seen):
    assert seen["outside the context"] == ["layer_norm"]  # told by the dispatcher override, which always refuses
