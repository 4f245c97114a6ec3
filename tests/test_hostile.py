"""Hostile and broken submissions through the real command line: contained, and never worth a point.

Each case asserts that the grader exits normally within the submission's limit plus a margin, that the
submission earns nothing it did not earn honestly, that no process it started survives, and that
results.json stays small.
"""
from __future__ import annotations

import json
import uuid

import pytest

from autograder.samples import student_notebook, write_notebook
from conftest import full_marks, grade, part_scores, processes_mentioning, run_cli

LIMIT = 60
FLAGS = ["--timeout", str(LIMIT), "--cell-timeout", "3", "--request-timeout", "3"]
MARGIN = 20  # interpreter start-up, suites, and killing the child
MAX_RESULTS_BYTES = 200_000


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def notebook(tmp_path, name: str, extra_cells=(), mutations=()):
    nb = student_notebook(list(mutations))
    nb["cells"] += [code_cell(c) for c in extra_cells]
    return write_notebook(nb, tmp_path / f"{name}.ipynb")


def graded_within_limits(path, tmp_path):
    results, seconds, _ = grade(path, tmp_path, *FLAGS)
    assert seconds < LIMIT + MARGIN
    assert (tmp_path / f"{path.stem}.results.json").stat().st_size < MAX_RESULTS_BYTES
    return results


TOP_LEVEL_HAZARDS = {
    "endless loop": "while True:\n    pass",
    "endless loop ignoring signals": ("import signal\nfor s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM):\n"
                                      "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"),
    "sys.exit": "import sys\nsys.exit(0)",
    "os._exit": "import os\nos._exit(3)",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "deep recursion": ("import sys\nsys.setrecursionlimit(10**8)\ndef deeper(n):\n    return deeper(n + 1) + 1\n"
                       "deeper(0)"),
    "memory bomb": "hog = []\nwhile True:\n    hog.append(bytearray(1 << 28))",
    "print flood": "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(chunk)",
    "closed stdout": "import os, sys\nsys.stdout.close()\nos.close(1)\nos.close(2)",
    "BaseException subclass": "class Escape(BaseException):\n    pass\nraise Escape('out')",
    "KeyboardInterrupt": "raise KeyboardInterrupt",
}


def test_top_level_hazards_cost_only_their_own_cells(tmp_path):
    path = notebook(tmp_path, "hazards", TOP_LEVEL_HAZARDS.values())
    results = graded_within_limits(path, tmp_path)
    assert results["score"] == 100, results["output"]
    first = sum(c["cell_type"] == "code" for c in student_notebook()["cells"]) + 1
    for number, hazard in enumerate(TOP_LEVEL_HAZARDS, start=first):
        if hazard not in ("print flood", "closed stdout"):  # the only two that raise nothing
            assert f"Cell {number} raised" in results["output"], (hazard, results["output"])


