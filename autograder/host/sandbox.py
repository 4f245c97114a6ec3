"""Starting, watching and killing the child process that runs a submission.

One `Sandbox` is one child, forked from a warm zygote (autograder.child.zygote) that has already imported torch: its
own session and process group, a cgroup of its own where the machine offers cgroup v2 (killed as a whole
with `cgroup.kill`), resource limits, output drained into a capped buffer, and a socket for requests.  The
cells reach the child over that socket, never through a file.  The kernel isolation (namespaces, its own root file system and identity) is set up by the child
itself before the student's first line (autograder.child.isolation); anything the OS refuses comes back as a
notice, or stops the submission when isolation is required.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import site
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from autograder import REPO_ROOT
from autograder import protocol
from autograder.host import memory, scratch
from autograder.model.limits import SCRATCH_MB, Limits, rlimits
from autograder.model.load_report import Notice, NoticeKind

MEMORY_SAMPLE_SECONDS = 0.05  # what processes allocate in one interval is how far a bound can be overshot
SUPERVISOR_SECONDS = 10.0  # for the supervisor to end a sandbox's processes on SIGTERM


COURSE_ROOT_VARIABLE = "AUTOGRADER_COURSE_ROOT"
_course_roots: set[str] = set()  # course folders a front end named (nbgrader's CourseDirectory.root)


class SandboxMisplaced(RuntimeError):
    """The machine allows a sandbox, but a folder it must read holds the kit's checkout or the course: the
    message names both and what to move."""


@functools.cache
def import_folders() -> tuple[str, ...]:
    """Where this environment imports installed code from, as a fresh interpreter of it sees them: the
    standard library, the site-packages and what their .pth files add, and the user's site folder when this
    interpreter uses one.  Never this process's working directory (which `python -m` puts first) nor
    PYTHONPATH: what the grader was started from must not change what a sandbox sees."""
    flags = ["-E", "-P"] + ([] if site.ENABLE_USER_SITE else ["-s"])
    done = subprocess.run([sys.executable, *flags, "-c", "import json, sys; print(json.dumps(sys.path))"],
                          capture_output=True, text=True, cwd="/", timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.expanduser("~")})
    if done.returncode != 0:
        raise SandboxMisplaced(f"{sys.executable} could not say where it imports from: {done.stderr.strip()[-300:]}")
    return tuple(p for p in json.loads(done.stdout) if p and os.path.exists(p))


def hide_course(root: str | os.PathLike) -> None:
    """A front end that knows the course's folder (nbgrader's CourseDirectory.root) names it: no sandbox
    started after this may see it."""
    _course_roots.add(os.path.realpath(root))


def hidden_folders() -> tuple[str, ...]:
    """What no sandbox may see, even through a folder it needs: the course's folder (its gradebook, source/,
    the submissions: $AUTOGRADER_COURSE_ROOT, else the working directory, and any a front end named) and the
    kit's checkout (its suites, rubrics and solutions), unless the engine is installed as a package."""
    folders = {os.path.realpath(os.environ.get(COURSE_ROOT_VARIABLE) or os.getcwd()), *_course_roots}
    if str(REPO_ROOT) not in _site_folders():  # a checkout, even one a .pth file puts on sys.path
        folders.add(str(REPO_ROOT))
    return tuple(sorted(folders))


def _site_folders() -> set[str]:
    """The interpreter's own folders for installed packages (where a non-editable install puts the engine)."""
    import sysconfig

    names = sysconfig.get_paths()
    folders = [names["purelib"], names["platlib"], *site.getsitepackages(), site.getusersitepackages()]
    return {os.path.realpath(folder) for folder in folders}


def check_view() -> None:
    """Raises SandboxMisplaced when a folder the sandbox needs holds a hidden one: a problem of where things
    are installed, which no tier can solve and which must not read as a machine without a sandbox."""
    from autograder import PACKAGE_DIR
    from autograder.child import view

    try:
        view.readable_paths(str(PACKAGE_DIR), hidden_folders(), import_folders())
    except view.HiddenInView as exc:
        raise SandboxMisplaced(f"the sandbox cannot be set up here: {exc}") from None


