"""Torch's own implementation is refused by what it is, not by the name a student reaches it under
(autograder/child/provenance.py, autograder/child/forbidden.py).

Every route of tests/torch_routes.py (torch's private namespaces, other overloads and kernels of a graded
operation, torch.nn's own classes driving the student's modules, torch's source compiled afresh, native code)
is graded through the command line in one class with the honest variants.  A route earns nothing in the part
it cheats beyond what a submission whose cell raised would earn there, and the student is told which route
was refused; the honest variants, and the general-purpose operations of BORDERLINE, are never refused.
"""
from __future__ import annotations

import json

import pytest

from autograder.authoring.catalogue import Entry, load
from autograder.model.limits import Limits
from autograder.host.remote import RemoteSubmission
from conftest import full_marks, part_scores, run_cli
from torch_routes import ASSIGNMENT, BORDERLINE, COPIED, LEGITIMATE, ROUTES, submission

REFUSED = "is off-limits in this assignment"
CELLS = sorted({cell for _, cell, _, _ in ROUTES.values()})


@pytest.fixture(scope="module")
def class_run(tmp_path_factory) -> tuple[dict[str, dict], str]:
    """Each submission's results.json, and what grade-all printed."""
    folder, out = tmp_path_factory.mktemp("routes"), tmp_path_factory.mktemp("routes-out")
    catalogue = load(ASSIGNMENT)
    for name in [*ROUTES, *BORDERLINE, *COPIED, *(variant for variant, *_ in LEGITIMATE)]:
        (folder / f"{name}.py").write_text(submission(name))
    for cell in CELLS:  # what the part earns when the route's cell defines nothing at all
        raises = Entry(f"raises-{cell}", "the cell raises", replace={cell: "raise RuntimeError('nothing here')"})
        (folder / f"raises-{cell}.py").write_text(catalogue.python_source(raises))
    done = run_cli("grade-all", folder, "-o", out, "--jobs", "2", "--assignment", ASSIGNMENT, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}, done.stdout + done.stderr


@pytest.fixture(scope="module")
def graded(class_run) -> dict[str, dict]:
    return class_run[0]


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_a_route_to_torchs_own_implementation_earns_nothing_in_its_part(graded, name):
    part, cell, _, _ = ROUTES[name]
    result, baseline = graded[name], graded[f"raises-{cell}"]
    assert part_scores(result)[part] <= part_scores(baseline)[part], result["output"]
    # the student reads why: a part scored 0 names the route, a cell refused while loading says so itself
    told = [t["output"] for t in result["tests"] if t["name"].startswith(f"{part}:") and REFUSED in t["output"]]
    assert told or REFUSED in result["output"], result["output"]


@pytest.mark.parametrize("name", sorted(BORDERLINE))
def test_a_general_purpose_operation_is_not_refused(graded, name):
    assert REFUSED not in json.dumps(graded[name]), graded[name]["output"]
    assert graded[name]["extra_data"]["resembles"] == []


@pytest.mark.parametrize("name", [variant for variant, *_ in LEGITIMATE])
def test_honest_code_keeps_every_point(graded, name):
    result = graded[name]
    assert part_scores(result) == full_marks(result), result["output"]
    assert result["extra_data"]["resembles"] == [], result["output"]


@pytest.mark.parametrize("name", sorted(COPIED))
def test_torchs_source_pasted_into_a_cell_is_flagged_for_review(class_run, name):
    """A copy no longer torch's code object runs and keeps what its numbers earn: the honest answer is the
    flag, on the result and in what the student and the instructor read, never a silent full mark."""
    result, log = class_run[0][name], class_run[1]
    (function, share), = result["extra_data"]["resembles"]
    assert function.startswith("torch.") and share >= 0.8
    assert f"To review: {share:.0%} of {function}, torch's own implementation" in result["output"]
    assert f"{name}: " in log and f"; to review: {share:.0%} of {function}" in log


PROBES = '''
import ctypes, gc, subprocess, sys, torch

def outcome(make):
    try:
        make()
        return "ran"
    except BaseException as exc:
        return "refused" if "off-limits" in str(exc) else type(exc).__name__

def _fake_torch_file():
    source = "def broadcast_shapes(*shapes):\\n    return torch._refs._broadcast_shapes(*shapes)\\n"
    namespace = {"torch": torch}
    exec(compile(source, torch.functional.__file__, "exec"), namespace)
    return namespace["broadcast_shapes"]((2, 1), (1, 3))

def probes():
    return {
        # torch's public API that uses a private helper goes on; the helper called directly does not
        "torch.broadcast_shapes": outcome(lambda: torch.broadcast_shapes((2, 1), (1, 3))),
        "torch._refs._broadcast_shapes": outcome(lambda: torch._refs._broadcast_shapes((2, 1), (1, 3))),
        # a forged gate request does nothing; code claiming to be torch's file is refused
        "forged gate": outcome(lambda: sys.audit("autograder.gate", 0, ((2, 1),), {})),
        "compiled under torch's file name": outcome(_fake_torch_file),
        "reloaded torch._refs": outcome(lambda: __import__("importlib").reload(torch._refs)),
        # a private module nothing imported yet (a zygote that preloaded torch._dynamo holds parts of others)
        "import a private module": outcome(lambda: __import__(next(
            name for name in ("torch.testing._internal.common_nn", "torch.onnx._internal.exporter._core",
                              "torch._inductor.codegen.cpp") if name not in sys.modules))),
        "ctypes.CDLL": outcome(lambda: ctypes.CDLL(None)),
        "cffi": outcome(lambda: __import__("cffi")),
        "gc.get_objects": outcome(gc.get_objects),
        # a fresh interpreter, which would have none of the child's rules
        "subprocess": outcome(lambda: subprocess.run([sys.executable, "-c", "import torch"])),
        # what honest code does keeps working
        "decimal": outcome(lambda: __import__("decimal").Decimal("1.5")),
        "numpy.random": outcome(lambda: __import__("numpy").random.default_rng(0).random()),
        "torch.fx": outcome(lambda: torch.fx.symbolic_trace(torch.nn.Linear(2, 2))),
        "inspect": outcome(lambda: __import__("inspect").getsource(torch.nn.Linear.forward)),
        # matplotlib lists the fonts with the fc-list program, and carries on without it
        "matplotlib's fonts": outcome(lambda: __import__("matplotlib.font_manager").font_manager.findfont("DejaVu Sans")),
    }
'''


def test_each_kind_of_route_is_refused_and_honest_code_is_not():
    child = RemoteSubmission([PROBES], Limits(), [])
    try:
        seen = child.call("probes")
        routes = child.take_forbidden()
    finally:
        child.close()
    assert seen == {
        "torch.broadcast_shapes": "ran", "torch._refs._broadcast_shapes": "refused", "forged gate": "ran",
        "compiled under torch's file name": "refused", "reloaded torch._refs": "refused",
        "import a private module": "refused", "ctypes.CDLL": "refused", "cffi": "refused",
        "gc.get_objects": "refused", "subprocess": "refused", "decimal": "ran", "numpy.random": "ran", "torch.fx": "ran", "inspect": "ran",
        "matplotlib's fonts": "ran",
    }
    assert {"torch._refs._broadcast_shapes", "native code (ctypes.dlopen)",
            "the garbage collector's object lists (gc.get_objects)"} <= routes, routes
