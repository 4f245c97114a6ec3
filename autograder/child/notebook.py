"""The untrusted side of an ordinary nbgrader notebook: its code cells run as a Python kernel runs them.

An assignment the kit has no rubric for is graded by its own test cells, as nbgrader grades it: every code cell
runs in order, in one namespace, through IPython (magics, the display hook, tracebacks as a kernel formats
them), and each cell's outputs go back to the grader in nbformat's shape, one message per cell.  The grader
checks every message and writes the outputs into the notebook itself; nothing here is believed, and nothing
here can be more than what a student's own kernel could have said under nbgrader.

Only a timer is ours: a cell that runs past its time is interrupted as a kernel is (KeyboardInterrupt), and
the grader keeps its own deadline for a cell that ignores that.
"""
from __future__ import annotations

import io
import json
import os
import signal
import socket
from typing import Any

# what one cell may send back; the grader refuses more (autograder.host.notebook_run)
MAX_CELL_TEXT = 2 << 20  # characters: JSON escapes them into at most 6 bytes each
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # what ipykernel gives a notebook


class _Stream(io.TextIOBase):
    """sys.stdout or sys.stderr of a cell: text appended to the cell's outputs, consecutive writes merged."""

    def __init__(self, name: str, sink: "_Outputs") -> None:
        self.name, self.sink = name, sink

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.sink.stream(self.name, text)
        return len(text)


class _Outputs:
    """One cell's outputs, bounded in size: what is past the bound is counted, not kept."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.size = 0
        self.dropped = 0

    def _room(self, size: int) -> bool:
        if self.size + size > MAX_CELL_TEXT:
            self.dropped += size
            return False
        self.size += size
        return True

    def stream(self, name: str, text: str) -> None:
        if not self._room(len(text)):
            return
        last = self.items[-1] if self.items else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"].append(text)  # joined once the cell ends: appending to one string is quadratic
        else:
            self.items.append({"output_type": "stream", "name": name, "text": [text]})

    def finished(self) -> list[dict[str, Any]]:
        """The outputs as nbformat holds them, and a line saying how much was dropped."""
        for item in self.items:
            if item["output_type"] == "stream":
                item["text"] = "".join(item["text"])
        if self.dropped:
            self.items.append({"output_type": "stream", "name": "stderr",
                               "text": f"\n[{self.dropped} more characters of output dropped]\n"})
        return self.items

    def add(self, output: dict[str, Any]) -> None:
        if self._room(len(json.dumps(output, default=str))):
            self.items.append(output)


def _mime_bundle(data: Any) -> dict[str, Any]:
    """A display's data as JSON: texts as they are, anything else JSON can hold (application/json)."""
    bundle = {}
    for mime, value in (data or {}).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        bundle[str(mime)] = value
    return bundle


def _shell_classes() -> type:
    """IPython's InteractiveShell with a display hook, a display publisher and a traceback shower that write
    into the running cell's outputs, as ipykernel's do into its messages."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type

    class Hook(DisplayHook):
        def start_displayhook(self) -> None:
            pass

        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: dict, md_dict: dict | None = None) -> None:
            self.shell.outputs.add({"output_type": "execute_result", "data": _mime_bundle(format_dict),
                                    "metadata": _mime_bundle(md_dict), "execution_count": self.shell.execution_count})

        def finish_displayhook(self) -> None:
            pass

    class Publisher(DisplayPublisher):
        def publish(self, data: dict, metadata: dict | None = None, *args: Any, **kwargs: Any) -> None:
            self.shell.outputs.add({"output_type": "display_data", "data": _mime_bundle(data),
                                    "metadata": _mime_bundle(metadata)})

        def clear_output(self, wait: bool = False) -> None:
            self.shell.outputs.items.clear()

    class Shell(InteractiveShell):
        displayhook_class = Type(Hook)
        display_pub_class = Type(Publisher)
        outputs = _Outputs()

        def _showtraceback(self, etype: Any, evalue: Any, stb: list[str]) -> None:
            try:
                value = str(evalue)
            except BaseException:  # a student exception whose __str__ raises
                value = "<unprintable>"
            self.outputs.add({"output_type": "error", "ename": str(getattr(etype, "__name__", etype)),
                              "evalue": value, "traceback": [str(line) for line in stb]})

    return Shell


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt()  # what a kernel's interrupt raises, so the cell's error reads the same


def run_notebook(sock: socket.socket, cells: list[str], cell_timeout: float) -> None:
    """Runs `cells` in order and sends {"cell": n, "count": c, "timed_out": bool} with the outputs (JSON) as the
    payload after each, then {"finished": true}."""
    import sys

    from traitlets.config import Config

    from autograder import protocol

    os.environ.update(NBGRADER_EXECUTION="autograde", MPLBACKEND=INLINE_BACKEND)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"  # as nbgrader starts a kernel: no history file
    config.InteractiveShell.colors = "Linux"  # a kernel's tracebacks carry colours too
    # the process's one shell, as a kernel's is: display() and get_ipython() find it
    shell = _shell_classes().instance(config=config, ipython_dir=os.path.join(os.getcwd(), ".ipython"))
    for number, source in enumerate(cells, 1):
        shell.outputs = _Outputs()
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Stream("stdout", shell.outputs), _Stream("stderr", shell.outputs)
        count = shell.execution_count
        timed_out = False

        def interrupt(signum: int, frame: Any) -> None:
            nonlocal timed_out
            timed_out = True
            _interrupt(signum, frame)

        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, cell_timeout)
        try:
            shell.run_cell(source, store_history=True, silent=False)
        except BaseException as exc:  # raised outside the code IPython guards (a KeyboardInterrupt in its hooks)
            shell.outputs.add({"output_type": "error", "ename": type(exc).__name__, "evalue": "", "traceback": []})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = stdout, stderr
        payload = json.dumps(shell.outputs.finished(), ensure_ascii=False, default=str).encode("utf-8", "replace")
        protocol.send(sock, {"cell": number, "count": count, "timed_out": timed_out}, [payload])
    protocol.send(sock, {"finished": True})
