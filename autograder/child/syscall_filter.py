"""A seccomp filter refusing what a submission never needs, applied in both tiers of the isolation.

Built with libseccomp through `pyseccomp` (ctypes, the same API as libseccomp's own Python bindings):
libseccomp knows every architecture's system call numbers and compiles the BPF program, which is exactly
the part not to write by hand.  The filter allows by default and refuses, with EPERM, a list of calls: a
deny list is what keeps torch, numpy and the interpreter working whatever they call, and everything on it
is a way out of the sandbox or into the kernel's attack surface.  Calls made for another architecture (i386
through int 0x80, x32) kill the process, libseccomp's default for a foreign architecture.
"""
from __future__ import annotations

import errno

import pyseccomp as seccomp  # loads libseccomp now: tier 1 installs the filter after leaving the host's /usr

from autograder.child import landlock

CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                    0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME

REFUSED = (
    # new namespaces and mounts: the ways tier 1 is built, never for the submission to use
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick",
    # reaching into other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # another program: a fresh interpreter would carry none of the child's rules (its audit hook, its swapped
    # code, its dispatcher overrides) and could hand back torch's own numbers
    "execve", "execveat",
    # the network and other sockets: the judge's connection is inherited, already connected
    "socket", "connect", "bind", "listen", "accept", "accept4",
    # io_uring runs operations (connect, open) that this filter would not see
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "iopl", "ioperm",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname", "setdomainname",
    "personality", "uselib", "lookup_dcookie",
)

LANDLOCK_CALLS = (("landlock_create_ruleset", landlock.SYS_CREATE_RULESET),
                  ("landlock_add_rule", landlock.SYS_ADD_RULE),
                  ("landlock_restrict_self", landlock.SYS_RESTRICT_SELF))


def install() -> None:
    """Load the filter into this thread's process; every process it starts inherits it and cannot remove it.
    Needs no_new_privs (or CAP_SYS_ADMIN)."""
    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in REFUSED:
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):
            pass  # a call this architecture does not have (iopl on aarch64) needs no refusing
    # Landlock's own calls: tier 2's domain is final once the box restricted itself (before this filter), and
    # the submission may neither stack a domain of its own on it nor probe the kernel's Landlock.  Refused
    # whatever libseccomp knows: by name, or by the generic table's number (x86_64 and aarch64 share it)
    for name, number in LANDLOCK_CALLS:
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):
            rules.add_rule(refuse, number)
    for flag in CLONE_NAMESPACES:  # a fork or a thread is fine; a new namespace is not
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory, which a filter cannot read: refused as unknown, so the C library
    # falls back to clone, whose flags the rules above can check (what Docker's own profile does)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()
