"""Landlock, the kernel's unprivileged access control, through its three system calls.

Called directly with ctypes rather than through a binding: the calls are three, their structures are small and
versioned by one ABI number, and the one binding on PyPI (`landlock`) is a pre-release.  Landlock needs no
privilege and no namespace, so it holds in a default Docker or Podman container and a Kubernetes pod, whose
seccomp profiles allow these calls.  Once restricted, a process and everything it starts can only open
what the rules grant; it cannot ptrace a process outside its domain, and from ABI 4 and 6 on it cannot
bind or connect TCP sockets, signal processes outside its domain or reach abstract Unix sockets.
"""
from __future__ import annotations

import ctypes
import os
import platform

# the generic system call table: the same numbers on x86_64 and aarch64
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ABI1 = (1 << 13) - 1          # execute .. make_sym
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # rights a rule on a file may carry


class LandlockError(Exception):
    pass


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _fail(what: str) -> LandlockError:
    number = ctypes.get_errno()
    return LandlockError(f"Landlock {what}: {os.strerror(number)} (errno {number})")


def abi_version() -> int:
    """The kernel's Landlock ABI, or 0 when it has none (`unavailable` says why)."""
    if platform.system() != "Linux":
        return 0
    version = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def unavailable() -> str:
    """Why this kernel has no Landlock, with the errno it answered."""
    if abi_version() > 0:
        return ""
    number = ctypes.get_errno()
    why = {38: "not built into this kernel", 95: "built in but not enabled at boot (lsm=landlock)"}
    return f"Landlock is {why.get(number, 'refused')}: {os.strerror(number)} (errno {number})"


def restrict(readable: list[str], writable: list[str]) -> list[str]:
    """Restrict this process (and all it starts later) to reading `readable` and reading and writing
    `writable`; no TCP, no signals or abstract sockets outside its domain where the ABI knows them.  Needs
    no_new_privs set first.  Returns what the kernel's ABI could not enforce; raises LandlockError."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError(unavailable())
    fs = FS_ABI1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0) | (IOCTL_DEV if abi >= 5 else 0)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8  # the structure grew with the ABI
    libc = _libc()
    attr = _RulesetAttr(fs, net, scoped)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("create_ruleset")
    try:
        for paths, rights in ((readable, READ), (writable, fs)):
            for path in paths:
                _add_rule(libc, ruleset, path, rights)
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _fail("restrict_self")
    finally:
        os.close(ruleset)
    missing = []
    if abi < 4:
        missing.append(f"Landlock ABI {abi} cannot forbid TCP (the seccomp filter still refuses sockets)")
    if abi < 6:
        missing.append(f"Landlock ABI {abi} cannot stop the submission from signalling processes of its own uid")
    return missing


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= FILE_ONLY
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise _fail(f"add_rule for {path}")
    finally:
        os.close(fd)