MHA_FORWARD = "        batch, seq_len, d_model = x.shape\n        q, k, v"
FORWARD_HAZARDS = {
    "endless loop": "        while True:\n            pass\n",
    "endless loop ignoring signals": ("        import signal\n        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                      "        while True:\n            pass\n"),
    "os._exit": "        import os\n        os._exit(0)\n",
    "segfault": "        import ctypes\n        ctypes.string_at(0)\n",
    "memory bomb": "        torch.empty(10**11)\n",
    "KeyboardInterrupt": "        raise KeyboardInterrupt\n",
}


@pytest.mark.parametrize("hazard", sorted(FORWARD_HAZARDS))
def test_hazard_in_forward_costs_only_the_parts_that_run_it(tmp_path, hazard):
    path = notebook(tmp_path, "forward", mutations=[(MHA_FORWARD, FORWARD_HAZARDS[hazard] + MHA_FORWARD)])
    results = graded_within_limits(path, tmp_path)
    scores, maxima = part_scores(results), full_marks(results)
    for untouched in ("layer_norm", "attention", "gradient_experiment"):
        assert scores[untouched] == maxima[untouched], results["output"]
    assert scores["multi_head_attention"] < maxima["multi_head_attention"]
    assert scores["transformer_block"] < maxima["transformer_block"]


BUGGY_LAYER_NORM = ("    mean = x.mean(dim=-1, keepdim=True)\n", "    return x\n    mean = x.mean(dim=-1, keepdim=True)\n")
TAMPER_CELLS = [
    # what beat nbgrader and otter: make every comparison pass
    ("import torch, numpy\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
     "torch.testing.assert_close = lambda *a, **k: None\nnumpy.testing.assert_allclose = lambda *a, **k: None\n"
     "numpy.allclose = lambda *a, **k: True\ntorch.Tensor.allclose = lambda *a, **k: True"),
    # an IPython input transformer that turns every later cell into `pass`
    "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])",
    # the test framework and the module table
    ("import sys, pytest\npytest.fail = lambda *a, **k: None\npytest.approx = lambda *a, **k: 0\n"
     "sys.modules['pytest'] = None\nsys.modules['autograder'] = None"),
    # a tensor that claims to equal anything
    ("import torch\nclass Agreeable(torch.Tensor):\n"
     "    def __eq__(self, other):\n        return True\n"
     "    def __sub__(self, other):\n        return torch.zeros_like(torch.Tensor(self))\n"
     "    def abs(self):\n        return torch.zeros_like(torch.Tensor(self))\n"
     "_honest_layer_norm = layer_norm\n"
     "def layer_norm(x, weight, bias, eps=1e-5):\n    return _honest_layer_norm(x, weight, bias, eps).as_subclass(Agreeable)"),
]


def test_tamper_cells_gain_nothing(tmp_path):
    honest = graded_within_limits(notebook(tmp_path, "buggy", mutations=[BUGGY_LAYER_NORM]), tmp_path)
    tampered = graded_within_limits(notebook(tmp_path, "tampered", TAMPER_CELLS, [BUGGY_LAYER_NORM]), tmp_path)
    assert honest["score"] < 100
    for part, score in part_scores(tampered).items():
        assert score <= part_scores(honest)[part], (part, tampered["output"])


def test_no_process_outlives_grading(tmp_path):
    token = f"autograder-test-{uuid.uuid4().hex}"
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(3600)', '{token}']"
    cells = [
        f"import subprocess, sys\nsubprocess.Popen({sleeper})",
        f"import subprocess, sys\nsubprocess.Popen({sleeper}, start_new_session=True)",
        # a classic daemon: double fork and setsid, parented to nobody we know
        (f"import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
         f"        os.execv(sys.executable, {sleeper})\n    os._exit(0)"),
    ]
    graded_within_limits(notebook(tmp_path, "lingering", cells), tmp_path)
    assert processes_mentioning(token) == []


def test_submission_cannot_forge_results(tmp_path):
    out = tmp_path / "forged.results.json"
    forged = json.dumps({"score": 100, "max_score": 100, "tests": []})
    cells = [
        f"import atexit\natexit.register(lambda: open({str(out)!r}, 'w').write({forged!r}))",
        f"try:\n    open({str(out)!r}, 'w').write({forged!r})\nexcept OSError as e:\n    print(e)",
        f"open('results.json', 'w').write({forged!r})",
    ]
    results = graded_within_limits(notebook(tmp_path, "forged", cells, [BUGGY_LAYER_NORM]), tmp_path)
    assert results["score"] < 100 and results["tests"]


def test_one_submission_never_touches_another(tmp_path):
    folder = tmp_path / "class"
    notebook(folder, "alice")
    notebook(folder, "mallory", ["import os\nos._exit(1)", "while True:\n    pass"],
             [(MHA_FORWARD, FORWARD_HAZARDS["segfault"] + MHA_FORWARD)])
    (folder / "zed.ipynb").write_bytes(b"\x00\xff not a notebook")
    done = run_cli("grade-all", folder, "-o", tmp_path / "out", *FLAGS)
    assert done.returncode == 0, done.stderr
    grades = (tmp_path / "out" / "grades.csv").read_text().splitlines()
    assert grades[1].startswith("alice,100,100")
    assert grades[2].startswith("mallory,") and grades[3].startswith("zed,0,100")
