"""The seccomp filter (autograder/child/syscall_filter.py): every call of the kernel's table classified, no call
reaching another process, and no memory outside the one address space RLIMIT_AS bounds.

Each call that names a process is tried from inside a real sandbox, in both tiers, as root and as an
ordinary user, against another process of the grader's uid (what tier 2 as an ordinary user shares with the
grader) and against the caller itself; the other process is then read from outside, unchanged.  Last, an
attacker that turns every such call on the processes around it is graded before a correct submission in one
grade-all batch, which must score 100.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import pyseccomp as seccomp

from autograder import REPO_ROOT as ROOT
from autograder.child import syscall_filter
from autograder.authoring.samples import student_notebook, write_notebook
from tests.test_sandbox import _ordinary_user
from tests.test_tiers import TIERS

# Every x86_64 call whose arguments name a process: a pid_t, a pid group, a (which, who) pair or a pidfd,
# read from the kernel's prototypes (include/linux/syscalls.h).  wait4 and waitid reach only the caller's own
# children; capget and capset carry the pid in memory, and the kernel lets capset change only the caller.
NAMING_A_PROCESS = {
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "process_madvise", "process_mrelease", "setns", "setpgid", "getpgid", "getsid", "prlimit64",
    "setpriority", "getpriority", "ioprio_set", "ioprio_get", "sched_setparam", "sched_getparam",
    "sched_setscheduler", "sched_getscheduler", "sched_setaffinity", "sched_getaffinity", "sched_setattr",
    "sched_getattr", "sched_rr_get_interval", "migrate_pages", "move_pages", "get_robust_list", "kcmp",
    "ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open",
}
OWN_CHILDREN_ONLY = {"wait4", "waitid", "capget", "capset"}


def _table() -> set[str]:
    """Every name libseccomp's x86_64 table holds."""
    names = set()
    for number in range(1024):
        try:
            name = seccomp.resolve_syscall(seccomp.Arch.X86_64, number)
        except (RuntimeError, ValueError, OSError):
            continue
        if name:
            names.add(name.decode() if isinstance(name, bytes) else name)
    return names


def test_every_call_of_the_table_is_classified():
    table, classes = _table(), syscall_filter.classified()
    assert len(table) > 300  # the table was read at all
    assert sorted(table - set(classes)) == []
    assert sorted(set(classes) - table) == []  # no misspelt name, which would classify nothing


def test_every_call_naming_a_process_is_refused_or_allowed_only_for_the_caller():
    classes = syscall_filter.classified()
    assert NAMING_A_PROCESS | OWN_CHILDREN_ONLY <= _table()
    assert {name: classes[name] for name in NAMING_A_PROCESS
            if classes[name] not in ("SELF_ONLY", "REFUSED")} == {}
    assert set(syscall_filter.SELF_ONLY) <= NAMING_A_PROCESS


# --- from inside a sandbox -------------------------------------------------------------------------------------