def isolation_tier() -> tuple[int | None, tuple[str, ...]]:
    """The strongest tier of isolation this machine allows (None: neither), and why stronger ones were
    refused; checked once per process, in throw-away processes.  Raises SandboxMisplaced."""
    check_view()
    return _probed_tier(hidden_folders())


@functools.cache
def _probed_tier(hidden: tuple[str, ...]) -> tuple[int | None, tuple[str, ...]]:
    from autograder import PACKAGE_DIR
    from autograder.child import isolation

    staging = tempfile.mkdtemp(prefix="autograder-probe-")
    try:
        tier, refusals = isolation.probe(staging, str(PACKAGE_DIR), hidden, import_folders())
        return tier, tuple(refusals)
    finally:
        scratch.remove(staging)  # nothing ran in it


def isolation_refused() -> str | None:
    """None when this machine lets a child isolate itself in some tier, else why not (one line).  Raises
    SandboxMisplaced when it does but the kit or the course lies where a sandbox would see it."""
    tier, refusals = isolation_tier()
    return None if tier is not None else "; ".join(refusals)


def isolation_name(limits: Limits) -> str:
    """Which isolation grades with these limits, as results and logs say it."""
    from autograder.child.isolation import TIER_NAMES

    if not limits.isolate:
        return "none (graded WITHOUT isolation, as the grader allowed)"
    tier, _ = isolation_tier()
    return TIER_NAMES.get(tier, "none")


def child_notices(texts: list[Any], isolated: bool) -> list[Notice]:
    """The notices of a child's first message, each of kind CHILD whatever it says, led by the host's own
    UNISOLATED notice when the host started the child without isolation (`isolated` is how it started it,
    never what the child wrote).  The child's words for the same are dropped: said once."""
    notices = [Notice(NoticeKind.CHILD, protocol.clean_text(n, 500)) for n in texts[:50]]
    if isolated:
        return notices
    return [Notice(NoticeKind.UNISOLATED, protocol.UNISOLATED_NOTICE),
            *(n for n in notices if n.text != protocol.UNISOLATED_NOTICE)]


class Cgroup:
    """A cgroup v2 of one sandbox's own, below the grader's: every process the child starts stays in it, and
    `cgroup.kill` ends them all at once, whatever session, process group or namespace they moved to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.memory_bounded = False  # whether the kernel holds its processes to a memory.max

    @classmethod
    def create(cls, notices: list[Notice], memory_bytes: int) -> "Cgroup | None":
        try:
            mounts = Path("/proc/self/mounts").read_text().splitlines()
            mount = next(line.split()[1] for line in mounts if line.split()[2] == "cgroup2")
            own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.startswith("0::"))
            path = Path(mount + own.rstrip("/")) / f"autograder-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            path.mkdir()
            cgroup = cls(path)
            cgroup.bound_memory(memory_bytes)
            return cgroup
        except (OSError, StopIteration, IndexError) as exc:
            why = getattr(exc, "strerror", None) or "no cgroup v2 here"
            notices.append(Notice(NoticeKind.SANDBOX, f"no cgroup of its own ({why}): its supervisor alone ends its "
                                                      "processes"))
            return None

    def bound_memory(self, limit: int) -> None:
        """Where the memory controller is delegated to this cgroup, the kernel itself holds all its processes
        to `limit`, with no swap to spill into; the grader's watchdog holds them everywhere else."""
        for name, value in (("memory.max", limit), ("memory.swap.max", 0)):
            if (self.path / name).exists():
                (self.path / name).write_text(str(value))
        self.memory_bounded = (self.path / "memory.max").exists()

    def memory_exceeded(self) -> bool:
        try:
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return int(events.get("oom_kill", 0)) > 0

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill(self) -> None:
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            try:
                (self.path / "cgroup.kill").write_text("1")
            except OSError:  # kernels before 5.14 have no cgroup.kill
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.01)
        try:
            self.path.rmdir()
        except OSError:
            pass

# --- the zygote ------------------------------------------------------------------------------------------

# the child's whole environment; HOME is set per child (its working directory, or its home once isolated)
CHILD_ENV = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
ZYGOTE_START_SECONDS = 120.0


