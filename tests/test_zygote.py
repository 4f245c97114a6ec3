"""The warm zygote: every child is forked from it, none from another, nothing of one submission reaches the
next, and neither it nor its children outlive the grader that started them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.model.limits import Limits
from autograder.host.sandbox import Sandbox, Zygote
from conftest import REPO, full_marks, part_scores, run_cli

SOLUTION = (REPO / "solutions" / "transformer_block.py").read_text()

# Everything a submission can change in its own process or on its file system, changed.
POLLUTER = SOLUTION + '''
import builtins, os, subprocess, sys, threading, time
import torch
torch.leak_marker = 1
torch.nn.functional.leak_marker = 1
sys.modules["leak_marker"] = sys
builtins.leak_marker = 1
os.environ["LEAK_MARKER"] = "1"
sys.path.append("/leak_marker")
torch.set_default_dtype(torch.float64)
torch.set_num_threads(2)
torch.manual_seed(12345)
for folder in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd()):
    try:
        with open(os.path.join(folder, "leak_marker"), "w") as f:
            f.write("1")
    except OSError:
        pass
threading.Thread(target=time.sleep, args=(3600,)).start()
subprocess.Popen(["sleep", "3600"], start_new_session=True)
'''

# The reference, which breaks its own layer norm when it sees any trace of the polluter.
OBSERVER = SOLUTION + '''
import builtins, os, sys
import torch
_leaks = [name for name, seen in [
    ("torch attribute", hasattr(torch, "leak_marker")),
    ("torch.nn.functional attribute", hasattr(torch.nn.functional, "leak_marker")),
    ("module table", "leak_marker" in sys.modules),
    ("builtins", hasattr(builtins, "leak_marker")),
    ("environment", "LEAK_MARKER" in os.environ),
    ("sys.path", "/leak_marker" in sys.path),
    ("default dtype", torch.get_default_dtype() != torch.float32),
    ("threads", torch.get_num_threads() != 1),
    ("seed", torch.initial_seed() != 0),
    ("the grader's modules", any(m.split(".")[0] in ("solutions", "assignments", "pytest", "conftest")
                                 or m in ("autograder.judging.judge", "autograder.grading.rubric", "autograder.grading.grade")
                                 for m in sys.modules)),
    ("files", any(os.path.exists(os.path.join(d, "leak_marker"))
                  for d in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd()))),
] if seen]
if _leaks:
    def layer_norm(x, weight, bias, eps=1e-5):
        raise RuntimeError("leaked from an earlier submission: " + ", ".join(_leaks))
'''


def test_nothing_of_one_submission_is_visible_to_the_next(tmp_path):
    """One grading process, so one zygote, grades the polluter and then two observers."""
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    (folder / "a_polluter.py").write_text(POLLUTER)
    (folder / "b_observer.py").write_text(OBSERVER)
    (folder / "c_observer.py").write_text(OBSERVER)
    done = run_cli("grade-all", folder, "-o", out, "--jobs", "1")
    assert done.returncode == 0, done.stderr
    for student in ("b_observer", "c_observer"):
        results = json.loads((out / f"{student}.json").read_text())
        assert part_scores(results) == full_marks(results), [t["output"] for t in results["tests"]
                                                             if t["score"] < t["max_score"]][:3]


def _parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True  # dead, waiting for a parent that may never reap it
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_children_are_forked_from_the_zygote_and_die_with_it():
    zygote = Zygote.shared()
    sandboxes = [Sandbox(["while True:\n    pass"], Limits(), []) for _ in range(2)]
    try:
        assert zygote.alive and Zygote.shared() is zygote  # one per grading process
        for sandbox in sandboxes:
            assert _parent_of(sandbox.process.pid) == zygote.process.pid  # never one another's
        os.kill(zygote.process.pid, signal.SIGKILL)
        for sandbox in sandboxes:
            assert _gone(sandbox.process.pid, 10), "a child outlived its zygote"
            assert sandbox.process.wait(timeout=10) == -signal.SIGKILL
    finally:
        for sandbox in sandboxes:
            sandbox.kill()
    assert Zygote.shared() is not zygote  # a dead zygote is replaced on the next use


GRADER = """
import sys
sys.path.insert(0, {root!r})
from autograder.model.limits import Limits
from autograder.host.sandbox import Sandbox, Zygote
sandbox = Sandbox(["while True:\\n    pass"], Limits(), [])
print(Zygote.shared().process.pid, sandbox.process.pid, flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["exits", "is killed"])
def test_neither_zygote_nor_children_outlive_the_grader(how):
    grader = subprocess.Popen([sys.executable, "-c", GRADER.format(root=str(REPO))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    zygote, child = map(int, grader.stdout.readline().split())
    if how == "exits":
        grader.stdin.close()
    else:
        grader.kill()
    grader.wait(timeout=30)
    assert _gone(zygote, 10) and _gone(child, 10)


ADOPTER = """
import socket, sys
sys.path.insert(0, {root!r})
from autograder.model.limits import Limits
from autograder.host.sandbox import Sandbox, Zygote
Zygote.adopt(socket.socket(fileno={fd}))
sandbox = Sandbox(["while True:\\n    pass"], Limits(), [])
print(sandbox.process.pid, flush=True)
sys.stdin.readline()
"""


def test_a_worker_that_adopts_the_zygote_gets_children_from_it_and_takes_them_along_when_it_dies():
    zygote = Zygote.shared()
    own = Sandbox(["while True:\n    pass"], Limits(), [])
    control = zygote.attach()
    try:
        worker = subprocess.Popen([sys.executable, "-c", ADOPTER.format(root=str(REPO), fd=control.fileno())],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  pass_fds=[control.fileno()])
        control.close()  # the worker holds the only copy: its death is the socket's end
        theirs = int(worker.stdout.readline())
        assert _parent_of(theirs) == zygote.process.pid  # not a zygote of the worker's own
        worker.kill()
        worker.wait(timeout=30)
        assert _gone(theirs, 10), "a child outlived the grading process that asked for it"
        assert zygote.alive and own.process.poll() is None  # the zygote and the others' children go on
        assert Zygote.shared() is zygote
    finally:
        own.kill()


def _processes_under(root: int) -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every process descending from `root` in this PID namespace: a
    submission's own processes, in namespaces of their own, are left out (a moment after their parent was
    killed they may show another parent)."""
    table = {}
    for proc in Path("/proc").iterdir():
        try:
            status = (proc / "status").read_text()
            if len(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()) > 2:
                continue
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            table[int(proc.name)] = (parent, (proc / "cmdline").read_bytes())
        except (ValueError, OSError, StopIteration):
            continue

    def descends(pid: int) -> bool:
        while pid in table and pid != root:
            pid = table[pid][0]
        return pid == root

    return {pid: row for pid, row in table.items() if pid != root and descends(pid)}


def test_grade_all_workers_share_one_zygote_started_by_the_batch(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    for name in "abcd":
        (folder / f"{name}.py").write_text(SOLUTION)
    batch = subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", str(folder), "-o", str(out),
                              "--jobs", "2", "--assignment", "transformer_block"], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    zygotes, children = set(), set()
    while batch.poll() is None:
        table = _processes_under(batch.pid)
        ours = {pid: parent for pid, (parent, command) in table.items() if b"autograder.child.zygote" in command}
        # a zygote is the first of its line; what it forks (and what those fork in turn) shows its command too
        found = {pid: parent for pid, parent in ours.items() if parent not in ours}
        zygotes.update(pid if parent == batch.pid else ("not the batch's child", pid) for pid, parent in found.items())
        children.update((pid, parent) for pid, parent in ours.items() if parent in found)
        time.sleep(0.05)
    assert batch.wait() == 0, batch.stderr.read()
    assert len(zygotes) == 1 and children, (zygotes, children)  # one zygote, the batch's own child
    assert {parent for _, parent in children} == zygotes  # every submission's process came from it
    assert len(list(out.glob("*.json"))) == 4


def test_what_the_zygote_and_a_grader_imported_is_out_of_the_collectors_sight():
    """Collections that walk torch's objects cost a tenth of a submission's time and copy the pages that
    fork shares: children inherit the zygote's frozen imports, and a grading process freezes its own."""
    from autograder.host.remote import RemoteSubmission

    child = RemoteSubmission(["import gc\ndef frozen():\n    return gc.get_freeze_count()"], Limits(), [])
    try:
        assert child.call("frozen") > 50_000
    finally:
        child.close()
    grader = subprocess.run([sys.executable, "-c", "import gc, pathlib, sys\n"
                             "from autograder.grading.grade import grade_file\n"
                             "from autograder.model.limits import Limits\n"
                             "from autograder.grading.rubric import load_rubric\n"
                             "before = gc.get_freeze_count()\n"
                             "grade_file(pathlib.Path(sys.argv[1]), load_rubric('transformer_block'), Limits())\n"
                             "print(before, gc.get_freeze_count())", str(REPO / "solutions" / "transformer_block.py")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    before, after = map(int, grader.stdout.split())
    assert before == 0 and after > 50_000, grader.stderr[-2000:]


def test_a_rubrics_preload_is_imported_by_the_zygote_before_the_child_exists():
    """The child finds the module imported before its first line runs, so no submission pays for it (and the
    next child, without a preload of its own, inherits it from the same zygote)."""
    from autograder.host.remote import RemoteSubmission

    asks = "import sys\ndef loaded():\n    return 'wave' in sys.modules\n"
    seen = []
    for preload in ([], ["wave"], []):
        child = RemoteSubmission([asks], Limits(), [], preload)
        try:
            seen.append(child.call("loaded"))
        finally:
            child.close()
    assert seen == [False, True, True]


def test_the_gpt_decoders_preload_imports_in_the_zygote_past_torchs_swapped_private_code():
    """torch._dynamo's import calls torch's private helpers (swapped in the zygote, answered by its audit
    hook): it must complete there, or every submission would pay for it again in its own time."""
    from autograder.host.remote import RemoteSubmission
    from autograder.grading.rubric import load_rubric

    preload = load_rubric("gpt_decoder").preload
    asks = f"import sys\ndef loaded():\n    return [m in sys.modules for m in {list(preload)!r}]\n"
    child = RemoteSubmission([asks], Limits(), [], preload)
    try:
        assert child.call("loaded") == [True] * len(preload)
    finally:
        child.close()


def test_the_zygote_works_out_what_a_child_disables_and_the_child_only_applies_it():
    """Matching every name of torch's Python homes, decomposition tables and provenance's index against the
    forbidden patterns is the same for every child of an assignment: done in the zygote, before the fork.  A
    child that matched again would have stored a plan of its own, made in its own process."""
    from autograder.grading.rubric import load_rubric
    from autograder.host.remote import RemoteSubmission

    ops = sorted(set(load_rubric("transformer_block").forbidden_ops))
    asks = ("import os, sys\nforbidden = sys.modules['autograder.child.forbidden']\n"
            f"def plan():\n    p = forbidden._PYTHON_PLANS[{tuple(ops)!r}]\n"
            "    return [p.worked_out_in != os.getpid(), len(p.attributes), len(p.decompositions), len(p.graded)]\n")
    for _ in range(2):  # the first child of a pattern set too
        child = RemoteSubmission([asks], Limits(), ops)
        try:
            inherited, attributes, decompositions, graded = child.call("plan")
        finally:
            child.close()
        assert inherited and attributes > 0 and decompositions > 0 and graded > 0


def test_seeding_in_a_child_queues_nothing_for_devices_torch_was_built_without():
    """torch.manual_seed also seeds CUDA, XPU and MTIA, by queueing a call with the caller's formatted stack
    for when the device starts; one this torch was built without never starts, so the zygote turns that off
    once.  The CPU's numbers are the same."""
    import torch

    from autograder.host.remote import RemoteSubmission

    built = [name for name in ("cuda", "xpu", "mtia") if getattr(torch, name)._is_compiled()]
    asks = ("import traceback, torch\n"
            "def draw(seed):\n"
            "    def formatted(*_args, **_kwargs):\n        raise AssertionError('a stack was formatted')\n"
            "    traceback.format_stack = formatted\n"
            "    torch.manual_seed(seed)\n"
            "    return torch.rand(3).tolist()\n")
    if built:  # a device this torch can start is seeded as torch seeds it
        pytest.skip(f"torch here is built with {built}")
    child = RemoteSubmission([asks], Limits(), [])
    try:
        drawn = child.call("draw", 7)
    finally:
        child.close()
    assert drawn == torch.rand(3, generator=torch.Generator().manual_seed(7)).tolist()
