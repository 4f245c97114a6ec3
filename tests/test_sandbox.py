"""The sandbox's mechanisms, observed from inside the child, and the judge's distrust of what it returns.

Every mechanism must be active wherever the OS offers it; a test accepts its absence only after trying the
same kernel feature itself and seeing it refused, never because some notice mentions it.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from autograder.host.remote import RemoteSubmission
from autograder import REPO_ROOT as ROOT
from autograder.model.limits import Limits, address_space
from autograder.host.sandbox import Cgroup
from autograder.protocol import UNISOLATED_NOTICE
from autograder.model.submission import StudentError, SubmissionBroken
from conftest import processes_mentioning

PROBE = f'''
import glob, os, socket, resource, json, sys

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return line.split()[1]

def probe():
    found = {{"uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd(), "cwd_entries": sorted(os.listdir(".")),
              "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
              "capabilities": status("CapEff"), "no_new_privs": status("NoNewPrivs"),
              "cgroup": open("/proc/self/cgroup").read(), "checkout": os.path.exists({str(ROOT)!r} + "/solutions"),
              "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
              "cells_files": glob.glob("/tmp/**/cells.json", recursive=True)}}
    for name, path in [("solutions", {str(ROOT / "solutions" / "transformer_block.py")!r}),
                       ("suite", {str(ROOT / "assignments" / "transformer_block" / "rubric.toml")!r})]:
        try:
            open(path).read(1)
            found["read_" + name] = True
        except OSError:
            found["read_" + name] = False
    try:
        import solutions.transformer_block
        found["import_solutions"] = True
    except Exception:
        found["import_solutions"] = False
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        found["network"] = True
    except OSError:
        found["network"] = False
    for target in ("/usr/planted", {str(ROOT)!r} + "/planted", "/planted"):
        try:
            open(target, "w").write("x")
            found["wrote " + target] = True
        except OSError:
            found["wrote " + target] = False
    found["rlimit_as"] = resource.getrlimit(resource.RLIMIT_AS)[0]
    found["rlimit_nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    found["rlimit_nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return found

def leave(name):
    for folder in ("/tmp", "/dev/shm", "."):
        open(os.path.join(folder, name), "w").write("left behind")
    return True
'''


def _cgroup_v2_writable() -> bool:
    """The test's own try of what Cgroup.create needs."""
    notices: list = []
    cgroup = Cgroup.create(notices, 1 << 30)
    if cgroup is None:
        return False
    cgroup.kill()
    return True


@pytest.fixture(scope="module")
def two_sandboxes():
    """Two sandboxes alive at the same time, as in grade-all --jobs 2."""
    first = RemoteSubmission([PROBE], Limits(memory_mb=3000, open_files=128), [])
    second = RemoteSubmission([PROBE], Limits(memory_mb=3000, open_files=128), [])
    try:
        yield first, second
    finally:
        first.close()
        second.close()


@pytest.fixture(scope="module")
def probed(two_sandboxes):
    first, _ = two_sandboxes
    return first.call("probe"), first.report.notices


def test_resource_limits_are_set(probed):
    found, notices = probed
    assert found["rlimit_as"] == address_space(Limits(memory_mb=3000, open_files=128)) and found["rlimit_nofile"] == 128 and found["rlimit_nproc"] == 64
    assert notices == [] or all("cgroup" in text for _, text in notices), notices


def test_own_empty_home_and_no_input_file(probed):
    found, _ = probed
    assert found["cwd"] == "/home/student" and found["cwd_entries"] == []
    assert found["cells_files"] == []  # the cells came over the socket: there is no file to rewrite


def test_kit_checkout_is_not_in_its_file_system(probed):
    found, _ = probed
    assert not found["checkout"] and not found["read_solutions"] and not found["read_suite"]
    assert not found["import_solutions"]


def test_file_system_is_read_only_but_for_its_scratch(probed):
    found, _ = probed
    # what counts is the host: inside, a path below /tmp (a clone's) lies in the sandbox's own scratch tmpfs
    assert not (ROOT / "planted").exists() and not Path("/usr/planted").exists() and not Path("/planted").exists()
    assert not found["wrote /usr/planted"] and not found["wrote /planted"]


