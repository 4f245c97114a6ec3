"""Starting, watching and killing the child process that runs a submission.

One `Sandbox` is one child: its own session and process group, a cgroup of its own where the machine offers
cgroup v2 (killed as a whole with `cgroup.kill`), resource limits set before exec, output drained into a
capped buffer, and a socket for requests.  The cells reach the child over that socket, never through a
file.  The kernel isolation (namespaces, its own root file system and identity) is set up by the child
itself before the student's first line (autograder.isolation); anything the OS refuses comes back as a
notice, or stops the submission when isolation is required.
"""
from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from autograder import protocol

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Limits:
    """What one submission may use.  Defaults suit a 2-core CI machine."""

    timeout: float = 180.0        # wall seconds for the whole submission: loading plus every request
    cell_timeout: float = 30.0    # wall seconds per notebook cell while loading
    request_timeout: float = 20.0  # wall seconds per request (one forward, one backward, ...)
    memory_mb: int = 2048         # address space of the child (the reference needs about 1 GB)
    output_kb: int = 64           # printed output kept (the rest is drained and dropped)
    reply_mb: int = 64            # largest reply accepted from the child
    file_size_mb: int = 16        # largest file the child may write
    open_files: int = 256
    processes: int = 64           # counted per sandbox: its own uid or user namespace
    isolate: bool = True          # False only when the grader explicitly allows grading without isolation


def rlimits(limits: Limits) -> dict[str, int]:
    """Set before exec.  RLIMIT_NPROC is not among them: it is set by the child once it has its own
    identity, so that it counts this sandbox's processes alone."""
    cpu = int(limits.timeout) + 5
    return {"RLIMIT_AS": limits.memory_mb << 20, "RLIMIT_CPU": cpu, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_CORE": 0, "RLIMIT_NOFILE": limits.open_files}


@functools.cache
def isolation_refused() -> str | None:
    """None when this machine lets a child isolate itself, else why not (checked in a throw-away process)."""
    from autograder import isolation

    staging = tempfile.mkdtemp(prefix="autograder-probe-")
    try:
        return isolation.probe(staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class Cgroup:
    """A cgroup v2 of one sandbox's own, below the grader's: every process the child starts stays in it, and
    `cgroup.kill` ends them all at once, whatever session, process group or namespace they moved to."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, notices: list[str]) -> "Cgroup | None":
        try:
            mounts = Path("/proc/self/mounts").read_text().splitlines()
            mount = next(line.split()[1] for line in mounts if line.split()[2] == "cgroup2")
            own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.startswith("0::"))
            path = Path(mount + own.rstrip("/")) / f"autograder-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            path.mkdir()
            return cls(path)
        except (OSError, StopIteration, IndexError) as exc:
            notices.append(f"no cgroup of its own ({getattr(exc, 'strerror', None) or 'no cgroup v2 here'}): "
                           "the PID namespace alone ends its processes")
            return None

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


class Sandbox:
    def __init__(self, cells: list[str], limits: Limits, forbidden_ops: list[str],
                 skip_cells: dict[int, str] | None = None, load_seconds: float | None = None) -> None:
        self.limits = limits
        self.notices: list[str] = []
        # the child builds its root file system on this empty directory inside its own mount namespace (the
        # host never sees anything in it), or works in it when isolation is off
        self.workdir = Path(tempfile.mkdtemp(prefix="autograder-"))
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        config = {"sock_fd": child_sock.fileno(), "root": str(ROOT), "workdir": str(self.workdir),
                  "isolate": limits.isolate, "cell_timeout": limits.cell_timeout,
                  "load_seconds": load_seconds if load_seconds is not None else limits.timeout,
                  "request_timeout": limits.request_timeout, "forbidden_ops": forbidden_ops,
                  "skip_cells": {str(k): v for k, v in (skip_cells or {}).items()},
                  "rlimits": rlimits(limits), "processes": limits.processes}
        bootstrap = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from autograder.child import main; main()"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.workdir), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        self.cgroup = Cgroup.create(self.notices) if limits.isolate else None
        self.started = time.monotonic()
        self.killed = False
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-u", "-c", bootstrap, json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=self.workdir, env=env, pass_fds=[child_sock.fileno()], start_new_session=True,
            preexec_fn=self._set_limits)
        child_sock.close()
        self.output = bytearray()
        self.output_dropped = 0
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        if self.cgroup is not None:
            try:  # before the child reads its cells, so before it can start anything
                self.cgroup.add(self.process.pid)
            except OSError as exc:
                self.notices.append(f"could not join its cgroup ({exc.strerror}): the PID namespace alone ends "
                                    "its processes")
                self.cgroup.kill()
                self.cgroup = None
        try:
            protocol.send(self.sock, {"cells": len(cells)}, [json.dumps(cells).encode()])
        except OSError:
            pass  # the child is already gone; the first receive says how

    def _set_limits(self) -> None:
        """Runs in the child between fork and exec.  It cannot report; the child checks what took effect
        (autograder.child) and says so in a notice."""
        for name, value in rlimits(self.limits).items():
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass

    def _drain_output(self) -> None:
        """The only reader of the pipe; it closes the pipe itself, so nothing ever waits on a pipe that a
        leftover process could hold open."""
        cap = self.limits.output_kb << 10
        stream = self.process.stdout
        while chunk := stream.read1(1 << 16):
            room = max(cap - len(self.output), 0)
            self.output += chunk[:room]
            self.output_dropped += len(chunk) - min(len(chunk), room)
        stream.close()

    def remaining(self) -> float:
        return self.limits.timeout - (time.monotonic() - self.started)

    def kill(self) -> None:
        """End every process of the submission: its cgroup where it has one, its process group, and the PID
        namespace, whose init dying takes every process in it."""
        if self.killed:
            return
        self.killed = True
        if self.cgroup is not None:
            self.cgroup.kill()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.notices.append("child did not die within 10 s of SIGKILL")
        self._drain.join(timeout=2)
        if self._drain.is_alive():
            self.notices.append("a process outside the sandbox's reach still holds its output pipe")
        self.sock.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

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
