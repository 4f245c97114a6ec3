"""Kernel isolation of one sandboxed child, set up by the child itself before the student's first line.

Called once by autograder.child.serve, right after it starts.  When `enter` returns, this process is PID 1 of its
own PID namespace and has:

- its own identity: a distinct unprivileged uid per sandbox when the grader is root (contest judges do the
  same), or, for an ordinary grader, a user namespace in which it holds no capabilities;
- its own mount namespace whose root is a tmpfs holding read-only views of what Python and torch need and
  private, size-limited tmpfs mounts for /tmp, /dev/shm and its working directory; the kit's checkout, the
  hidden suites, the solutions, other submissions and the host's /proc are not in it;
- its own network (no interfaces but a down loopback), PID, IPC and UTS namespaces;
- no capabilities, no way to gain any (no_new_privs), resource limits, and the parent-death signal set
  after the last identity change (the kernel clears it on a uid change).

Everything here is stdlib only and runs before torch is imported.  A step the OS refuses raises
IsolationError; the child then refuses to run the submission unless the grader allowed running without
isolation.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MS_NOATIME, MS_NODIRATIME = 0x400, 0x800
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
LAST_CAPABILITY = 63

SANDBOX_UID_BASE = 1 << 30  # root grader: uid = base + the child's host PID, unique among live sandboxes
INNER_ID = 65534             # who the submission is inside a user namespace ("nobody")
HOME = "/home/student"       # the working directory, a private tmpfs
SCRATCH_MB = 64              # each of /tmp, /dev/shm and HOME
DEVICES = ("null", "zero", "full", "random", "urandom")


class IsolationError(Exception):
    """A step of the isolation was refused by the OS; the message says which and why."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        raise IsolationError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
           f"mount {source or fstype or ''} on {target}")


# --- the root filesystem ---------------------------------------------------------------------------------

def readable_trees(prefixes: list[str]) -> list[str]:
    """Host directories the child sees read-only: the system's, and the given prefixes (the interpreter's,
    the environment's, the engine's: a virtual environment often lives inside a checkout, which itself is
    not shown)."""
    trees = ["/usr", "/etc", "/opt"]
    for prefix in prefixes:
        real = os.path.realpath(prefix)
        if not any(real == t or real.startswith(t + "/") for t in trees):
            trees.append(real)
    return [t for t in trees if os.path.isdir(t)]


def _bind_read_only(libc: ctypes.CDLL, source: str, target: str) -> None:
    _mount(libc, source, target, None, MS_BIND | MS_REC)
    # a remount must keep the flags the source already has (in a user namespace they are locked)
    kept = os.statvfs(source).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    for statvfs_flag, mount_flag in ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME),
                                     (os.ST_NODIRATIME, MS_NODIRATIME)):
        if kept & statvfs_flag:
            flags |= mount_flag
    _mount(libc, None, target, None, flags)


def _scratch(libc: ctypes.CDLL, target: str, mode: str) -> None:
    _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={SCRATCH_MB}m,nr_inodes=4096,mode={mode}")