def test_unprivileged_identity_distinct_per_sandbox(two_sandboxes):
    first, second = (s.call("probe") for s in two_sandboxes)
    for found in (first, second):
        assert found["capabilities"].strip("0") == "" and found["no_new_privs"] == "1"
    if os.geteuid() == 0:  # a uid of its own, never root's and never another sandbox's
        assert 0 != first["uid"] != second["uid"] != 0
    else:  # a user namespace of its own, in which it is "nobody"
        assert first["uid"] == second["uid"] == 65534


def test_no_network(probed):
    found, _ = probed
    assert not found["network"]


def test_pid_namespace_and_own_proc(probed):
    found, _ = probed
    assert found["pid"] == 1
    assert max(found["processes"]) < 10  # its own few processes, none of the host's


def test_own_cgroup_where_the_machine_offers_one(probed):
    found, notices = probed
    if _cgroup_v2_writable():
        assert "/autograder-" in found["cgroup"], found["cgroup"]
    else:
        assert any("cgroup" in text for _, text in notices), notices


def test_a_cgroup_with_the_memory_controller_holds_the_whole_submission_to_the_limit(two_sandboxes):
    """Where the controller is delegated, the kernel enforces --memory-mb on the sandbox's cgroup (swap 0);
    everywhere, the grader's watchdog does (tests/test_tiers.py)."""
    first, _ = two_sandboxes
    cgroup = first.sandbox.cgroup
    controllers = (cgroup.path.parent / "cgroup.subtree_control").read_text().split() if cgroup else []
    if "memory" in controllers:
        assert (cgroup.path / "memory.max").read_text().strip() == str(3000 << 20)
        assert (cgroup.path / "memory.swap.max").read_text().strip() == "0"
    else:
        assert cgroup is None or not (cgroup.path / "memory.max").exists()


def test_scratch_space_is_private_and_dies_with_the_sandbox(two_sandboxes):
    first, second = two_sandboxes
    name = f"left-{os.getpid()}-{time.monotonic_ns()}"
    assert first.call("leave", name) is True
    found = second.call("probe")
    assert name not in found["tmp"] and name not in found["shm"]
    for host_folder in (tempfile.gettempdir(), "/dev/shm"):
        # os.walk, not glob: other tests' sandboxes come and go under /tmp while this one looks; three levels
        # (a sandbox's own /tmp would be <scratch>/tmp/<name>), as other tests' hostile submissions nest
        # folders deeper than a walk can recurse
        left = []
        for folder, dirs, files in os.walk(host_folder):
            left += [folder] if name in dirs or name in files else []
            if folder.count("/") - host_folder.count("/") >= 3:
                dirs.clear()
        assert not left, host_folder


def test_sandbox_files_are_gone_after_kill():
    submission = RemoteSubmission([PROBE], Limits(), [])
    workdir = submission.sandbox.workdir
    submission.close()
    assert not workdir.exists()


# --- replies the judge must not believe ------------------------------------------------------------------

FORGER = '''
import json, os, stat, struct, sys, time, torch
FD = next(fd for fd in range(3, 256)  # the judge's socket: the only socket the child has
          if os.path.exists(f"/proc/self/fd/{fd}") and stat.S_ISSOCK(os.fstat(fd).st_mode))

def frame(header, payload=b""):
    head = json.dumps(header).encode()
    return struct.pack(">II", len(head), len(payload)) + head + payload

def garbage(x):
    os.write(FD, b"\\x00\\x00\\x00\\x05\\x00\\x00\\x00\\x00{{{{{")
    time.sleep(30)

def huge_header(x):
    os.write(FD, struct.pack(">II", 1 << 30, 0))
    time.sleep(30)

def wrong_id(x):
    os.write(FD, frame({"id": -5, "ok": True, "value": {"k": "float", "v": "1.0"}, "forbidden": []}))
    time.sleep(30)

def lying_shape(x):
    os.write(FD, frame({"id": 0, "ok": True, "forbidden": [],
                        "value": {"k": "tensor", "dtype": "float32", "shape": [1000, 1000], "nbytes": 8}}, b"\\0" * 8))
    time.sleep(30)

def too_big(x):
    return torch.zeros(40 << 20)   # 160 MB, over the reply limit

def slow(x):
    time.sleep(60)

def fine(x):
    return x * 2
'''