# Run by a driver that forks a process of its own uid (the other process), then a prober that isolates itself
# as a child does (autograder.child.box) and makes each call on the other process and on itself
PROBE = r"""
import ctypes, errno, json, os, sys, tempfile, time
import pyseccomp as seccomp
from autograder.child import box
from autograder.host.sandbox import hidden_folders, import_folders

tier = int(sys.argv[1])
NUMBERS = {n: seccomp.resolve_syscall(seccomp.Arch.X86_64, n) for n in """ + repr(sorted(NAMING_A_PROCESS | {"mq_open"})) + r"""}
hold_read, hold_write = os.pipe()
other = os.fork()
if other == 0:
    os.close(hold_write)
    os.read(hold_read, 1)  # until the driver ends
    os._exit(0)
os.close(hold_read)
before = {"nofile": open(f"/proc/{other}/limits").read(), "stat": [open(f"/proc/{other}/stat").read().split()[i] for i in (18, 40)],
          "affinity": sorted(os.sched_getaffinity(other))}
report_read, report_write = os.pipe()
prober = os.fork()
if prober == 0:
    os.close(report_read)
    box.isolate({"tier": tier, "workdir": tempfile.mkdtemp(prefix="autograder-pid-"), "processes": 16,
                 "hidden": hidden_folders(), "imports": import_folders(), "rlimits": {}, "scratch_mb": 1})
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buffer = (ctypes.c_char * 256)()
    limit = (ctypes.c_uint64 * 2)(3, 3)
    mask = (ctypes.c_ulong * 16)(1)
    attr = (ctypes.c_uint32 * 14)(56, 5, 0, 0, 19)  # size 56, SCHED_IDLE (as sched_setscheduler asks), nice 19
    info = (ctypes.c_int * 32)(0, 0, -1)  # si_code SI_QUEUE

    def calls(pid, own):
        p = ctypes.c_long(pid)
        return {
            "prlimit64": (p, 7, limit, None), "sched_setparam": (p, buffer), "sched_getparam": (p, buffer),
            "sched_setscheduler": (p, 5, buffer), "sched_getscheduler": (p,),
            "sched_setaffinity": (p, 128, mask), "sched_getaffinity": (p, 128, buffer),
            "sched_setattr": (p, attr, 0), "sched_getattr": (p, buffer, 56, 0), "sched_rr_get_interval": (p, buffer),
            "migrate_pages": (p, 64, mask, mask), "move_pages": (p, 0, None, None, buffer, 0),
            "get_robust_list": (p, buffer, buffer), "setpriority": (0, p, 19), "getpriority": (0, p),
            "ioprio_set": (1, p, 3 << 13), "ioprio_get": (1, p), "getpgid": (p,), "getsid": (p,),
            "setpgid": (p, p) if pid else (0, 0), "kill": (p, 0), "tkill": (p, 0), "tgkill": (p, p, 0),
            "rt_sigqueueinfo": (p, 0, info), "rt_tgsigqueueinfo": (p, p, 0, info), "pidfd_open": (p, 0),
            "kcmp": (p, ctypes.c_long(own), 0, 0, 0), "pidfd_getfd": (3, 0, 0), "process_mrelease": (3, 0),
            "ptrace": (16, p, 0, 0)}

    def answer(name, args):
        result = libc.syscall(NUMBERS[name], *args)
        return 0 if result >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())

    import fcntl, socket

    def refused(make):
        try:
            make()
            return 0
        except OSError as exc:
            return errno.errorcode.get(exc.errno, exc.errno)

    def fill(path):  # 80 MB into a scratch mount of 1 MB (scratch_mb above), or a folder it may not write
        try:
            with open(path, "wb") as file:
                for _ in range(80):
                    file.write(b"x" * (1 << 20))
            return 0
        except OSError as exc:
            return errno.errorcode.get(exc.errno, exc.errno)

    def ipc(name, *args):
        call = getattr(libc, name)
        return 0 if call(*args) >= 0 else errno.errorcode.get(ctypes.get_errno())

    read_end, write_end = os.pipe()
    memory = {"memfd_create": refused(lambda: os.memfd_create("hoard")), "fork": refused(os.fork),
              "socketpair": refused(socket.socketpair),
              "F_SETPIPE_SZ": refused(lambda: fcntl.fcntl(write_end, 1031, 1 << 20)),
              "shmget": ipc("shmget", 0, 1 << 20, 0o1600), "msgget": ipc("msgget", 0, 0o1600),
              "semget": ipc("semget", 0, 1, 0o1600),
              "mq_open": ipc("syscall", NUMBERS["mq_open"], b"/hoard", 0o102, 0o600, None),
              "/dev/shm": fill("/dev/shm/hoard")}
    own = os.getpid()  # the calls on itself set RLIMIT_NOFILE to 3: last
    found = {"other": {n: answer(n, a) for n, a in calls(other, own).items()},
             "self": {n: answer(n, a) for n, a in calls(0, own).items()},
             "own pid": {n: answer(n, a) for n, a in calls(own, own).items()},
             # 0 with another meaning than "the caller": its process group, its uid (the grader's, in tier 2
             # as an ordinary user), every process it may signal
             "groups": {"setpriority user": answer("setpriority", (2, 0, 19)),
                        "setpriority group": answer("setpriority", (1, 0, 19)),
                        "ioprio_set user": answer("ioprio_set", (3, 0, 3 << 13)),
                        "kill group": answer("kill", (0, 0)), "kill every": answer("kill", (-1, 0))}}
    found["memory"] = memory
    os.write(report_write, json.dumps(found).encode())
    os._exit(0)
os.close(report_write)
with os.fdopen(report_read) as pipe:
    found = json.loads(pipe.read() or "{}")
os.waitpid(prober, 0)
after = {"nofile": open(f"/proc/{other}/limits").read(), "stat": [open(f"/proc/{other}/stat").read().split()[i] for i in (18, 40)],
         "affinity": sorted(os.sched_getaffinity(other))}
found["other unchanged"] = before == after
print(json.dumps(found))
"""

