"""The trusted side of the boundary: a Submission whose every answer comes from the sandboxed child.

A child that dies, hangs, or answers out of format fails the request in progress (SubmissionBroken) and is
replaced by a fresh one for the next request, as long as the submission's time budget and restart allowance
last, so one crash in one part does not cost the other parts.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Sequence

import torch

from autograder import protocol
from autograder.sandbox import Limits, Sandbox
from autograder.submission import (ModuleHandle, ModuleInfo, Opaque, StudentError, Submission,
                                   SubmissionBroken)

STARTUP_SECONDS = 60.0  # interpreter and torch start-up, before the first cell
MAX_RESTARTS = 20  # the time budget is the real bound; this only stops a pathological restart loop


def _tensor_bytes(value: Any) -> tuple[str, tuple[int, ...], bytes] | None:
    if not isinstance(value, torch.Tensor):
        return None
    plain = value.detach().cpu().contiguous()
    return str(plain.dtype).removeprefix("torch."), tuple(plain.shape), plain.numpy().tobytes()


def _make_tensor(array: Any, _dtype: str) -> torch.Tensor:
    return torch.from_numpy(array)


def _plain(value: Any) -> Any:
    """Decoded values: opaque markers become Opaque."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "opaque":
        return Opaque(value[1])
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class LoadReport:
    def __init__(self) -> None:
        self.cell_errors: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.notices: list[str] = []
        self.loaded = False
        self.failure = ""  # why the submission never finished loading, if it did not


class RemoteSubmission(Submission):
    def __init__(self, cells: list[str], limits: Limits, forbidden_ops: Sequence[str]) -> None:
        super().__init__()
        self.cells = cells
        self.limits = limits
        self.forbidden_ops = list(forbidden_ops)
        self.started = time.monotonic()
        self.restarts = 0
        self.sandbox: Sandbox | None = None
        self.generation = 0  # handles from an earlier child are dead
        self.ids = itertools.count(1)
        self.report = LoadReport()
        self.broken_reason = ""
        # names whose requests ran out of time or took the process down: later requests to them fail at
        # once, so one endless loop or crash cannot spend the whole budget and starve the other parts
        self.poisoned: dict[str, str] = {}
        self.skipped_cells: dict[int, str] = {}
        self.class_of: dict[int, str] = {}
        self._start()

    # lifecycle ---------------------------------------------------------------------------------------------
    def remaining(self) -> float:
        return self.limits.timeout - (time.monotonic() - self.started)

    def _start(self) -> None:
        """Start a child and wait until it has run the cells.  A cell that hangs past the cell timeout or
        takes the process down is skipped in a fresh child, as an error in that cell alone would be."""
        while True:
            self.sandbox = Sandbox(self.cells, self.limits, self.forbidden_ops, self.skipped_cells)
            self.generation += 1
            running, header = self._wait_until_loaded()
            if header is not None:
                break
            if running is None or self.remaining() <= 0:
                if not self.report.loaded:
                    self.report.failure = self.broken_reason
                return
            self.skipped_cells[running] = self.broken_reason
        if not self.report.loaded:  # the first load is the one reported; restarts load the same cells
            self.report.cell_errors = [e for e in header.get("errors", []) if isinstance(e, dict)][:100]
            # a cell that ran out of time has cost its time once: restarts skip it
            self.skipped_cells.update({e["cell"]: f"cell {e['cell']} did not finish in time"
                                       for e in self.report.cell_errors
                                       if e.get("type") == "Timeout" and type(e.get("cell")) is int})
            self.report.names = {n for n in header.get("names", []) if isinstance(n, str)}
            self.report.notices = [str(n) for n in header.get("notices", [])] + self.sandbox.notices
            self.report.loaded = True

    def _wait_until_loaded(self) -> tuple[int | None, dict[str, Any] | None]:
        """(cell running when loading stopped, None) on failure; (None, ready message) on success."""
        running: int | None = None
        end = time.monotonic() + max(self.remaining(), 0)
        while True:
            step = STARTUP_SECONDS if running is None else self.limits.cell_timeout + 2.0
            try:
                header, _ = protocol.recv(self.sandbox.sock, min(end, time.monotonic() + step), max_payload=0)
            except protocol.Timeout:
                if running is None or time.monotonic() >= end:
                    self._fail(f"the submission did not finish loading within the {self.limits.timeout:g} s limit")
                    return None, None
                self._fail(f"cell {running} did not finish within {self.limits.cell_timeout:g} s and was stopped")
                return running, None
            except (EOFError, OSError, protocol.ProtocolError):
                self.sandbox.process.wait(timeout=5)
                what = f"cell {running}" if running is not None else "starting Python"
                self._fail(f"the submission's process {self.sandbox.exit_description()} while running {what}")
                return running, None
            if header.get("ready") is True:
                return None, header
            cell = header.get("cell")
            if type(cell) is not int or not 0 < cell <= len(self.cells):
                self._fail("malformed message from the submission's process while loading")
                return None, None
            running = cell

    def _fail(self, reason: str) -> None:
        self.broken_reason = reason
        if self.sandbox is not None:
            self.sandbox.kill()
            self.sandbox = None

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.kill()
            self.sandbox = None

    def printed(self) -> str:
        return self.sandbox.printed() if self.sandbox else ""

    def _ensure_running(self) -> None:
        if self.sandbox is not None:
            return
        if not self.report.loaded and self.report.failure:
            raise SubmissionBroken(self.report.failure)
        if self.restarts >= MAX_RESTARTS or self.remaining() <= 0:
            raise SubmissionBroken(f"{self.broken_reason}; not restarted again")
        self.restarts += 1
        self._start()
        if self.sandbox is None:
            raise SubmissionBroken(self.broken_reason)

    # one request -------------------------------------------------------------------------------------------
    def request(self, op: str, *, name: str | None = None, obj: int | None = None, args: Sequence[Any] = (),
                kwargs: dict[str, Any] | None = None, cotangents: Sequence[torch.Tensor] = ()) -> Any:
        subject = _subject(op, name, self.class_of.get(obj, "?") if obj is not None else "")
        if subject in self.poisoned:
            raise SubmissionBroken(f"not run: an earlier request to {subject} {self.poisoned[subject]}")
        self._ensure_running()
        if obj is not None and obj // 1_000_000 != self.generation:
            raise SubmissionBroken("this object was lost when the submission's process was restarted")
        encoder = protocol.Encoder(_tensor_bytes)
        header = {"op": op, "id": next(self.ids), "name": name,
                  "obj": None if obj is None else obj % 1_000_000, "args": encoder.encode(list(args)),
                  "kwargs": encoder.encode(dict(kwargs or {})), "cotangents": encoder.encode(list(cotangents))}
        sandbox = self.sandbox
        budget = min(self.limits.request_timeout + 2.0, self.remaining())
        try:
            protocol.send(sandbox.sock, header, encoder.blobs)
            reply, payload = protocol.recv(sandbox.sock, time.monotonic() + max(budget, 0),
                                           max_payload=self.limits.reply_mb << 20)
            if reply.get("id") != header["id"]:
                raise protocol.ProtocolError("reply to a different request")
            forbidden = reply.get("forbidden", [])
            if type(forbidden) is list:
                self.forbidden_seen.update(str(f) for f in forbidden[:50] if str(f) in self.forbidden_ops)
            if reply.get("ok") is not True:
                error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
                if error.get("type") == "Timeout":
                    self.poisoned[subject] = "did not finish in time"
                bases = error.get("bases") if type(error.get("bases")) is list else []
                raise StudentError(str(error.get("type", "Error"))[:100], str(error.get("message", ""))[:500],
                                   [str(b) for b in bases[:20]])
            return _plain(protocol.Decoder(payload, _make_tensor).decode(reply.get("value")))
        except protocol.Timeout:
            self.poisoned[subject] = "did not finish in time"
            self._fail(f"no answer within {budget:.0f} s (the process was stopped)")
        except (EOFError, OSError):
            sandbox.process.wait(timeout=5)
            self.poisoned[subject] = f"ended the process ({sandbox.exit_description()})"
            self._fail(f"the submission's process {sandbox.exit_description()}")
        except (protocol.ProtocolError, ValueError, TypeError, KeyError) as exc:
            self._fail(f"malformed answer from the submission's process ({exc})")
        raise SubmissionBroken(self.broken_reason)

    # the Submission interface ------------------------------------------------------------------------------
    def names(self) -> set[str]:
        return set(self.report.names)

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        return self.request("call", name=function, args=args, kwargs=kwargs)

    def vjp(self, function, args, kwargs, cotangents):
        return _vjp_result(self.request("vjp", name=function, args=args, kwargs=kwargs, cotangents=cotangents))

    def new(self, class_name: str, *args: Any, **kwargs: Any) -> ModuleHandle:
        key = self.request("new", name=class_name, args=args, kwargs=kwargs)
        if type(key) is not int:
            raise SubmissionBroken("malformed answer from the submission's process")
        handle = self.generation * 1_000_000 + key
        self.class_of[handle] = class_name
        return RemoteModule(self, handle)


