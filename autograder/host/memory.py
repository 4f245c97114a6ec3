"""How much memory a sandbox's processes use together, read from /proc by the trusted side.

The processes are found as a tree below the sandbox's first process, which neither tier lets them leave:
in tier 1 they live in a PID namespace whose init is that process's child, in tier 2 its supervisor is
the subreaper of everything they start, so orphans come back to it.
"""
from __future__ import annotations

import ctypes
import os

from autograder.model.limits import SCRATCH_MB, SCRATCH_MOUNTS, Limits, address_space, outside_address_space

PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                found += [int(p) for p in listing.read().split()]
        except (OSError, ValueError):
            pass
    return found


def process_tree(root: int) -> list[int]:
    """`root` and every process below it."""
    tree, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        tree.append(pid)
        frontier += _children(pid)
    return tree


def resident(pids: list[int]) -> int:
    """Bytes resident, pages shared between the processes counted once for each (cheap: statm)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def used(pids: list[int], as_uid: int | None = None) -> int:
    """Bytes used: a page shared between processes counted as its share among those mapping it (Pss, from
    smaps_rollup).  Root without CAP_SYS_PTRACE (as in a default container) may read another uid's only as
    that uid, so `as_uid` (the sandbox's) is this thread's file-system uid and gid while it reads; where it still
    cannot, the process's own anonymous and shared-memory pages (RssAnon + RssShmem, from status) stand in:
    more than its share, never less of what it allocated."""
    if as_uid is not None:  # this thread's alone; the kernel compares both ids (the sandbox's gid is its uid)
        previous = _libc.setfsuid(as_uid), _libc.setfsgid(as_uid)
    try:
        total = 0
        for pid in pids:
            share = _proportional(pid)
            total += share if share is not None else _allocated(pid)
        return total
    finally:
        if as_uid is not None:
            _libc.setfsuid(previous[0])
            _libc.setfsgid(previous[1])


def _proportional(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return None


def _allocated(pid: int) -> int:
    total = 0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    total += int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return total


def filesystem(path: str) -> str:
    """The type of the file system holding `path` (tmpfs, ext4, overlay...), from this process's mount table."""
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mountinfo") as table:
            for line in table:
                fields = line.split()
                point, after = fields[4], fields[fields.index("-") + 1]
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, after
    except (OSError, ValueError, IndexError):
        pass
    return kind


def bound(limits: Limits, tier: int, cgroup_bounded: bool, scratch: str) -> str:
    """What holds a sandbox's memory to --memory-mb here, as every result says it (extra_data.memory)."""
    room = address_space(limits) >> 20
    if not limits.isolate:
        return f"each process's address space ({room} MB, RLIMIT_AS), and the grader's watch over them all"
    outside = outside_address_space(limits) >> 20
    if tier == 1:
        held = (f"one process, its address space {room} MB (RLIMIT_AS), and {outside} MB outside it (its "
                f"{SCRATCH_MOUNTS} scratch mounts of {SCRATCH_MB} MB, its pipes' buffers)")
    else:
        kind = filesystem(scratch)
        held = (f"one process, its address space {room} MB (RLIMIT_AS), and its pipes' buffers; its scratch "
                f"folder is on {kind}, bounded per file")
        if kind in ("tmpfs", "ramfs"):
            held += " (its files there are memory that only the grader's watch counts)"
    return held + ("; and its cgroup's memory.max" if cgroup_bounded else "; no cgroup memory controller here")