@functools.cache
def _probe(tier: str, user: str) -> dict:
    from autograder.child.isolation import LANDLOCK_TIER, NAMESPACES_TIER

    prefix, _ = _ordinary_user() if user == "ordinary user" else ([], None)
    number = NAMESPACES_TIER if tier == "namespaces" else LANDLOCK_TIER
    done = subprocess.run([*prefix, *TIERS[tier], sys.executable, "-c", PROBE, str(number)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# what the caller may do to itself answers anything but EPERM (a call given an argument it rejects answers
# EINVAL, one with nothing to report ESRCH); these are refused whoever they name
REFUSED_EVEN_FOR_ITSELF = {"kcmp", "pidfd_getfd", "process_mrelease", "ptrace"}
# where pid 0 is not the caller (its process group, or no process): named by its own pid only
ZERO_IS_NOT_ITSELF = {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"}


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", TIERS)
def test_no_call_reaches_another_process_and_every_call_reaches_itself(tier, user):
    found = _probe(tier, user)
    assert {name: e for name, e in found["other"].items() if e != "EPERM"} == {}
    assert {name: e for name, e in found["groups"].items() if e != "EPERM"} == {}
    for caller in ("self", "own pid"):
        unlike = REFUSED_EVEN_FOR_ITSELF | (ZERO_IS_NOT_ITSELF if caller == "self" else set())
        allowed = {name: e for name, e in found[caller].items() if name not in unlike}
        assert {name: e for name, e in allowed.items() if e == "EPERM"} == {}, caller
        assert {name: e for name, e in found[caller].items() if name in REFUSED_EVEN_FOR_ITSELF
                and e != "EPERM"} == {}, caller
    assert found["other unchanged"]


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", TIERS)
def test_no_memory_outside_the_address_space_past_its_share(tier, user):
    """Memory that RLIMIT_AS does not count: refused (memfd, new processes, socket pairs, System V and POSIX
    IPC, grown pipes), or within the scratch mounts' size (tier 1), or not writable (tier 2's /dev/shm)."""
    found = _probe(tier, user)["memory"]
    dev_shm = found.pop("/dev/shm")
    assert found == {name: "EPERM" for name in found}
    assert dev_shm == ("ENOSPC" if tier == "namespaces" else "EACCES")


# --- the next student is the test ------------------------------------------------------------------------------

# Every call that would reach a process, turned on the processes around it (its parent, its session and group,
# and the pids just below its own: the grader, the zygote, the pool's workers, the supervisor, a classmate's
# sandbox), found without /proc as the red team found them: the containers' attack, run here too
ATTACKER = (Path(__file__).parent / "hostile_container" / "scheduler.py").read_text()


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", TIERS)
def test_an_attack_on_the_graders_processes_leaves_the_next_student_full_marks(tier, user):
    import re
    import shutil

    prefix, uid = _ordinary_user() if user == "ordinary user" else ([], None)
    folder = Path(tempfile.mkdtemp(prefix="autograder-attack-"))
    try:
        (folder / "class").mkdir()
        solution = (ROOT / "solutions" / "transformer_block.py").read_text()
        (folder / "class" / "a-attacker.py").write_text(solution + "\n" + ATTACKER)
        for student in ("b-next", "c-next"):
            (folder / "class" / f"{student}.py").write_text(solution)
        if uid is not None:
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, uid, -1)
        done = subprocess.run([*prefix, *TIERS[tier], sys.executable, "-m", "autograder", "grade-all",
                               str(folder / "class"), "-o", str(folder / "out"), "--jobs", "2",
                               "--assignment", "transformer_block"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
        assert done.returncode == 0, done.stderr[-3000:]
        results = {p.stem: json.loads(p.read_text()) for p in (folder / "out").glob("*.json")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    attack = re.search(r"SCHEDULER tried (\d+) reached (\d+): (.*)", results["a-attacker"]["output"])
    assert attack, results["a-attacker"]["output"][:2000]
    assert int(attack[1]) > 100 and int(attack[2]) == 0, attack[0]
    assert results["b-next"]["score"] == 100 and results["c-next"]["score"] == 100
    # every result says what held its memory there
    assert all(r["extra_data"]["memory"].startswith("one process, its address space") for r in results.values())
