"""The seccomp filter of both tiers of the isolation: every system call of the kernel's table classified.

Built with libseccomp through `pyseccomp` (ctypes, the same API as libseccomp's own Python bindings):
libseccomp knows every architecture's system call numbers and compiles the BPF program, which is exactly
the part not to write by hand.  Each call of the table is in exactly one class (tests/test_syscall_filter.py
fails when libseccomp's table holds a name that is in none):

- ALLOWED, whatever its arguments: what torch, numpy and the interpreter may call;
- THREADS_ONLY: clone, for a thread with no new namespace;
- SELF_ONLY: calls that name a process (a pid, a process group, a `which`/`who` pair) are allowed only when
  they name the caller itself: 0 where the call reads 0 as "the caller", or the caller's own pid.  No call
  reaches the grader, the zygote, the supervisor or another sandbox, whatever uid they share with it;
- REFUSED (EPERM): ways out of the sandbox, into the kernel's attack surface, into other processes, new
  processes (one process per sandbox, whose address space RLIMIT_AS bounds: the memory bound holds before
  memory is taken), and memory that no address space counts (memfd, System V and POSIX IPC, socket pairs);
- anything else, a call libseccomp's table does not know included, is refused like REFUSED: a call newer than
  this classification is never allowed unseen.

Two filters are loaded: the classification (refusing by default), then ARGUMENT_REFUSALS, which refuses a few
uses of calls otherwise allowed (fcntl and ioctl setting a signal owner, F_SETPIPE_SZ).  The kernel runs both
and the most restrictive answer wins.  Calls made for another architecture (i386 through int 0x80, x32) kill
the process, libseccomp's default for a foreign architecture.
"""
from __future__ import annotations

import errno
import os

import pyseccomp as seccomp  # loads libseccomp now: tier 1 installs the filter after leaving the host's /usr

CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                    0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_THREAD = 0x00010000

REFUSED = (
    # new namespaces and mounts: the ways tier 1 is built, never for the submission to use
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick",
    # reaching into other processes, or acting on one through a pidfd (pidfd_open names only the caller)
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "pidfd_send_signal",
    "process_madvise", "process_mrelease",
    # another process: one process per sandbox (threads are fine, see clone below), so that its address space
    # bounds all its memory, before the memory is taken
    "fork", "vfork",
    # another program: a fresh interpreter would carry none of the child's rules (its audit hook, its swapped
    # code, its dispatcher overrides) and could hand back torch's own numbers
    "execve", "execveat",
    # the network and other sockets: the judge's connection is inherited, already connected; a socket pair's
    # buffers are memory outside the address space
    "socket", "connect", "bind", "listen", "accept", "accept4", "socketpair",
    # memory that no address space counts, and that System V IPC would even keep past the sandbox's end
    "memfd_create", "memfd_secret", "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semctl", "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr",
    # io_uring runs operations (connect, open) that this filter would not see
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # Landlock's own calls: tier 2's domain is final once the box restricted itself (before this filter), and
    # the submission may neither stack a domain of its own on it nor probe the kernel's Landlock
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    # kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "fanotify_init", "fanotify_mark",
    "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "iopl",
    "ioperm", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname", "setdomainname",
    "personality", "uselib", "lookup_dcookie", "modify_ldt", "vhangup", "remap_file_pages", "ustat", "sysfs",
    "_sysctl",
    # in the table, never implemented by this kernel (or long removed)
    "create_module", "get_kernel_syms", "query_module", "nfsservctl", "getpmsg", "putpmsg", "afs_syscall",
    "tuxcall", "security", "vserver", "epoll_ctl_old", "epoll_wait_old",
)

