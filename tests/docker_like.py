"""Run a command the way Docker's and Podman's default seccomp profiles and capabilities would let it run:
no new namespaces, no mounts, root without CAP_SYS_ADMIN or CAP_SYS_PTRACE (python tests/docker_like.py [--without-landlock] COMMAND...).  The fast tests grade
under it to exercise tier 2 of the isolation on any machine; tests/test_containers.py does the same in real
containers.  --without-landlock also answers Landlock's calls as a kernel without it does (ENOSYS): a
machine where no tier is possible."""
from __future__ import annotations

import errno
import os
import sys

import pyseccomp as seccomp

# what the default profiles refuse a process without CAP_SYS_ADMIN, of the calls tier 1 is built from
REFUSED = ("unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsmount", "open_tree", "move_mount")
CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


# Docker's default capabilities: root in a container has these and no others (no CAP_SYS_ADMIN, CAP_SYS_PTRACE)
DOCKER_CAPABILITIES = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31}
PR_CAPBSET_DROP = 24

LANDLOCK = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")


def confine(without_landlock: bool) -> None:
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in LANDLOCK if without_landlock else ():
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    for name in REFUSED:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    for flag in CLONE_NAMESPACES:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()


if __name__ == "__main__":
    without = sys.argv[1] == "--without-landlock"
    command = sys.argv[2:] if without else sys.argv[1:]
    if os.geteuid() == 0:  # root's capabilities after the exec below are what the bounding set keeps
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for capability in set(range(64)) - DOCKER_CAPABILITIES:
            libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # past the kernel's last capability: EINVAL, fine
    confine(without)
    os.execvp(command[0], command)
