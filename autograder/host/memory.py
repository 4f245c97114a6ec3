"""How much memory a sandbox's processes use together, read from /proc by the trusted side.

The processes are found as a tree below the sandbox's first process, which neither tier lets them leave:
in tier 1 they live in a PID namespace whose init is that process's child, in tier 2 its supervisor is
the subreaper of everything they start, so orphans come back to it.
"""
from __future__ import annotations

import os

PAGE = os.sysconf("SC_PAGE_SIZE")


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


def proportional(pids: list[int]) -> int:
    """Bytes used, a shared page counted as its share among the processes mapping it (Pss, smaps_rollup)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) << 10
                        break
        except (OSError, ValueError, IndexError):
            pass
    return total