# 0 where the call reads it as the caller, "own" for the caller's own pid; each entry: the call's argument
# index -> the values it may hold, every listed argument at once (a tuple of such maps: any one of them)
ZERO_OR_OWN = ("zero", "own")
SELF_ONLY: dict[str, tuple[dict[int, tuple[str, ...]], ...]] = {
    # limits, priorities, scheduling and memory placement of a process: its own only
    "prlimit64": ({0: ZERO_OR_OWN},),
    "sched_setparam": ({0: ZERO_OR_OWN},), "sched_getparam": ({0: ZERO_OR_OWN},),
    "sched_setscheduler": ({0: ZERO_OR_OWN},), "sched_getscheduler": ({0: ZERO_OR_OWN},),
    "sched_setaffinity": ({0: ZERO_OR_OWN},), "sched_getaffinity": ({0: ZERO_OR_OWN},),
    "sched_setattr": ({0: ZERO_OR_OWN},), "sched_getattr": ({0: ZERO_OR_OWN},),
    "sched_rr_get_interval": ({0: ZERO_OR_OWN},),
    "migrate_pages": ({0: ZERO_OR_OWN},), "move_pages": ({0: ZERO_OR_OWN},),
    "get_robust_list": ({0: ZERO_OR_OWN},),
    # which = PRIO_PROCESS (0) only: PRIO_PGRP and PRIO_USER with who = 0 mean its group and its uid, which
    # as an ordinary user in tier 2 is the grader's
    "setpriority": ({0: ("zero",), 1: ZERO_OR_OWN},), "getpriority": ({0: ("zero",), 1: ZERO_OR_OWN},),
    # which = IOPRIO_WHO_PROCESS (1) only, for the same reason
    "ioprio_set": ({0: ("one",), 1: ZERO_OR_OWN},), "ioprio_get": ({0: ("one",), 1: ZERO_OR_OWN},),
    # its own process group only: joining another's would take it out of its own
    "setpgid": ({0: ZERO_OR_OWN, 1: ZERO_OR_OWN},),
    "getpgid": ({0: ZERO_OR_OWN},), "getsid": ({0: ZERO_OR_OWN},),
    # signals: 0 and negative pids name groups and "every process it may signal", so the caller's pid only
    "kill": ({0: ("own",)},), "tkill": ({0: ("own",)},), "tgkill": ({0: ("own",)},),
    "rt_sigqueueinfo": ({0: ("own",)},), "rt_tgsigqueueinfo": ({0: ("own",)},),
    "pidfd_open": ({0: ("own",)},),
}

# a thread (CLONE_THREAD set) with no namespace flag: see _allow_clone
THREADS_ONLY = ("clone",)

# clone3 passes its flags in memory, which a filter cannot read: answered as unknown (ENOSYS), so the C
# library falls back to clone, whose flags the rules can check (what Docker's own profile does)
NOT_IMPLEMENTED = ("clone3",)

ALLOWED = (
    # files and descriptors
    "read", "write", "open", "close", "stat", "fstat", "lstat", "poll", "lseek", "pread64", "pwrite64", "readv",
    "writev", "access", "pipe", "pipe2", "select", "pselect6", "ppoll", "dup", "dup2", "dup3", "sendfile",
    "fcntl", "ioctl", "flock", "fsync", "fdatasync", "truncate", "ftruncate", "getdents", "getdents64", "getcwd",
    "chdir", "fchdir", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "creat", "link", "linkat",
    "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes", "utimensat", "futimesat",
    "mknod", "mknodat", "statfs", "fstatfs", "readahead", "setxattr", "lsetxattr", "fsetxattr", "getxattr",
    "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
    "fremovexattr", "openat", "openat2", "newfstatat", "statx", "faccessat", "faccessat2", "splice", "tee",
    "vmsplice", "sync", "syncfs", "sync_file_range", "fadvise64", "fallocate", "copy_file_range", "preadv",
    "pwritev", "preadv2", "pwritev2", "close_range", "cachestat", "inotify_init", "inotify_init1",
    "inotify_add_watch", "inotify_rm_watch", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
    "timerfd_settime", "timerfd_gettime", "io_setup", "io_destroy", "io_getevents", "io_pgetevents",
    "io_submit", "io_cancel",
    # its own memory (every byte of it inside the address space RLIMIT_AS bounds)
    "mmap", "mprotect", "munmap", "brk", "mremap", "msync", "mincore", "madvise", "mlock", "mlock2", "munlock",
    "mlockall", "munlockall", "mbind", "set_mempolicy", "get_mempolicy", "set_mempolicy_home_node",
    "pkey_mprotect", "pkey_alloc", "pkey_free", "membarrier", "map_shadow_stack",
    # the inherited socket to the judge
    "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname",
    "getpeername", "setsockopt", "getsockopt",
    # signals, time and threads of its own
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
    "sigaltstack", "pause", "nanosleep", "clock_nanosleep", "getitimer", "setitimer", "alarm", "timer_create",
    "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "clock_gettime", "clock_getres",
    "gettimeofday", "time", "times", "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
    "set_robust_list", "set_tid_address", "set_thread_area", "get_thread_area", "arch_prctl", "rseq",
    "restart_syscall", "sched_yield", "sched_get_priority_max", "sched_get_priority_min", "exit", "exit_group",
    # waiting reaches only its own children (it has none: no fork)
    "wait4", "waitid",
    # who it is (it can gain no identity: no capabilities, no_new_privs), what it may use
    "getpid", "getppid", "gettid", "getpgrp", "setsid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
    "setfsgid", "setgroups", "capget", "capset", "getrlimit", "setrlimit", "getrusage", "sysinfo", "uname",
    "getcpu", "getrandom", "prctl", "seccomp",
)


