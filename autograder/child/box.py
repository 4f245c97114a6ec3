"""The child's way into its sandbox: every step between the fork and the student's first line, in one fixed order.

`enter_box(config)` picks the steps of the tier the grader chose (STEPS) and runs them one after another; each
is a small function of this module named after what it does, and the names of those that ran are what the
child reports in its first message ("steps"), so the order that ran is visible to the grader and the tests
rather than spread over several modules.  A step the OS refuses raises IsolationError: the steps after it do
not run and the child refuses to run the submission.  The mechanisms (mounts, uids, Landlock, the filter)
live in autograder.child.isolation, landlock and syscall_filter; this module only orders them.

The order matters, and is the same in both tiers where they share a step:
- the uid the sandbox will have is picked before the supervisor forks (it is derived from this PID);
- the capability check reads /proc, which Landlock takes away: it runs before Landlock, and after the last
  identity change, when no capability may be left;
- Landlock before the seccomp filter, which refuses Landlock's own calls so the submission cannot stack or
  probe domains of its own;
- the parent-death signal after the uid change (which clears it);
- the interpreter's own rules last (the op recorder, the disabled kernels, the provenance audit hook), the
  audit hook the very last, just before the student's first line.
"""
from __future__ import annotations

import ctypes
import os
import random
import resource
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from autograder.child import isolation, landlock, syscall_filter, view
from autograder.child.isolation import LANDLOCK_TIER, NAMESPACES_TIER, IsolationError

UNISOLATED = 0  # what the grader sends with "isolate": false (--allow-unisolated); no other way to get it


@dataclass
class Box:
    """What the steps hand on to each other, and what they leave for the child to report."""
    config: Mapping[str, Any]
    tier: int = -1
    libc: ctypes.CDLL = field(default_factory=isolation._libc)
    readable: list[str] = field(default_factory=list)
    uid: int | None = None       # the sandbox's own uid (a root grader's), None when it keeps the grader's
    grader_ids: tuple[int, int] = (-1, -1)  # the grader's uid and gid, as they were before any namespace
    home: str = ""
    notices: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    recorder: Any = None         # the op recorder (autograder.child.op_recorder), once that step ran
    refusal: str | None = None   # why the submission may not run: the step that failed, and how


# --- the tier ---------------------------------------------------------------------------------------------

def choose_tier(box: Box) -> None:
    """Only an explicit "isolate": false runs unisolated; any other config must name a tier this module has."""
    if box.config.get("isolate", True) is False:
        box.tier = UNISOLATED
        return
    tier = box.config.get("tier")
    if type(tier) is not int or tier not in (NAMESPACES_TIER, LANDLOCK_TIER):
        raise IsolationError(f"no tier of isolation was chosen (tier {tier!r}): a submission never runs "
                             "unisolated unless the grader allows it")
    box.tier = tier


# --- both tiers ---------------------------------------------------------------------------------------------

def check_rlimits(box: Box) -> None:
    """Set right after the fork (autograder.child.serve.start_forked): say which did not hold."""
    box.notices += [f"{name} could not be set to {wanted}" for name, wanted in box.config["rlimits"].items()
                    if resource.getrlimit(getattr(resource, name)) != (wanted, wanted)]


def compute_view(box: Box) -> None:
    from autograder import PACKAGE_DIR

    engine = box.config.get("engine", str(PACKAGE_DIR))
    try:
        box.readable = view.readable_paths(engine, tuple(box.config["hidden"]), tuple(box.config["imports"]))
    except view.HiddenInView as exc:
        raise IsolationError(str(exc)) from None
    if box.config.get("files"):  # an ordinary notebook's own files, gathered by the grader (copy_files)
        box.readable = [*box.readable, os.path.realpath(box.config["files"])]


def pick_uid(box: Box) -> None:
    """A root grader's sandbox gets a uid no other live sandbox has; derived from this PID, so before forking.
    The grader's own ids are kept too: in a new user namespace they read as "nobody"."""
    box.grader_ids = os.getuid(), os.getgid()
    uid = isolation.SANDBOX_UID_BASE + os.getpid()
    box.uid = uid if os.geteuid() == 0 and isolation._mapped(uid) else None


def drop_bounding_set(box: Box) -> None:
    isolation._drop_bounding_set(box.libc)


def change_uid(box: Box) -> None:
    if box.uid is not None:
        isolation._become(box.uid)
    else:
        isolation._drop_capabilities(box.libc)