def _subject(op: str, name: str | None, class_name: str) -> str:
    """What a request exercises, for remembering which code hangs or crashes: a function, a constructor,
    or one method of a class (forward and its backward count as one)."""
    if op in ("call", "vjp"):
        return str(name)
    if op == "new":
        return f"{name}()"
    return f"{class_name}.{'forward' if op == 'forward_vjp' else op}"


def _vjp_result(value: Any) -> tuple[Any, list[list[torch.Tensor | None]]]:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], list)
            and all(isinstance(g, list) for g in value[1])):
        raise StudentError("TypeError", "the gradients could not be computed from the returned value")
    return value[0], value[1]


class RemoteModule(ModuleHandle):
    def __init__(self, owner: RemoteSubmission, key: int) -> None:
        self.owner, self.key = owner, key

    def _ask(self, op: str, **fields: Any) -> Any:
        return self.owner.request(op, obj=self.key, **fields)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask("forward", args=args, kwargs=kwargs)

    def vjp(self, args, kwargs, cotangents):
        return _vjp_result(self._ask("forward_vjp", args=args, kwargs=kwargs, cotangents=cotangents))

    def _tensors(self, op: str) -> dict[str, torch.Tensor]:
        value = self._ask(op)
        if not isinstance(value, dict) or not all(isinstance(v, torch.Tensor) for v in value.values()):
            raise StudentError("TypeError", f"{op} did not give a mapping of names to tensors")
        return value

    def state_dict(self):
        return self._tensors("state_dict")

    def named_parameters(self):
        return self._tensors("named_parameters")

    def load_state_dict(self, state, strict=True):
        self._ask("load_state_dict", kwargs={"state": dict(state), "strict": strict})

    def to(self, dtype):
        self._ask("to", kwargs={"dtype": str(dtype).removeprefix("torch.")})

    def info(self):
        value = self._ask("info")
        if not isinstance(value, dict):
            raise StudentError("TypeError", "module description unavailable")
        children = value.get("children") if isinstance(value.get("children"), dict) else {}
        attributes = value.get("attributes") if isinstance(value.get("attributes"), dict) else {}
        return ModuleInfo(str(value.get("type", "?")), {str(k): str(v) for k, v in children.items()}, attributes)