@pytest.fixture(scope="module")
def forger():
    submission = RemoteSubmission([FORGER], Limits(request_timeout=2, reply_mb=64, timeout=120), [])
    yield submission
    submission.close()


@pytest.mark.parametrize("function", ["garbage", "huge_header", "wrong_id", "lying_shape", "too_big", "slow"])
def test_bad_reply_fails_that_request_only(forger, function):
    started = time.monotonic()
    with pytest.raises((SubmissionBroken, StudentError)):
        forger.call(function, torch.ones(3))
    assert time.monotonic() - started < 10
    assert torch.equal(forger.call("fine", torch.ones(3)), torch.full((3,), 2.0))  # the next request is served


# --- an ordinary user's grader is as isolated as root's ---------------------------------------------------

ORDINARY_USER = "autograder-ci"


def _ordinary_user() -> tuple[list[str], int | None]:
    """(command prefix, uid) to run as an ordinary user: the current one when the tests are not root, else
    a system user made for the test (how most CI runners grade)."""
    if os.geteuid() != 0:
        return [], None
    import pwd
    import subprocess

    try:
        entry = pwd.getpwnam(ORDINARY_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ORDINARY_USER],
                       check=True)
        entry = pwd.getpwnam(ORDINARY_USER)
    # that user must be able to start this environment's Python: search (never read) permission on the
    # folders above it, e.g. /root when the interpreter lives in /root/.pyenv
    import sys

    for needed in (Path(sys.base_prefix), Path(sys.prefix)):
        for folder in reversed([needed, *needed.parents]):
            if folder.is_dir() and not folder.stat().st_mode & 0o001:
                folder.chmod(folder.stat().st_mode | 0o001)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"], entry.pw_uid


STEAL_THE_REFERENCE = '''from solutions.transformer_block import *
# %%
import runpy
for path in ({clone!r} + "/solutions/transformer_block.py", {root!r} + "/solutions/transformer_block.py"):
    try:
        globals().update({{k: v for k, v in runpy.run_path(path).items() if not k.startswith("__")}})
    except Exception as exc:
        print("cannot read", path, exc)
'''


