"""Kernel isolation of one sandboxed child, set up by the child itself before the student's first line.

The mechanisms of the two tiers; autograder.child.box runs them as steps, in one fixed order, right after the
cells arrive.  The grader picks the strongest tier this machine allows (`probe`) and every result says which
one graded it.

Tier 1, "namespaces" (a machine that allows them): once its steps ran, this process is PID 1 of its own PID
namespace and has
- its own identity: a distinct unprivileged uid per sandbox when the grader is root (contest judges do the
  same), or, for an ordinary grader, a user namespace in which it holds no capabilities;
- its own mount namespace whose root is a tmpfs holding read-only views of exactly what the interpreter,
  torch and the engine are made of (autograder.child.view) and private, size-limited tmpfs mounts for /tmp,
  /dev/shm and its working directory;
- its own network (no interfaces but a down loopback), PID, IPC and UTS namespaces.

Tier 2, "landlock" (a default Docker or Podman container, a Kubernetes pod: no namespace, no mount): no
privilege is needed for any of it.
- Landlock: read-only access to the same allow-list, read-write access to its own scratch folder only, no
  TCP, and (ABI 6) no signals or abstract Unix sockets outside its own domain; nor can it ptrace out of it;
- a distinct unprivileged uid per sandbox when the grader is root;
- a supervisor, its parent, that is the subreaper of everything it starts: when the child ends, or the grader
  asks (SIGTERM), it kills every process left (by uid when it is root), so a setsid() daemon dies too.

Both tiers: a seccomp filter refusing namespaces, mounts, ptrace, sockets, bpf, Landlock's own calls and the like,
every call on a process other than itself, and new processes (autograder.child.syscall_filter), no capabilities, no way to gain any (no_new_privs), resource limits, and
the parent-death signal set after the last identity change (the kernel clears it on a uid change).

Everything here is stdlib only and runs before torch is used by the submission.  A step the OS refuses raises
IsolationError; the child then refuses to run the submission.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
from pathlib import Path
from typing import Callable

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MS_NOATIME, MS_NODIRATIME = 0x400, 0x800
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 24, 36, 38
LAST_CAPABILITY = 63

NAMESPACES_TIER, LANDLOCK_TIER = 1, 2
TIER_NAMES = {NAMESPACES_TIER: "tier 1 (namespaces)", LANDLOCK_TIER: "tier 2 (Landlock, seccomp)"}
SANDBOX_UID_BASE = 1 << 30  # root grader: uid = base + the child's host PID, unique among live sandboxes
INNER_ID = 65534             # who the submission is inside a user namespace ("nobody")
HOME = "/home/student"       # tier 1's working directory, a private tmpfs
DEVICES = ("null", "zero", "full", "random", "urandom")
APPARMOR_USERNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"


class IsolationError(Exception):
    """A step of the isolation was refused by the OS; the message says which and why."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise IsolationError(f"{what}: {os.strerror(number)} (errno {number}){_apparmor_says(what, number)}")


def _apparmor_says(what: str, number: int) -> str:
    """Ubuntu 24.04 and later refuse unprivileged user namespaces through AppArmor, with a bare EPERM."""
    try:
        restricted = Path(APPARMOR_USERNS).read_text().strip() == "1"
    except OSError:
        restricted = False
    if restricted and number in (1, 13) and ("namespace" in what or "mount" in what):
        return f"; AppArmor restricts unprivileged user namespaces here ({APPARMOR_USERNS} = 1)"
    return ""


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
           f"mount {source or fstype or ''} on {target}")


# --- the root filesystem ---------------------------------------------------------------------------------

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


def _scratch(libc: ctypes.CDLL, target: str, mode: str, megabytes: int) -> None:
    _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={megabytes}m,nr_inodes=4096,mode={mode}")