def no_new_privs(box: Box) -> None:
    """Needed by Landlock and the seccomp filter; no later exec can gain a privilege."""
    isolation._check(box.libc.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def check_capabilities(box: Box) -> None:
    if isolation._capabilities().strip("0"):
        raise IsolationError(f"capabilities remain after dropping them ({isolation._capabilities()})")


def install_seccomp(box: Box) -> None:
    try:
        syscall_filter.install()
    except Exception as exc:  # noqa: BLE001 - libseccomp missing or refused: say so, never run unfiltered
        raise IsolationError(f"seccomp filter: {exc}") from None


def parent_death_signal(box: Box) -> None:
    """After the last identity change, which clears it: the grader dying takes the sandbox with it."""
    isolation._check(box.libc.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0),
                     "set the parent-death signal")


def move_home(box: Box) -> None:
    os.chdir(box.home)
    tmp = "/tmp" if box.tier == NAMESPACES_TIER else os.path.join(box.home, "tmp")
    os.environ.update(HOME=box.home, TMPDIR=tmp, MPLCONFIGDIR=f"{box.home}/.matplotlib")


# --- tier 1: namespaces ---------------------------------------------------------------------------------------

def unshare_namespaces(box: Box) -> None:
    if box.uid is not None:
        isolation._check(box.libc.unshare(isolation.NAMESPACES), "unshare mount, PID, network, IPC and UTS namespaces")
    else:
        isolation._check(box.libc.unshare(isolation.CLONE_NEWUSER | isolation.NAMESPACES),
                         "unshare user and other namespaces")
        isolation._map_ids(*box.grader_ids)


def fork_pid_one(box: Box) -> None:
    """After unshare(CLONE_NEWPID) only children enter the new namespace: the child, PID 1 there, carries on;
    when it dies the kernel kills every process left in the namespace, setsid() daemons included."""
    isolation._fork_supervised(lambda listing: None)


def name_host(box: Box) -> None:
    box.libc.sethostname(b"sandbox", 7)


def build_root(box: Box) -> None:
    owner = box.uid if box.uid is not None else isolation.INNER_ID
    isolation._build_root(box.libc, box.config["workdir"], box.readable, owner, box.config["scratch_mb"])
    box.home = isolation.HOME


def limit_own_processes(box: Box) -> None:
    """Per uid and per namespace, set only once those are the sandbox's own, so it counts them alone."""
    isolation._set_rlimits({"RLIMIT_NPROC": box.config["processes"]}, box.notices)


# --- tier 2: Landlock -----------------------------------------------------------------------------------------

def check_landlock(box: Box) -> None:
    """Before forking a supervisor: a refusal must be cheap and clear."""
    if missing := landlock.unavailable():
        raise IsolationError(missing)


def fork_supervisor(box: Box) -> None:
    """The parent becomes the subreaper of everything the submission starts and ends it all when the child ends."""
    isolation._check(box.libc.prctl(isolation.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0),
                     "become the subreaper of the submission's processes")
    uid = box.uid
    isolation._fork_supervised(lambda listing: isolation._end_descendants(uid, listing))


def make_scratch(box: Box) -> None:
    box.home = box.config["workdir"]
    scratch = os.path.join(box.home, "tmp")
    os.makedirs(scratch, exist_ok=True)
    if box.uid is not None:
        os.chown(box.home, box.uid, box.uid)
        os.chown(scratch, box.uid, box.uid)


def check_view_readable(box: Box) -> None:
    isolation._check_readable(box.readable)


def limit_processes(box: Box) -> None:
    if box.uid is not None:
        isolation._set_rlimits({"RLIMIT_NPROC": box.config["processes"]}, box.notices)
        return
    # the count is per uid, and here the uid is the grader's: its own processes count too
    isolation._set_rlimits({"RLIMIT_NPROC": isolation._processes_of(os.getuid()) + box.config["processes"]},
                           box.notices)
    box.notices.append("tier 2 as an ordinary user: the submission runs under the grader's uid, contained by "
                       "Landlock and seccomp alone")


def restrict_landlock(box: Box) -> None:
    writable = [box.home, *(f"/dev/{d}" for d in isolation.DEVICES)]
    try:
        box.notices += landlock.restrict(box.readable, writable)
    except (landlock.LandlockError, OSError) as exc:
        raise IsolationError(str(exc)) from None
    box.notices.append("tier 2: no /proc, and its scratch folder is bounded per file (RLIMIT_FSIZE), not in all")


