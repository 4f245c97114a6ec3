"""An ordinary notebook's code cells run in a sandbox, and every output checked before anyone sees it.

The child (autograder.child.notebook) runs the cells as a Python kernel would and sends each cell's outputs in
nbformat's shape.  Student code ran before every one of those messages, so each is read as hostile: its size,
nesting, types and order are checked here, and what does not fit stops the run as a kernel that died would.
The host keeps its own deadline for each cell (the child's timer may have been disarmed), and the sandbox's
limits, tiers and clean-up are the same as for the kit's own assignments (autograder.host.sandbox).
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from autograder import protocol
from autograder.host.sandbox import Sandbox, child_notices, isolation_name
from autograder.model.limits import Limits
from autograder.model.load_report import Notice

STARTUP_SECONDS = 60.0   # the child isolating itself and IPython starting, before the first cell
GRACE_SECONDS = 5.0      # past a cell's own timer, before the host stops the child itself
MAX_CELL_BYTES = 16 << 20  # one cell's outputs as sent (the child keeps 2 M characters of text)
MAX_OUTPUTS = 1000       # outputs of one cell
MAX_DEPTH = 12           # nesting of one cell's outputs (application/json included)
MAX_FILES = 1000         # the notebook's own files copied into its sandbox
MAX_FILES_BYTES = 48 << 20  # and their size together (tier 1's home is a 64 MB tmpfs)
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


class Malformed(Exception):
    """A message from the child that is not what a kernel could have sent."""


@dataclass
class CellRun:
    outputs: list[dict[str, Any]]
    execution_count: int | None
    timed_out: bool


@dataclass
class NotebookRun:
    """What running the cells gave: one CellRun per cell, as far as the child got."""
    cells: list[CellRun] = field(default_factory=list)
    isolation: str = ""
    memory: str = ""  # what held its memory to the limit there (autograder.host.memory.bound)
    notices: list[Notice] = field(default_factory=list)
    died: str = ""  # why the child stopped before its last cell ("" when it ran every one)
    stuck: bool = False  # it stopped because a cell ran on past its interrupt (not because it died)


# --- the notebook's own files ------------------------------------------------------------------------------

def gather_files(folders: Iterable[Path], into: Path, skip_suffixes: tuple[str, ...] = (".ipynb",)) -> list[str]:
    """Copies the regular files below each folder into `into`, later folders overwriting earlier ones (nbgrader
    copies the submission, then the instructor's files over it).  Nothing is followed: a link, a device or a
    FIFO is left out, as are files past MAX_FILES or MAX_FILES_BYTES.  Returns what was left out, one line each."""
    left_out: list[str] = []
    count = size = 0
    for folder in folders:
        if not folder.is_dir() or folder.is_symlink():
            continue
        for parent, dirs, files in os.walk(folder, followlinks=False):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(parent, d))]
            for name in sorted(files):
                path = Path(parent, name)
                relative = path.relative_to(folder)
                if path.suffix in skip_suffixes:
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    left_out.append(f"{relative}: not a regular file")
                    continue
                with os.fdopen(fd, "rb") as handle:
                    info = os.fstat(handle.fileno())
                    if not stat.S_ISREG(info.st_mode):
                        left_out.append(f"{relative}: not a regular file")
                        continue
                    if count >= MAX_FILES or size + info.st_size > MAX_FILES_BYTES:
                        left_out.append(f"{relative}: past the {MAX_FILES} files or {MAX_FILES_BYTES >> 20} MB "
                                        "a notebook's own files may hold")
                        continue
                    target = into / relative
                    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                    with open(target, "wb") as copy:
                        shutil.copyfileobj(handle, copy)
                    target.chmod(0o644)  # a root grader's sandbox has a uid of its own, and reads them
                    count, size = count + 1, size + info.st_size
    return left_out


# --- the outputs ---------------------------------------------------------------------------------------------

def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise Malformed(f"{what} is not text")
    return value


def _bundle(value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict or len(value) > 100:
        raise Malformed(f"{what} is not a small mapping")
    for key in value:
        _text(key, f"a key of {what}")
    return value


def checked_output(value: Any) -> dict[str, Any]:
    """One output as nbformat holds it, or Malformed."""
    if type(value) is not dict or value.get("output_type") not in OUTPUT_TYPES:
        raise Malformed("an output that is not a stream, a display, a result or an error")
    kind = value["output_type"]
    if kind == "stream":
        if value.get("name") not in ("stdout", "stderr"):
            raise Malformed("a stream that is neither stdout nor stderr")
        return {"output_type": kind, "name": value["name"], "text": _text(value.get("text"), "a stream's text")}
    if kind == "error":
        trace = value.get("traceback")
        if type(trace) is not list or len(trace) > 10000:
            raise Malformed("an error whose traceback is not a list of lines")
        return {"output_type": kind, "ename": _text(value.get("ename"), "an error's name")[:1000],
                "evalue": _text(value.get("evalue"), "an error's value"),
                "traceback": [_text(line, "a traceback line") for line in trace]}
    output = {"output_type": kind, "data": _bundle(value.get("data"), "a display's data"),
              "metadata": _bundle(value.get("metadata", {}), "a display's metadata")}
    if kind == "execute_result":
        count = value.get("execution_count")
        if count is not None and (type(count) is not int or not 0 <= count < 1 << 31):
            raise Malformed("a result whose execution count is not a count")
        output["execution_count"] = count
    return output


def checked_cell(header: dict[str, Any], payload: bytes, expected: int) -> CellRun:
    if header.get("cell") != expected or type(header.get("cell")) is not int:
        raise Malformed(f"a message about another cell than cell {expected}")
    count, timed_out = header.get("count"), header.get("timed_out")
    if not (count is None or (type(count) is int and 0 <= count < 1 << 31)) or type(timed_out) is not bool:
        raise Malformed("a cell's count or timer that is not one")
    try:
        outputs = protocol.loads(payload, MAX_DEPTH)
    except ValueError as exc:
        raise Malformed(f"outputs that are not JSON ({exc})") from None
    if type(outputs) is not list or len(outputs) > MAX_OUTPUTS:
        raise Malformed("outputs that are not a list")
    return CellRun([checked_output(o) for o in outputs], count, timed_out)


# --- running ---------------------------------------------------------------------------------------------------

def run_notebook(cells: list[str], limits: Limits, files: Path | None = None) -> NotebookRun:
    """Runs `cells` in a fresh sandbox, each within `limits.cell_timeout`; the sandbox ends before this returns,
    whatever happened.  Raises autograder.host.sandbox.ZygoteFailed when no sandbox can be started (the grader's
    failure, never the notebook's)."""
    run = NotebookRun(isolation=isolation_name(limits))
    sandbox = Sandbox(cells, limits, [], preload=["IPython"], mode="notebook", files=files)
    run.memory = sandbox.memory_bound
    try:
        run.died = _collect(sandbox, cells, limits.cell_timeout, run)
    finally:
        sandbox.kill()
        run.notices += sandbox.notices
    if sandbox.exceeded:
        run.died = f"the notebook's process {sandbox.exceeded}"
    return run


def _collect(sandbox: Sandbox, cells: list[str], cell_timeout: float, run: NotebookRun) -> str:
    """Reads the child's messages into `run`; returns why it stopped early, or ""."""
    deadline = time.monotonic() + STARTUP_SECONDS
    expected = 0  # 0: the first message, which says how the child isolated itself
    while True:
        running = f"cell {expected}" if expected else "starting Python"
        try:
            header, payload = protocol.recv(sandbox.sock, deadline, max_payload=MAX_CELL_BYTES if expected else 0)
        except protocol.Timeout:
            run.stuck = expected > 0
            return f"{running} did not finish within {cell_timeout:g} s, and did not stop when interrupted"
        except (EOFError, OSError):
            sandbox.kill()
            return f"the notebook's process {sandbox.exit_description()} while running {running}"
        except protocol.ProtocolError as exc:
            return f"the notebook's process sent bytes that are not the protocol while running {running} ({exc})"
        if expected == 0:  # sent before any student line ran: believed
            if type(header.get("isolated")) is not bool or type(header.get("notices")) is not list:
                return "malformed message from the notebook's process while starting"
            run.notices = child_notices(header["notices"], sandbox.limits.isolate)
            if not header["isolated"]:
                refusal = header.get("refusal")
                return protocol.clean_text(refusal, 500) if type(refusal) is str else "the sandbox could not be set up"
            expected, deadline = 1, time.monotonic() + STARTUP_SECONDS + cell_timeout + GRACE_SECONDS
            continue
        if expected > len(cells):
            return "" if header.get("finished") is True else "malformed message from the notebook's process at its end"
        try:
            run.cells.append(checked_cell(header, payload, expected))
        except Malformed as exc:
            return f"malformed message from the notebook's process after cell {expected} ({exc})"
        expected, deadline = expected + 1, time.monotonic() + cell_timeout + GRACE_SECONDS


def staged_files(folders: Iterable[Path]) -> tuple[Path, list[str]]:
    """A fresh folder holding the notebook's own files (gather_files); the caller removes it."""
    staging = Path(tempfile.mkdtemp(prefix="autograder-files-"))
    os.chmod(staging, 0o755)  # a root grader's sandbox runs under a uid of its own, and must read them
    return staging, gather_files(folders, staging)

