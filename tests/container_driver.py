"""What runs inside the test containers of tests/test_containers.py: `python container_driver.py PLAN.json`.

It probes the kernel primitives the kit's isolation is built from (each in a throw-away child), then runs the
plan's commands one after another while it samples the container's anonymous memory and its processes,
keeps each step's result files as they were when the step ended, waits `settle` seconds, lists every process
still alive and reads the result files again.  It prints one line, CONTAINER-REPORT and the report as JSON.

A step is {"name", "argv"} and optionally "cwd", "timeout", "results" (globs of the files it writes), "env"
(variables added to the container's) and "copy" ([source, target] pairs copied before it starts, the target's
folders made: how a Gradescope step is handed its submission in the container's own /autograder).

It is the container's PID 1 (no --init), so a submission's kill(-1, SIGKILL) cannot end it: the kernel drops
such signals to a namespace's init.  It uses only the standard library.
"""
from __future__ import annotations

import ctypes
import errno
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

MARKER = "CONTAINER-REPORT "
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MNT_DETACH = 2, 4, 8, 2
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_CAPBSET_DROP, CAP_SYS_ADMIN = 38, 22, 2, 24, 21
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF = 444, 446  # x86_64 and aarch64 alike
LANDLOCK_CREATE_RULESET_VERSION = 1


# --- the probes ---------------------------------------------------------------------------------------------

def in_child(probe) -> dict:
    """Runs `probe` in a forked child (what it changes dies with it); returns what it returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = probe()
        except BaseException as exc:  # noqa: BLE001 - a probe's crash is its answer
            result = {"ok": False, "errno": f"raised {exc!r}"}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    return json.loads(data) if data else {"ok": False, "errno": f"died ({status})"}


def outcome(returned: int, stage: str = "") -> dict:
    if returned < 0:
        code = ctypes.get_errno()
        return {"ok": False, "errno": errno.errorcode.get(code, str(code)) + (f" at {stage}" if stage else "")}
    return {"ok": True, "value": returned}


def unshare(flags: int):
    return lambda: outcome(libc.unshare(flags))


def mount(fstype: bytes):
    def probe() -> dict:
        target = tempfile.mkdtemp()
        returned = libc.mount(fstype, target.encode(), fstype, MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        result = outcome(returned)
        if returned == 0:
            libc.umount2(target.encode(), MNT_DETACH)
        return result
    return probe


def in_user_namespace(then):
    """A user, mount and PID namespace of its own, mapped to the caller; then `then` in its first child (the
    new PID namespace's init)."""
    def probe() -> dict:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0:
            return outcome(-1, "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            try:
                with open(f"/proc/self/{name}", "w") as handle:
                    handle.write(text)
            except OSError as exc:
                return {"ok": False, "errno": f"{errno.errorcode.get(exc.errno, exc.errno)} at {name}"}
        return in_child(then)
    return probe


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def prctl(option: int, arg2: int = 0) -> int:
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0))


def no_new_privs() -> dict:
    return outcome(prctl(PR_SET_NO_NEW_PRIVS, 1))


def seccomp_filter() -> dict:
    """An allow-everything filter after no_new_privs (what an unprivileged process may install)."""
    if prctl(PR_SET_NO_NEW_PRIVS, 1) < 0:
        return outcome(-1, "no_new_privs")
    program = (SockFilter * 1)(SockFilter(0x06, 0, 0, 0x7FFF0000))  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    fprog = SockFprog(1, program)
    return outcome(libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                              ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0)))


def landlock_abi() -> dict:
    return outcome(libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                                ctypes.c_uint(LANDLOCK_CREATE_RULESET_VERSION)))


def landlock_restrict() -> dict:
    """A ruleset that handles executing files, enforced on this process."""
    attr = ctypes.c_uint64(1)  # struct landlock_ruleset_attr {handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE}
    fd = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(8),
                      ctypes.c_uint(0))
    if fd < 0:
        return outcome(-1, "create_ruleset")
    if prctl(PR_SET_NO_NEW_PRIVS, 1) < 0:
        return outcome(-1, "no_new_privs")
    return outcome(libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint(0)))


def setresuid_fresh() -> dict:
    fresh = (1 << 30) + os.getpid()
    try:
        os.setresgid(fresh, fresh, fresh)
        os.setresuid(fresh, fresh, fresh)
    except OSError as exc:
        return {"ok": False, "errno": errno.errorcode.get(exc.errno, str(exc.errno))}
    return {"ok": True, "value": None}


def capbset_drop() -> dict:
    return outcome(prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN))


def cgroup2_subtree() -> dict:
    """A cgroup v2 of its own below the process's (what the kit kills a sandbox with)."""
    mounts = [line.split() for line in open("/proc/self/mounts")]
    mount = next((m[1] for m in mounts if m[2] == "cgroup2"), None)
    if mount is None:
        return {"ok": False, "errno": "no cgroup2 mounted"}
    own = next((line[3:].strip() for line in open("/proc/self/cgroup") if line.startswith("0::")), "/")
    path = os.path.join(mount + own.rstrip("/"), f"probe-{os.getpid()}")
    try:
        os.mkdir(path)
        os.rmdir(path)
    except OSError as exc:
        return {"ok": False, "errno": errno.errorcode.get(exc.errno, str(exc.errno))}
    return {"ok": True, "value": path}