# --- the interpreter's own rules (after the kernel's, before the student's first line) ---------------------

def start_recorder(box: Box) -> None:
    """The recorder, and the first use of autograd, which imports parts of torch lazily: done now, before any
    timer runs, so that no request's timer interrupts an import half-way."""
    import torch
    from autograder.child.op_recorder import OpRecorder

    box.recorder = OpRecorder(frozenset(box.config.get("forbidden_ops", ())))
    with box.recorder:
        leaf = torch.ones(2, requires_grad=True)
        torch.softmax(leaf * 2, dim=-1).sum().backward()
    box.recorder.take()


def disable_forbidden(box: Box) -> None:
    """Calling a forbidden implementation fails the request on its own; the recorder's report only names it."""
    from autograder.child import forbidden

    forbidden.disable(box.config.get("forbidden_ops", ()), box.recorder.saw, box.recorder.refused)


def hide_kit(box: Box) -> None:
    """The submission imports from exactly what it may read: the grader's import folders, never the kit's
    root (the zygote's first entry, neither mounted nor granted) nor another hidden folder."""
    sys.path[:] = view.import_path(tuple(box.config["imports"]))


def copy_files(box: Box) -> None:
    """An ordinary notebook's own files (its data, beside it in the assignment folder), copied into its home:
    the grader gathered them into a folder of their own, shown read-only, and the notebook reads and writes
    them where it runs, as under nbgrader.  Only folders and regular files were gathered."""
    source = box.config.get("files")
    if not source:
        return
    for folder, names, files in os.walk(source):
        target = os.path.join(box.home or os.getcwd(), os.path.relpath(folder, source))
        os.makedirs(target, exist_ok=True)
        for name in files:
            with open(os.path.join(folder, name), "rb") as src, open(os.path.join(target, name), "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)


def seed_random(box: Box) -> None:
    """A submission drawing from the global RNGs sees the same numbers on every run, or its grade would
    depend on the run."""
    import torch

    random.seed(0)
    torch.manual_seed(0)


def audit_provenance(box: Box) -> None:
    from autograder.child import provenance

    provenance.enforce()


# --- the order ------------------------------------------------------------------------------------------------

Step = Callable[[Box], None]
KERNEL: dict[int, tuple[Step, ...]] = {
    UNISOLATED: (check_rlimits,),  # the host records the unisolated notice itself
    NAMESPACES_TIER: (check_rlimits, compute_view, pick_uid, unshare_namespaces, fork_pid_one, name_host,
                      build_root, drop_bounding_set, change_uid, limit_own_processes, no_new_privs,
                      check_capabilities, install_seccomp, parent_death_signal, move_home),
    LANDLOCK_TIER: (check_rlimits, compute_view, pick_uid, check_landlock, fork_supervisor, make_scratch,
                    drop_bounding_set, change_uid, check_view_readable, limit_processes, no_new_privs,
                    check_capabilities, restrict_landlock, install_seccomp, parent_death_signal, move_home),
}
INTERPRETER: tuple[Step, ...] = (start_recorder, disable_forbidden, hide_kit, seed_random, audit_provenance)
# an ordinary notebook (autograder.child.notebook) imports what it likes, native code included, as under
# nbgrader: the kernel's walls are its sandbox, and its own test cells decide its grade
NOTEBOOK: tuple[Step, ...] = (hide_kit, copy_files)


def _run(box: Box, steps: tuple[Step, ...]) -> None:
    for step in steps:
        box.ran.append(step.__name__)
        step(box)


def isolate(config: Mapping[str, Any]) -> Box:
    """The kernel's steps alone (what `isolation.probe` tries in a throw-away process).  Raises
    IsolationError."""
    box = Box(config)
    _run(box, (choose_tier,))
    _run(box, KERNEL[box.tier])
    return box


def enter_box(config: Mapping[str, Any]) -> Box:
    """Every step, in order, up to the student's first line.  A step that fails stops the rest: the box's
    `refusal` then says which and why, and the submission must not run."""
    box = Box(config)
    try:
        _run(box, (choose_tier,))
        _run(box, KERNEL[box.tier] + (NOTEBOOK if box.config.get("mode") == "notebook" else INTERPRETER))
    except Exception as exc:  # noqa: BLE001 - any failure here means "not isolated", never "run anyway"
        box.refusal = (f"the sandbox could not be set up ({box.ran[-1]}: {exc}); the submission was not run")
    return box