def _build_root(libc: ctypes.CDLL, new: str, paths: list[str], owner: int, scratch_mb: int) -> None:
    """Make a new root on a tmpfs mounted on the empty directory `new` and pivot into it; the host's tree is
    detached afterwards.  `paths` (files and folders) are shown read-only; `owner` owns the working
    directory; /tmp, /dev/shm and the working directory are tmpfs mounts of `scratch_mb` each (the grader
    counts them in the submission's memory)."""
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates back to the host
    _mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=1024,mode=0755")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged-/usr symlinks, or real dirs
        host = f"/{name}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{new}/{name}")
    for name in ("tmp", "dev", "dev/shm", "proc", HOME.lstrip("/")):
        os.makedirs(f"{new}/{name}", exist_ok=True)
    _scratch(libc, f"{new}/tmp", "1777", scratch_mb)
    _mount(libc, "tmpfs", f"{new}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    os.makedirs(f"{new}/dev/shm", exist_ok=True)
    for device in DEVICES:
        open(f"{new}/dev/{device}", "w").close()
        _mount(libc, f"/dev/{device}", f"{new}/dev/{device}", None, MS_BIND)
    _scratch(libc, f"{new}/dev/shm", "1777", scratch_mb)
    _scratch(libc, new + HOME, "0700", scratch_mb)
    os.chown(new + HOME, owner, owner)
    for path in paths:  # after the scratch mounts, which would hide a path below /tmp (a CI checkout's venv)
        if os.path.isdir(path):
            os.makedirs(new + path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(new + path), exist_ok=True)
            open(new + path, "a").close()
        _bind_read_only(libc, path, new + path)
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
    """Root grader: leave root for a uid no other sandbox has; the kernel clears every capability.  The change
    also makes the process undumpable, which would hide its memory use from a grader without CAP_SYS_PTRACE
    (root in a default container, reading as this uid: autograder.host.memory); being dumpable lets only
    this uid's own processes in, and they are the submission's."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)


def _capabilities() -> str:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return line.split()[1]
    return "unknown"


# --- the supervisor: the parent that outlives the submission's processes -------------------------------

def _supervise(child: int, end_the_rest: Callable[[int], None], listing: int) -> None:
    """Wait for `child`, end whatever it left behind (`end_the_rest`), then die the way it did, so the judge
    can say "killed by SIGSEGV".  SIGTERM (the grader's stop, or this process's parent dying) kills the child
    first.  Never returns."""
    def stop(*_: object) -> None:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGHUP])
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the grader is already gone
        stop()
    _, status = os.waitpid(child, 0)
    end_the_rest(listing)
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        if died_of not in (signal.SIGKILL, signal.SIGSTOP):  # the two whose action cannot be changed
            signal.signal(died_of, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [died_of])
        os.kill(os.getpid(), died_of)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _fork_supervised(end_the_rest: Callable[[int], None]) -> None:
    """Fork; the child returns and carries on, the parent supervises it and never returns.  `end_the_rest` gets
    the supervisor's list of its children (_children_file), opened before the fork."""
    listing = _children_file()
    pid = os.fork()
    if pid != 0:
        _supervise(pid, end_the_rest, listing)
    if listing >= 0:
        os.close(listing)


def _children_file() -> int:
    """The supervisor's list of its children, opened once before the submission runs: read again from its start
    it is listed afresh, and it needs no descriptor at the time of the clean-up, whatever limits the
    submission managed to set on its supervisor by then.  -1 where /proc shows none (tier 2 then ends
    processes by uid alone, as root)."""
    try:
        return os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def _children(listing: int) -> list[int]:
    try:
        os.lseek(listing, 0, os.SEEK_SET)
        return [int(p) for p in os.read(listing, 1 << 20).split()]
    except (OSError, ValueError):
        return []


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`: kill(-1) from a helper holding that uid reaches exactly those, in one
    pass the kernel makes with new forks held off."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _end_descendants(uid: int | None, listing: int) -> None:
    """Tier 2's clean-up, in the supervisor (a subreaper): orphans of the submission's processes become its
    children, so killing its children (`listing`: _children_file) until none is left ends the whole tree,
    however it forked."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if uid is not None:
            _kill_uid(uid)
        for pid in _children(listing):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            time.sleep(0.005)


# --- the two tiers ---------------------------------------------------------------------------------------

def _set_rlimits(rlimits: dict[str, int], notices: list[str]) -> None:
    for name, value in rlimits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError) as exc:
            notices.append(f"{name} could not be set to {value} ({exc})")


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            count += entry.name.isdigit() and entry.stat().st_uid == uid
        except OSError:
            pass
    return count


def _check_readable(readable: list[str]) -> None:
    """A uid of its own reads only what every uid may: say which needed path it cannot, rather than let the
    submission fail on some import later (a Python installed below /root, mode 0700 on Debian, is the usual
    one)."""
    for path in readable:
        if not os.access(path, os.R_OK):
            raise IsolationError(f"the sandbox's uid cannot read {path}, which the interpreter needs: make it and "
                                 "the folders above it readable and searchable by every user (chmod o+rX)")


def _try(staging: str, engine: str | None, hidden: tuple[str, ...], imports: tuple[str, ...], tier: int) -> str | None:
    """Run the kernel's steps of `tier` (autograder.child.box) in a throw-away forked process: None if they
    held, else why not."""
    from autograder.child import box  # which orders this module's steps: imported here, not at the top

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            box.isolate({"isolate": True, "tier": tier, "workdir": staging, "processes": 64, "engine": engine,
                         "hidden": hidden, "imports": imports, "rlimits": {}, "scratch_mb": 1})
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


def probe(staging: str, engine: str | None, hidden: tuple[str, ...],
          imports: tuple[str, ...]) -> tuple[int | None, list[str]]:
    """The strongest tier this machine allows (None: neither), and why each stronger one was refused.
    `hidden` and `imports` as autograder.child.view.readable_paths takes them: the caller checks that view
    first, so that a misplaced course is never mistaken for a machine without a sandbox."""
    refusals = []
    for tier in (NAMESPACES_TIER, LANDLOCK_TIER):
        reason = _try(staging, engine, hidden, imports, tier)
        if reason is None:
            return tier, refusals
        refusals.append(f"{TIER_NAMES[tier]} refused: {reason}")
    return None, refusals