def test_ordinary_users_grader_isolates_its_own_clone(tmp_path):
    import json
    import subprocess
    import sys

    prefix, uid = _ordinary_user()
    clone = Path(tempfile.mkdtemp(prefix="autograder-clone-"))
    try:
        shutil.copytree(ROOT, clone, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".venv", ".git", "build", "__pycache__"))
        (clone / "steal.py").write_text(STEAL_THE_REFERENCE.format(clone=str(clone), root=str(ROOT)))
        shutil.copy(clone / "solutions" / "transformer_block.py", clone / "honest.py")
        if uid is not None:
            for path in [clone, *clone.rglob("*")]:
                os.chown(path, uid, -1)
        results = {}
        for name in ("steal", "honest"):
            done = subprocess.run([*prefix, sys.executable, "-m", "autograder", "grade", f"{name}.py",
                                   "--assignment", "transformer_block",
                                   "-o", f"{name}.json"], cwd=clone, capture_output=True, text=True, timeout=300,
                                  env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
            assert done.returncode == 0, done.stderr[-2000:]
            results[name] = json.loads((clone / f"{name}.json").read_text())
        assert results["honest"]["score"] == 100  # the ordinary user's grader works at all
        assert results["steal"]["score"] == 0, results["steal"]["output"]
    finally:
        shutil.rmtree(clone, ignore_errors=True)


# --- a machine that allows no isolation --------------------------------------------------------------------

# Docker's default seccomp profile (no namespaces, no mounts) on a kernel without Landlock: neither tier can
# be built, so no sandbox can be
NO_ISOLATION = [sys.executable, str(ROOT / "tests" / "docker_like.py"), "--without-landlock"]


def _grade_in(prefix: list[str], submission: Path, out: Path, *flags: str):
    import subprocess
    import sys

    return subprocess.run([*prefix, sys.executable, "-m", "autograder", "grade", str(submission), "-o", str(out),
                           *flags], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_rootless_container_root_isolates_itself_like_an_ordinary_user(samples, tmp_path):
    import json

    done = _grade_in(["unshare", "--user", "--map-root-user"], samples / "correct.ipynb", tmp_path / "r.json")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["score"] == 100 and not any("WITHOUT" in text for _, text in results["extra_data"]["notices"])


def test_no_isolation_refused_with_one_line_unless_allowed(samples, tmp_path):
    import json

    refused = _grade_in(NO_ISOLATION, samples / "correct.ipynb", tmp_path / "r.json")
    assert refused.returncode == 2 and not (tmp_path / "r.json").exists()
    assert refused.stderr.count("\n") == 1 and "allows no sandbox" in refused.stderr, refused.stderr
    # the line names each tier's refused mechanism and its errno
    assert "unshare" in refused.stderr and "errno 1)" in refused.stderr and "Landlock is" in refused.stderr
    assert "errno 38" in refused.stderr  # as a kernel without Landlock answers
    allowed = _grade_in(NO_ISOLATION, samples / "correct.ipynb", tmp_path / "r.json", "--allow-unisolated")
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["score"] == 100
    assert ["unisolated", UNISOLATED_NOTICE] in results["extra_data"]["notices"]
    assert "graded WITHOUT isolation" in results["output"]


def test_a_leftover_holding_the_output_pipe_never_blocks_the_judge():
    """Without isolation (allowed explicitly) a daemon can outlive the child and keep its output pipe open;
    closing the sandbox must not wait for it (it once hung the grader for 250 s)."""
    import signal

    token = f"pipe-holder-{os.getpid()}-{time.monotonic_ns()}"
    # a forked daemon (the child runs no other program, isolated or not), named by its working folder
    cell = (f"import os, time\nsettled, done = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    os.makedirs({token!r})\n"
            f"    os.chdir({token!r})\n    os.write(done, b'!')\n    time.sleep(60)\n    os._exit(0)\nos.read(settled, 1)")
    submission = RemoteSubmission([cell], Limits(isolate=False), [])
    try:
        assert submission.report.loaded
        started = time.monotonic()
        submission.close()
        assert time.monotonic() - started < 5
    finally:
        found = processes_mentioning(token)
        for line in found:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert found, "the daemon should have outlived the unisolated child (else this test shows nothing)"


def test_every_mechanism_holds_for_an_ordinary_users_grader():
    """The probe, run by a grader that is not root: its own user namespace stands in for a uid of its own."""
    import json
    import subprocess
    import sys

    prefix, _ = _ordinary_user()
    script = ("import json, sys\nfrom autograder.host.remote import RemoteSubmission\nfrom autograder.model.limits import Limits\n"
              "s = RemoteSubmission([sys.argv[1]], Limits(), [])\n"
              "print(json.dumps([s.call('probe'), s.report.notices]))\ns.close()")
    done = subprocess.run([*prefix, sys.executable, "-c", script, PROBE], cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    found, notices = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["uid"] == 65534 and found["pid"] == 1 and max(found["processes"]) < 10
    assert found["capabilities"].strip("0") == "" and found["no_new_privs"] == "1"
    assert not found["checkout"] and not found["read_solutions"] and not found["import_solutions"]
    assert not found["network"] and not found["wrote /usr/planted"] and not found["wrote /planted"]
    assert not (ROOT / "planted").exists()  # on the host: a clone below /tmp is inside the sandbox's scratch
    assert found["cwd"] == "/home/student" and found["cells_files"] == []
    assert all("cgroup" in text for _, text in notices), notices  # the one mechanism an ordinary user may lack