def classified() -> dict[str, str]:
    """Every name this module classifies -> its class (ALLOWED, SELF_ONLY, THREADS_ONLY, REFUSED or
    NOT_IMPLEMENTED)."""
    found: dict[str, str] = {}
    for kind, names in (("ALLOWED", ALLOWED), ("SELF_ONLY", SELF_ONLY), ("THREADS_ONLY", THREADS_ONLY),
                        ("REFUSED", REFUSED), ("NOT_IMPLEMENTED", NOT_IMPLEMENTED)):
        for name in names:
            if name in found:
                raise ValueError(f"{__file__}: {name} is both {found[name]} and {kind}")
            found[name] = kind
    return found


F_SETOWN, F_SETOWN_EX, F_SETPIPE_SZ = 8, 15, 1031
FIOSETOWN, SIOCSPGRP, TIOCSPGRP, TIOCSTI = 0x8901, 0x8902, 0x5410, 0x5412
# uses of allowed calls that reach another process (SIGIO and SIGURG to an owner it names; a terminal's
# foreground group, or input typed into it) or take kernel memory past the address space (a pipe's buffer
# grown past its default 64 KB)
ARGUMENT_REFUSALS = (("fcntl", 1, F_SETOWN), ("fcntl", 1, F_SETOWN_EX), ("fcntl", 1, F_SETPIPE_SZ),
                     ("ioctl", 1, FIOSETOWN), ("ioctl", 1, SIOCSPGRP), ("ioctl", 1, TIOCSPGRP), ("ioctl", 1, TIOCSTI))


def _add(rules: seccomp.SyscallFilter, action: int, name: str, *args: seccomp.Arg) -> None:
    try:
        rules.add_rule(action, name, *args)
    except (RuntimeError, ValueError, OSError):
        pass  # a call this architecture or libseccomp does not have: refused by default, or never made


def _allow_self(rules: seccomp.SyscallFilter, name: str, own: int) -> None:
    values = {"zero": 0, "one": 1, "own": own}
    for allowed in SELF_ONLY[name]:
        # every combination of the allowed values of the listed arguments is one rule (rules are ORed)
        combinations: list[list[seccomp.Arg]] = [[]]
        for index, names in sorted(allowed.items()):
            combinations = [[*done, seccomp.Arg(index, seccomp.EQ, values[v])] for done in combinations
                            for v in dict.fromkeys(names)]
        for args in combinations:
            _add(rules, seccomp.ALLOW, name, *args)


def _allow_clone(rules: seccomp.SyscallFilter) -> None:
    """A thread (CLONE_THREAD) with no namespace flag; x86_64's clone takes its flags first."""
    mask = CLONE_THREAD
    for flag in CLONE_NAMESPACES:
        mask |= flag
    rules.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, mask, CLONE_THREAD))


def install() -> None:
    """Load the filters into this process; every thread it starts inherits them and none can remove them.
    Needs no_new_privs (or CAP_SYS_ADMIN).  Installed by the process whose pid is final (tier 1's PID 1, tier
    2's child of its supervisor), after its last fork."""
    own = os.getpid()
    classification = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
    try:  # a binary tree of the ~300 calls rather than a list (libseccomp 2.5 and later)
        classification.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except (AttributeError, RuntimeError, ValueError, OSError):
        pass
    for name in ALLOWED:
        _add(classification, seccomp.ALLOW, name)
    for name in SELF_ONLY:
        _allow_self(classification, name, own)
    _allow_clone(classification)
    for name in NOT_IMPLEMENTED:
        _add(classification, seccomp.ERRNO(errno.ENOSYS), name)
    refusals = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name, index, value in ARGUMENT_REFUSALS:
        # the kernel reads these commands as 32-bit: higher bits must not hide one from the comparison
        refusals.add_rule(seccomp.ERRNO(errno.EPERM), name, seccomp.Arg(index, seccomp.MASKED_EQ, 0xFFFFFFFF, value))
    classification.load()
    refusals.load()
