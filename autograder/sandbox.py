"""Starting, watching and killing the child process that runs a submission.

One `Sandbox` is one child: its own session and process group (killed as a whole), resource limits set
before exec, an empty working directory of its own, output drained into a capped buffer, and a socket
for requests.  Namespaces and the unprivileged user are set up by the child itself before the student's
first line (autograder.child.isolate); anything the OS refuses comes back as a notice.
"""
from __future__ import annotations

import json
import os
import pwd
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# what the sandbox user must not read: the hidden suites, the reference, the notebook with its solutions,
# the kit's own tests and the history that holds all of them
PRIVATE = (ROOT / "autograder" / "assignments", ROOT / "solutions", ROOT / "source", ROOT / "tests", ROOT / ".git")


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
    processes: int = 64           # only enforced when the child runs as its own user
    user: str | None = "nobody"   # run as this user when the grader is root; None keeps the grader's


def blocked_ancestor(path: Path) -> Path | None:
    """The first directory above `path` that other users cannot enter, if any."""
    for directory in reversed([path, *path.parents]):
        if directory.is_dir() and not directory.stat().st_mode & 0o001:
            return directory
    return None


def _unprivileged_ids(name: str | None, notices: list[str]) -> tuple[int, int] | None:
    if name is None:
        return None
    if os.geteuid() != 0:
        notices.append("grader is not root: submission runs as the grader's user (the kit's files are "
                       "readable to it)")
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        notices.append(f"user {name!r} does not exist: submission runs as root")
        return None
    for needed in (Path(sys.base_prefix), Path(sys.prefix), ROOT):
        blocked = blocked_ancestor(needed)
        if blocked is not None:
            notices.append(f"{blocked} is not searchable by {name!r} (run the setup command as root to "
                           f"fix): submission runs as root")
            return None
    for private in PRIVATE:
        if private.exists() and private.stat().st_mode & 0o005:
            notices.append(f"{private} is readable by {name!r} (run the setup command as root to fix)")
    return entry.pw_uid, entry.pw_gid


def rlimits(limits: Limits) -> dict[str, int]:
    cpu = int(limits.timeout) + 5
    return {"RLIMIT_AS": limits.memory_mb << 20, "RLIMIT_CPU": cpu, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_CORE": 0, "RLIMIT_NOFILE": limits.open_files, "RLIMIT_NPROC": limits.processes}


class Sandbox:
    def __init__(self, cells: list[str], limits: Limits, forbidden_ops: list[str],
                 skip_cells: dict[int, str] | None = None) -> None:
        self.limits = limits
        self.notices: list[str] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="autograder-"))
        ids = _unprivileged_ids(limits.user, self.notices)
        cells_path = self.workdir / "cells.json"
        cells_path.write_text(json.dumps(cells), encoding="utf-8")
        if ids:
            os.chown(self.workdir, *ids)
            os.chmod(cells_path, 0o444)
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        config = {"sock_fd": child_sock.fileno(), "cells": str(cells_path), "root": str(ROOT),
                  "cell_timeout": limits.cell_timeout, "request_timeout": limits.request_timeout,
                  "forbidden_ops": forbidden_ops, "skip_cells": {str(k): v for k, v in (skip_cells or {}).items()},
                  "rlimits": rlimits(limits),
                  "uid": ids[0] if ids else None, "gid": ids[1] if ids else None}
        bootstrap = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from autograder.child import main; main()"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.workdir), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "MPLCONFIGDIR": str(self.workdir / ".mpl"), "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        self.started = time.monotonic()
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

    def _set_limits(self) -> None:
        """Runs in the child between fork and exec.  It cannot report; the child checks what took effect
        (autograder.child.isolate) and says so in a notice."""
        for name, value in rlimits(self.limits).items():
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass

    def _drain_output(self) -> None:
        cap = self.limits.output_kb << 10
        stream = self.process.stdout
        while chunk := stream.read1(1 << 16):
            room = cap - len(self.output)
            self.output += chunk[:max(room, 0)]
            self.output_dropped += max(len(chunk) - max(room, 0), 0)

    def remaining(self) -> float:
        return self.limits.timeout - (time.monotonic() - self.started)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Kill the whole process group; the PID namespace (when there is one) takes setsid() escapees."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.notices.append("child did not die within 10 s of SIGKILL")
        self._drain.join(timeout=2)
        self.sock.close()
        self.process.stdout.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def exit_description(self) -> str:
        code = self.process.poll()
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def printed(self) -> str:
        text = self.output.decode("utf-8", "replace")
        if self.output_dropped:
            text += f"\n[... {self.output_dropped} more bytes of output dropped]"
        return text

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()