def _build_root(libc: ctypes.CDLL, new: str, trees: list[str], owner: int) -> None:
    """Make a new root on a tmpfs mounted on the empty directory `new` and pivot into it; the host's tree is
    detached afterwards.  `owner` owns the working directory."""
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates back to the host
    _mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=1024,mode=0755")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged-/usr symlinks, or real dirs
        host = f"/{name}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{new}/{name}")
        elif os.path.isdir(host) and host not in trees:
            trees = [*trees, host]
    for name in ("tmp", "dev", "dev/shm", "proc", HOME.lstrip("/")):
        os.makedirs(f"{new}/{name}", exist_ok=True)
    _scratch(libc, f"{new}/tmp", "1777")
    _mount(libc, "tmpfs", f"{new}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    os.makedirs(f"{new}/dev/shm", exist_ok=True)
    for device in DEVICES:
        open(f"{new}/dev/{device}", "w").close()
        _mount(libc, f"/dev/{device}", f"{new}/dev/{device}", None, MS_BIND)
    _scratch(libc, f"{new}/dev/shm", "1777")
    _scratch(libc, new + HOME, "0700")
    os.chown(new + HOME, owner, owner)
    for tree in trees:  # after the scratch mounts, which would hide a tree below /tmp (a CI checkout's venv)
        os.makedirs(new + tree, exist_ok=True)
        _bind_read_only(libc, tree, new + tree)
    # a fresh /proc shows only this PID namespace; it must be mounted while the host's is still visible
    _mount(libc, "proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(f"{new}/.old", exist_ok=True)
    _check(libc.pivot_root(new.encode(), f"{new}/.old".encode()), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "detach the host's file system")
    os.rmdir("/.old")
    _mount(libc, None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(HOME)


# --- identity --------------------------------------------------------------------------------------------

def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _map_ids(outer_uid: int, outer_gid: int) -> None:
    """In a fresh user namespace an unprivileged process may map exactly its own ids."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{INNER_ID} {outer_uid} 1")
    _write("/proc/self/gid_map", f"{INNER_ID} {outer_gid} 1")


def _drop_bounding_set(libc: ctypes.CDLL) -> None:
    """No later exec can bring a capability back."""
    for cap in range(LAST_CAPABILITY + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # capabilities past the kernel's last one fail: fine


def _drop_capabilities(libc: ctypes.CDLL) -> None:

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3, all sets empty
    _check(libc.capset(ctypes.byref(header), data), "drop capabilities")


def _mapped(uid: int) -> bool:
    """Whether this process's user namespace has `uid` (false for root in a rootless container, which then
    isolates itself the way an ordinary user does)."""
    for line in Path("/proc/self/uid_map").read_text().splitlines():
        inner, _, count = (int(n) for n in line.split())
        if inner <= uid < inner + count:
            return True
    return False


def _become(uid: int) -> None:
    """Root grader: leave root for a uid no other sandbox has; the kernel clears every capability."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _capabilities() -> str:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return line.split()[1]
    return "unknown"


# --- PID namespace ---------------------------------------------------------------------------------------

def _fork_into_pid_namespace() -> None:
    """After unshare(CLONE_NEWPID) only our children enter the new namespace: fork, and let the child (PID 1
    there) carry on.  When it dies the kernel kills every process left in the namespace, including ones that
    called setsid() to leave the process group.  This parent only waits, and dies the way its child did."""
    pid = os.fork()
    if pid == 0:
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):  # die the same way, so the judge can say "killed by SIGSEGV"
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [os.WTERMSIG(status)])
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


# --- the whole sequence ----------------------------------------------------------------------------------

def enter(staging: str, rlimits: dict[str, int], engine: str | None = None) -> list[str]:
    """Isolate this process; `staging` is an empty directory the new root is built on (the host sees it
    stay empty); `engine` is the kit's engine package, shown read-only so the child can import the rest of
    its own code.  Returns notices for what holds only partly.  Raises IsolationError when a step the
    isolation depends on is refused."""
    libc = _libc()
    notices: list[str] = []
    trees = readable_trees([sys.base_prefix, sys.prefix, *([engine] if engine else [])])
    outer_uid, outer_gid = os.getuid(), os.getgid()
    root = os.geteuid() == 0 and _mapped(SANDBOX_UID_BASE + os.getpid())
    if root:
        outer_uid = outer_gid = SANDBOX_UID_BASE + os.getpid()
        _check(libc.unshare(NAMESPACES), "unshare mount, PID, network, IPC and UTS namespaces")
    else:
        _check(libc.unshare(CLONE_NEWUSER | NAMESPACES), "unshare user and other namespaces")
        _map_ids(outer_uid, outer_gid)
    _fork_into_pid_namespace()
    libc.sethostname(b"sandbox", 7)
    _build_root(libc, staging, trees, outer_uid if root else INNER_ID)
    _drop_bounding_set(libc)
    if root:
        _become(outer_uid)
    else:
        _drop_capabilities(libc)
    # per-uid and per-namespace counts: set only now, so they count this sandbox's processes alone
    for name, value in rlimits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError) as exc:
            notices.append(f"{name} could not be set to {value} ({exc})")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
    # last: a uid change clears it, and the grader dying must take the whole namespace with it
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "set the parent-death signal")
    if _capabilities().strip("0"):
        raise IsolationError(f"capabilities remain after dropping them ({_capabilities()})")
    return notices


def probe(staging: str) -> str | None:
    """Whether this machine lets a child isolate itself: None if so, else the reason.  Runs `enter` in a
    throw-away forked process, so it changes nothing here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            enter(staging, {})
            code = 0
        except BaseException as exc:  # noqa: BLE001 - anything at all means "cannot isolate"
            os.write(write, str(exc).encode()[:500])
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        reason = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return reason or f"the isolation probe {'crashed' if os.WIFSIGNALED(status) else 'failed'}"
