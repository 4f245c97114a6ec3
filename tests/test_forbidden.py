"""Torch's own implementations stay unusable however the submission attacks the child, and the grade never
needs the child's word for it.

Each attack below is a correct submission whose `layer_norm` calls torch's own implementation after trying
to hide that: tampering with the op recorder, the protocol or torch's modes, moving the call to another
thread, or reaching the same numbers through another kernel or torch's Python reference code.  Each must
score 0 in layer_norm, through the command line and through nbgrader, while the parts that do not use it
keep full marks.  Correct variants (the catalogue) keep every point: tests/test_catalogue.py.
"""
from __future__ import annotations

import json
import textwrap

import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from conftest import grade_class_both_ways, part_scores

HONEST_BODY = ("    mean = x.mean(dim=-1, keepdim=True)\n"
               "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, as torch.nn.LayerNorm\n"
               "    return (x - mean) / torch.sqrt(var + eps) * weight + bias")
TORCH_LAYER_NORM = "torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)"


def body(code: str) -> str:
    return textwrap.indent(textwrap.dedent(code).strip(), "    ")


# student -> (new body of layer_norm, a cell run after the definitions)
ATTACKS = {
    "recorder-patched-in-sys-modules": (
        f"return {TORCH_LAYER_NORM}",
        "import sys\nfor name, module in list(sys.modules.items()):\n"
        "    if 'recorder' in name and hasattr(module, 'OpRecorder'):\n"
        "        module.OpRecorder.saw = lambda self, op: None"),
    "recorder-emptied-through-gc": (
        f"import gc\nout = {TORCH_LAYER_NORM}\n"
        "for o in gc.get_objects():\n    if type(o).__name__ == 'OpRecorder':\n        o.seen.clear()\n"
        "        o.forbidden = frozenset()\nreturn out", ""),
    "recorder-drained-up-the-stack": (
        f"import sys\nout = {TORCH_LAYER_NORM}\nframe = sys._getframe()\n"
        "while frame is not None:\n    server = frame.f_locals.get('self')\n"
        "    if hasattr(server, 'recorder'):\n        server.recorder.take()\n    frame = frame.f_back\nreturn out", ""),
    "protocol-send-wrapped": (
        f"return {TORCH_LAYER_NORM}",
        "import sys\nfor name, module in list(sys.modules.items()):\n"
        "    if name.endswith('protocol') and hasattr(module, 'send'):\n"
        "        _send = module.send\n"
        "        module.send = lambda sock, header, blobs=(), _s=_send: _s(sock, {**header, 'forbidden': []}, blobs)"),
    "modes-switched-off": (
        "from torch.utils._python_dispatch import _disable_current_modes\n"
        f"with torch._C.DisableTorchFunction(), _disable_current_modes():\n    return {TORCH_LAYER_NORM}", ""),
    "worker-thread": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        f"with ThreadPoolExecutor(1) as pool:\n    return pool.submit(lambda: {TORCH_LAYER_NORM}).result()", ""),
    "batch-norm-kernel": (
        "rows = x.reshape(-1, x.shape[-1]).t()  # one 'channel' per row: batch norm over the features\n"
        "normed = torch.nn.functional.batch_norm(rows, None, None, training=True, eps=eps)\n"
        "return normed.t().reshape(x.shape) * weight + bias", ""),
    "rms-norm-of-centred-input": (
        "centred = x - x.mean(dim=-1, keepdim=True)\n"
        "return torch.nn.functional.rms_norm(centred, x.shape[-1:], weight, eps) + bias", ""),
    "torch-refs": (
        "import torch._refs\nreturn torch._refs.native_layer_norm(x, list(x.shape[-1:]), weight, bias, eps)[0]", ""),
    "torch-decomp-table": (
        "import torch._decomp\nfn = torch._decomp.decomposition_table[torch.ops.aten.native_layer_norm.default]\n"
        "return fn(x, list(x.shape[-1:]), weight, bias, eps)[0]", ""),
    # cousins: the aten operator called directly, torch's module, and torch.nn.functional reloaded from source
    "aten-operator-directly": (
        "return torch.ops.aten.native_layer_norm(x, list(x.shape[-1:]), weight, bias, eps)[0]", ""),
    "torch-module-LayerNorm": (
        "module = torch.nn.LayerNorm(x.shape[-1], eps=eps)\nwith torch.no_grad():\n"
        "    module.weight.copy_(weight)\n    module.bias.copy_(bias)\nreturn module(x)", ""),
    "functional-reloaded": (
        f"import importlib\nF = importlib.reload(torch.nn.functional)\nreturn {TORCH_LAYER_NORM}", ""),
    "everything-at-once": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from torch.utils._python_dispatch import _disable_current_modes\n"
        "def hidden():\n"
        f"    with torch._C.DisableTorchFunction(), _disable_current_modes():\n        return {TORCH_LAYER_NORM}\n"
        "with ThreadPoolExecutor(1) as pool:\n    return pool.submit(hidden).result()",
        "import sys\nfor name, module in list(sys.modules.items()):\n"
        "    if hasattr(module, 'OpRecorder'):\n        module.OpRecorder.saw = lambda self, op: None"),
}
THROUGH_NBGRADER = sorted(ATTACKS)
UNTOUCHED_PARTS = ("attention", "multi_head_attention", "gradient_experiment")