PROBES = {
    "unshare(NEWNS|NEWPID|NEWNET|NEWUTS|NEWIPC)": unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS
                                                          | CLONE_NEWIPC),
    "unshare(NEWNS)": unshare(CLONE_NEWNS),
    "unshare(NEWPID)": unshare(CLONE_NEWPID),
    "unshare(NEWNET)": unshare(CLONE_NEWNET),
    "unshare(NEWUSER)": unshare(CLONE_NEWUSER),
    "mount proc": mount(b"proc"),
    "userns+mntns+pidns, then mount proc": in_user_namespace(mount(b"proc")),
    "userns+mntns+pidns, then mount tmpfs": in_user_namespace(mount(b"tmpfs")),
    "prctl(PR_SET_NO_NEW_PRIVS)": no_new_privs,
    "seccomp filter (after no_new_privs)": seccomp_filter,
    "landlock_create_ruleset(VERSION)": landlock_abi,
    "landlock_restrict_self": landlock_restrict,
    "setresuid(2^30+pid)": setresuid_fresh,
    "PR_CAPBSET_DROP(CAP_SYS_ADMIN)": capbset_drop,
    "cgroup v2 subtree": cgroup2_subtree,
}


def facts() -> dict:
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    try:
        namespaces = open("/proc/sys/user/max_user_namespaces").read().strip()
    except OSError:
        namespaces = "?"
    return {"uid": os.getuid(), "gid": os.getgid(), "cap_eff": status["CapEff"].strip(),
            "cap_bnd": status["CapBnd"].strip(), "seccomp": status["Seccomp"].strip(),
            "no_new_privs": status["NoNewPrivs"].strip(), "pid": os.getpid(),
            "interfaces": sorted(os.listdir("/sys/class/net")), "kernel": os.uname().release,
            "max_user_namespaces": namespaces,
            "cgroups": sorted({m.split()[2] for m in open("/proc/self/mounts") if m.split()[2].startswith("cgroup")})}


# --- watching the container ---------------------------------------------------------------------------------

def processes() -> list[dict]:
    """Every live process but this one: pid, ppid, uid, state and command line."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(")") + 2:].split()
            with open(f"/proc/{name}/status") as handle:
                status = dict(line.split(":", 1) for line in handle if ":" in line)
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue  # it ended meanwhile
        if fields[0] == "Z":
            continue
        found.append({"pid": int(name), "ppid": int(fields[1]), "state": fields[0],
                      "uid": int(status["Uid"].split()[0]), "rss_kb": int(status.get("VmRSS", "0 kB").split()[0]),
                      "comm": stat[stat.index("(") + 1:stat.rindex(")")], "cmdline": cmdline[:300]})
    return found


def anonymous_memory() -> int | None:
    """The container's anonymous memory in bytes (its cgroup's: v1 total_rss, v2 anon), None if unreadable."""
    for path, key in (("/sys/fs/cgroup/memory/memory.stat", "total_rss"), ("/sys/fs/cgroup/memory.stat", "anon")):
        try:
            with open(path) as handle:
                for line in handle:
                    name, value = line.split()
                    if name == key:
                        return int(value)
        except OSError:
            continue
    return None


class Sampler(threading.Thread):
    """Peaks while a step runs: live processes and anonymous memory."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.peak_processes = self.peak_anon = 0
        self.samples = 0

    def run(self) -> None:
        while not self.done.is_set():
            listed = processes()
            self.peak_processes = max(self.peak_processes, len(listed))
            self.peak_anon = max(self.peak_anon, anonymous_memory() or 0)
            self.samples += 1
            self.done.wait(0.2)


def read_files(patterns: list[str]) -> dict:
    found = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    data = handle.read(4 << 20)
                text = data.decode(errors="replace")
                try:
                    found[path] = json.loads(text) if path.endswith(".json") else text
                except ValueError:
                    found[path] = text
    return found


def run_step(step: dict) -> dict:
    for source, target in step.get("copy", []):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, 0o644)
    sampler = Sampler()
    sampler.start()
    started = time.monotonic()
    try:
        done = subprocess.run(step["argv"], capture_output=True, text=True, timeout=step.get("timeout", 600),
                              cwd=step.get("cwd"), env={**os.environ, **step.get("env", {})})
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout, stderr = "timeout", str(exc.stdout or ""), str(exc.stderr or "")
    seconds = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    return {"returncode": returncode, "seconds": round(seconds, 2), "stdout": stdout[-6000:],
            "stderr": stderr[-6000:], "files": read_files(step.get("results", [])),
            "peak_processes": sampler.peak_processes, "peak_anon_bytes": sampler.peak_anon,
            "samples": sampler.samples}


def reap() -> None:
    """Orphans that ended were reparented to this PID 1: collect them so that they are not listed."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(plan_path: str) -> None:
    with open(plan_path) as handle:
        plan = json.load(handle)
    report = {"facts": facts(), "probes": {}, "steps": {}}
    if plan.get("probe", True):
        report["probes"] = {name: in_child(probe) for name, probe in PROBES.items()}
    report["processes_before"] = processes()
    for step in plan.get("steps", []):
        report["steps"][step["name"]] = run_step(step)
    time.sleep(plan.get("settle", 0))
    reap()
    report["processes_after"] = processes()
    report["files"] = read_files(plan.get("collect", []))
    sys.stdout.write(MARKER + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