class ZygoteFailed(Exception):
    """The zygote could not be started or stopped answering: the grader's own failure, never a submission's."""


class ForkedChild:
    """One child of the zygote, seen like a subprocess.Popen: its pid, and how it ended (told by the zygote,
    which is its parent)."""

    def __init__(self, zygote: "Zygote", pid: int) -> None:
        self.zygote, self.pid = zygote, pid

    def poll(self) -> int | None:
        status = self.zygote.exits.get(self.pid)
        if status is None:  # a zygote that died took its children with it (their parent-death signal)
            return None if self.zygote.alive else -signal.SIGKILL
        return os.waitstatus_to_exitcode(status)

    def wait(self, timeout: float | None = None) -> int:
        with self.zygote.changed:
            if not self.zygote.changed.wait_for(lambda: self.poll() is not None, timeout):
                raise subprocess.TimeoutExpired(f"sandbox {self.pid}", timeout)
        return self.poll()


class Zygote:
    """The grader's side of autograder.child.zygote: starts it, asks it for children, hears how they ended.

    One per grading process, shared by every Sandbox in it (`Zygote.shared()`), started on first use and
    started again if it died.  A batch's worker processes can share their parent's instead: it `attach`es a
    control socket for each, and each worker `adopt`s one."""

    _shared: "Zygote | None" = None
    _shared_lock = threading.Lock()

    def __init__(self, control: socket.socket | None = None) -> None:
        self.process: subprocess.Popen | None = None
        self.errors = None  # what the zygote says if it fails (its children have their own)
        if control is None:
            control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.errors = tempfile.TemporaryFile()
            # its imports come from the kit's root and the environment's import folders, never from where the
            # grader was started; its children drop the kit's root too (autograder.child.box.hide_kit)
            seen = {"hidden": hidden_folders(), "imports": import_folders()}
            bootstrap = (f"import sys; sys.path[:] = [{str(REPO_ROOT)!r}, *{list(seen['imports'])!r}]; "
                         "from autograder.child.zygote import main; main()")
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-u", "-c", bootstrap, str(theirs.fileno()), json.dumps(seen)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self.errors, env={**CHILD_ENV, "HOME": "/nonexistent"},
                cwd="/", pass_fds=[theirs.fileno()], start_new_session=True)  # Ctrl-C is the grader's to handle
            theirs.close()
        self.control = control
        self.exits: dict[int, int] = {}  # pid -> wait status, for children that ended
        self.changed = threading.Condition()
        self.replies: list[dict] = []   # answers to spawn requests, in order
        self.alive = True
        self.owner = os.getpid()
        self.spawning = threading.Lock()
        threading.Thread(target=self._listen, daemon=True, name="zygote-listener").start()

    @classmethod
    def shared(cls) -> "Zygote":
        with cls._shared_lock:
            # a forked grading process must not share its parent's zygote (nor its control socket)
            if cls._shared is None or not cls._shared.alive or cls._shared.owner != os.getpid():
                cls._shared = cls()
            return cls._shared

    def attach(self) -> socket.socket:
        """A control socket of its own on this zygote, for another grading process to `adopt`."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self.spawning:
                socket.send_fds(self.control, [json.dumps({"attach": True}).encode()], [ours.fileno()])
        except OSError as exc:
            theirs.close()
            raise ZygoteFailed(f"the zygote is gone ({exc.strerror})") from None
        finally:
            ours.close()
        return theirs

    @classmethod
    def adopt(cls, control: socket.socket) -> None:
        """From now on this process's sandboxes are children of the zygote at the other end of `control` (from
        `attach` in another process); should it end, the next sandbox starts a zygote of this process's own."""
        with cls._shared_lock:
            cls._shared = cls(control)

    def _listen(self) -> None:
        """Reads the zygote's messages; checked for shape, although the zygote runs no student code."""
        while True:
            try:
                data = self.control.recv(4096)
                message = json.loads(data) if data else None
            except (OSError, ValueError):
                message = None
            with self.changed:
                if not isinstance(message, dict):
                    self.alive = False
                    self.changed.notify_all()
                    return
                if type(message.get("exited")) is int and type(message.get("status")) is int:
                    self.exits[message["exited"]] = message["status"]
                elif type(message.get("pid")) is int and message["pid"] > 0:
                    self.replies.append(message)
                self.changed.notify_all()

    def spawn(self, config: dict, fds: list[int]) -> ForkedChild:
        """A new child, forked from the warm zygote, that will run `config`; `fds` (its socket and its output
        pipe) are passed to it.  Raises ZygoteFailed."""
        with self.spawning:
            try:
                socket.send_fds(self.control, [json.dumps(config).encode()], fds)
            except OSError as exc:
                raise ZygoteFailed(f"the zygote is gone ({exc.strerror})") from None
            with self.changed:
                if not self.changed.wait_for(lambda: self.replies or not self.alive, ZYGOTE_START_SECONDS):
                    raise ZygoteFailed(f"the zygote did not answer within {ZYGOTE_START_SECONDS:g} s")
                if not self.replies:
                    raise ZygoteFailed(f"the zygote ended: {self.last_words()}")
                return ForkedChild(self, self.replies.pop(0)["pid"])

    def last_words(self) -> str:
        if self.errors is None:
            return "the zygote this process shared with its batch is gone"
        self.errors.seek(0)
        lines = self.errors.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:300] if lines else f"exit status {self.process.poll()}"