def attack_notebook(student: str) -> dict:
    new_body, extra_cell = ATTACKS[student]
    notebook = student_notebook("transformer_block", [(HONEST_BODY, body(new_body))])
    if extra_cell:
        notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": extra_cell, "outputs": [],
                                  "execution_count": None})
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("forbidden")
    folder, out = root / "class", root / "out"
    for student in ATTACKS:
        write_notebook(attack_notebook(student), folder / f"{student}.ipynb")
    done, nbgrader_scores = grade_class_both_ways(folder, out, root / "course", THROUGH_NBGRADER)
    assert done.returncode == 0, done.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}, nbgrader_scores


@pytest.mark.parametrize("student", sorted(ATTACKS))
def test_attack_scores_zero_in_the_part_it_cheats(graded, student):
    results, _ = graded
    scores = part_scores(results[student])
    assert scores["layer_norm"] == 0, results[student]["output"][:3000]
    for part in UNTOUCHED_PARTS:
        assert scores[part] == results[student]["extra_data"]["parts"][part]["max_score"], (part, scores)


def test_nbgrader_gives_the_same_grade(graded):
    results, nbgrader_scores = graded
    for student in THROUGH_NBGRADER:
        assert nbgrader_scores[student] == pytest.approx(results[student]["score"], abs=1e-3), student


DISABLE_THEN_TRY = '''
import json, sys, torch, torch.nn as nn, torch.nn.functional as F
from autograder.child import forbidden
from autograder.grading.rubric import load_rubric
forbidden.disable(load_rubric("transformer_block").forbidden_ops)
x = torch.randn(2, 4, 8, requires_grad=True)
fine = {
    "softmax": lambda: torch.softmax(x, -1), "log_softmax": lambda: F.log_softmax(x, -1),
    "mean/var/var_mean": lambda: (x.mean(-1), x.var(-1, unbiased=False), torch.var_mean(x, -1)),
    "matmul/bmm/einsum": lambda: (x @ x.transpose(-2, -1), torch.bmm(x, x.transpose(1, 2)),
                                  torch.einsum("bij,bkj->bik", x, x)),
    "rsqrt/sqrt": lambda: (torch.rsqrt(x.abs() + 1), torch.sqrt(x.abs())),
    "nn.Linear": lambda: nn.Linear(8, 8)(x), "dropout": lambda: F.dropout(x, 0.1),
    "masked_fill/tril/where": lambda: (x.masked_fill(torch.ones(4, 8).tril().bool(), 0.0),
                                       torch.where(x > 0, x, torch.zeros(()))),
    "gelu/relu": lambda: (F.gelu(x), F.relu(x)),
    "backward": lambda: torch.softmax(x @ x.transpose(-2, -1), -1).sum().backward(),
}
off_limits = {
    "F.layer_norm": lambda: F.layer_norm(x, (8,)), "nn.LayerNorm": lambda: nn.LayerNorm(8)(x),
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True),
    "nn.MultiheadAttention": lambda: nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x),
    "nn.TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(8, 2, batch_first=True)(x),
    "F.batch_norm": lambda: F.batch_norm(x.reshape(-1, 8), None, None, training=True),
    "F.rms_norm": lambda: F.rms_norm(x, (8,)), "F.group_norm": lambda: F.group_norm(x, 1),
    "torch.ops.aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5),
}
report = {}
for group, cases in (("fine", fine), ("off_limits", off_limits)):
    for name, call in cases.items():
        try:
            call()
            report[name] = "ran"
        except Exception as exc:
            report[name] = type(exc).__name__
print(json.dumps(report))
'''


def test_disabled_implementations_raise_and_everything_else_works():
    import subprocess
    import sys

    from autograder import REPO_ROOT as ROOT

    done = subprocess.run([sys.executable, "-c", DISABLE_THEN_TRY], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    fine = [name for name in report if report[name] == "ran"]
    assert {n for n, outcome in report.items() if outcome != "ran"} == {
        "F.layer_norm", "nn.LayerNorm", "F.scaled_dot_product_attention", "nn.MultiheadAttention",
        "nn.TransformerEncoderLayer", "F.batch_norm", "F.rms_norm", "F.group_norm",
        "torch.ops.aten.native_layer_norm"}, report
    assert all(report[n] == "ForbiddenOperation" for n in report if n not in fine), report


STALE_PLAN = """
import json
from autograder.child import forbidden
first = forbidden.python_plan(["*layer_norm*"])
again = forbidden.python_plan(["*layer_norm*"])
import wave  # anything imported since: the plan may miss what it brought, so it is worked out again
after_import = forbidden.python_plan(["*layer_norm*"])
print(json.dumps([again is first, after_import is first, after_import == forbidden.python_plan(["*layer_norm*"]),
                  "torch.nn.functional.layer_norm" in {f"{h}.{n}" for h, n in after_import.attributes}]))
"""


def test_a_plan_is_kept_until_the_process_imports_something():
    """The zygote keeps one plan per pattern set; a rubric's preload imported since makes it stale."""
    import subprocess
    import sys

    from autograder import REPO_ROOT as ROOT

    done = subprocess.run([sys.executable, "-c", STALE_PLAN], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, False, True, True]