class Sandbox:
    def __init__(self, cells: list[str], limits: Limits, forbidden_ops: list[str],
                 skip_cells: dict[int, str] | None = None, load_seconds: float | None = None,
                 preload: list[str] | None = None, mode: str = "kit", files: Path | None = None) -> None:
        """`mode` "notebook" runs an ordinary notebook's cells (autograder.child.notebook) instead of answering
        the judge's requests; `files` is a folder of its own files, copied into its home before its first cell."""
        self.limits = limits
        self.notices: list[Notice] = []  # what the host saw of the sandbox: kind SANDBOX
        self.end_notices: list[Notice] = []  # ... and of its end (kill), which comes after its report was made
        tier = isolation_tier()[0] if limits.isolate else 0  # before anything is made: it may raise
        # the child builds its root file system on this empty directory inside its own mount namespace (the
        # host never sees anything in it), or works in it when isolation is off
        self.workdir = Path(tempfile.mkdtemp(prefix="autograder-"))
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        config = {"hidden": hidden_folders(), "imports": import_folders(), "workdir": str(self.workdir),
                  "isolate": limits.isolate,
                  "cell_timeout": limits.cell_timeout,
                  "load_seconds": load_seconds if load_seconds is not None else limits.timeout,
                  "request_timeout": limits.request_timeout, "forbidden_ops": forbidden_ops,
                  "skip_cells": {str(k): v for k, v in (skip_cells or {}).items()},
                  "rlimits": rlimits(limits), "processes": limits.processes, "preload": preload or [],
                  "scratch_mb": SCRATCH_MB, "tier": tier, "mode": mode,
                  "files": str(files) if files is not None else None}
        self.cgroup = Cgroup.create(self.notices, limits.memory_mb << 20) if limits.isolate else None
        self.tier = config["tier"]
        # what holds its memory here, as results say it
        self.memory_bound = memory.bound(limits, self.tier, self.cgroup is not None and self.cgroup.memory_bounded,
                                         str(self.workdir))
        self.started = time.monotonic()
        self.killed = False
        self._killing = threading.Lock()
        output_read, output_write = os.pipe()
        try:
            self.process = Zygote.shared().spawn({"spawn": config}, [child_sock.fileno(), output_write])
        except ZygoteFailed:
            os.close(output_read)
            self.sock.close()
            scratch.remove(self.workdir)  # nothing ran in it
            if self.cgroup is not None:
                self.cgroup.kill()
            raise
        finally:
            child_sock.close()
            os.close(output_write)
        self.output_pipe = open(output_read, "rb", buffering=0)
        self.output = bytearray()
        self.output_dropped = 0
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        self.exceeded = ""  # why the memory watchdog killed it, if it did
        threading.Thread(target=self._watch_memory, daemon=True, name="memory-watchdog").start()
        if self.cgroup is not None:
            try:  # before the child has its cells, so before it can start anything
                self.cgroup.add(self.process.pid)
            except OSError as exc:
                self.notices.append(Notice(NoticeKind.SANDBOX, f"could not join its cgroup ({exc.strerror}): its "
                                           "supervisor alone ends its processes"))
                self.cgroup.kill()
                self.cgroup = None
        try:
            protocol.send(self.sock, {"cells": len(cells)}, [json.dumps(cells).encode()])
        except OSError:
            pass  # the child is already gone; the first receive says how

    def _drain_output(self) -> None:
        """The only reader of the pipe; it closes the pipe itself, so nothing ever waits on a pipe that a
        leftover process could hold open."""
        cap = self.limits.output_kb << 10
        stream = self.output_pipe
        while chunk := stream.read(1 << 16):
            room = max(cap - len(self.output), 0)
            self.output += chunk[:room]
            self.output_dropped += len(chunk) - min(len(chunk), room)
        stream.close()

    def _watch_memory(self) -> None:
        """The bound on the whole submission, all its processes together (RLIMIT_AS bounds each alone): their
        resident memory, counted proportionally for pages they share with the zygote or with one another.
        The cheap count (resident pages, which is never below the proportional one) comes first."""
        while not self.killed and self.process.poll() is None:
            time.sleep(MEMORY_SAMPLE_SECONDS)
            self.check_memory()

    def check_memory(self) -> None:
        """One sample of the bound, now (the watchdog takes one every MEMORY_SAMPLE_SECONDS)."""
        if self.killed or self.process.poll() is not None:  # its PID may already be another process's
            return
        from autograder.child.isolation import SANDBOX_UID_BASE

        limit = self.limits.memory_mb << 20
        uid = SANDBOX_UID_BASE + self.process.pid if self.tier and os.geteuid() == 0 else None
        tree = memory.process_tree(self.process.pid)
        if memory.resident(tree) > limit and (used := memory.used(tree, uid)) > limit:
            self.exceeded = (f"exceeded {self.limits.memory_mb} MB of memory ({used >> 20} MB in "
                             f"{len(tree)} processes) and was stopped")
            self.kill()
        elif self.cgroup is not None and self.cgroup.memory_exceeded():
            self.exceeded = f"exceeded {self.limits.memory_mb} MB of memory and was stopped"
            self.kill()

    def remaining(self) -> float:
        return self.limits.timeout - (time.monotonic() - self.started)

    def kill(self) -> None:
        """End every process of the submission: its supervisor ends what it started (tier 1: the PID namespace,
        whose init dying takes every process in it; tier 2: every process left, by uid or as their subreaper),
        then its cgroup where it has one, and its process group."""
        with self._killing:  # the memory watchdog and the judge may both ask; the second waits for the first
            if not self.killed:
                self._kill()

    def _kill(self) -> None:
        self.killed = True
        if self.tier:  # an isolated child's supervisor ends every process the submission started, then itself
            try:
                os.kill(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=SUPERVISOR_SECONDS)
            except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                pass
        if self.cgroup is not None:  # whatever is left, the supervisor itself included if it hung
            if self.cgroup.memory_exceeded() and not self.exceeded:
                self.exceeded = f"exceeded {self.limits.memory_mb} MB of memory and was stopped"
            self.cgroup.kill()
        for kill in (os.killpg, os.kill):  # its group once it has called setsid(), the child itself before
            try:
                kill(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.end_notices.append(Notice(NoticeKind.SANDBOX, "child did not die within 10 s of SIGKILL"))
        self._drain.join(timeout=2)
        if self._drain.is_alive():
            self.end_notices.append(Notice(NoticeKind.SANDBOX, "a process outside the sandbox's reach still holds "
                                                               "its output pipe"))
        self.sock.close()
        if (left := scratch.remove(self.workdir)) is not None:
            self.end_notices.append(Notice(NoticeKind.SANDBOX, left))

    def exit_description(self) -> str:
        code = self.process.poll()
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def printed(self) -> str:
        text = protocol.clean_text(self.output.decode("utf-8", "replace"), len(self.output) + 1)
        if self.output_dropped:
            text += f"\n[... {self.output_dropped} more bytes of output dropped]"
        return text
