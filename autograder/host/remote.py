"""The trusted side of the boundary: a Submission whose every answer comes from the sandboxed child.

A child that dies, hangs, or answers out of format fails the request in progress (SubmissionBroken) and is
replaced by a fresh one for the next request, as long as the submission's time budget and restart allowance
last, so one crash in one part does not cost the other parts.
"""
from __future__ import annotations

import fnmatch
import itertools
import subprocess
import time
from typing import Any, Sequence

import torch

from autograder import protocol
from autograder.model.load_report import LoadReport, Notice, NoticeKind
from autograder.model.interrupts import JudgingInterrupted
from autograder.model.limits import Limits
from autograder.host.sandbox import Sandbox, ZygoteFailed, child_notices, isolation_name
from autograder.model.submission import (ModuleHandle, ModuleInfo, NotRun, Opaque, StudentError, Submission,
                                         SubmissionBroken, TensorState)

STARTUP_SECONDS = 60.0  # interpreter and torch start-up, before the first cell
LOAD_SHARE = 0.5  # of the whole-submission limit, the most that running the notebook's cells may take
LOAD_GRACE_SECONDS = 5.0  # the child stops loading on its own first; this is the judge's backstop
MAX_RESTARTS = 20  # the time budget is the real bound; this only stops a pathological restart loop
MAX_OBJECTS = 1_000_000  # keys of one child's objects; a handle is generation * MAX_OBJECTS + key


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


class Malformed(Exception):
    """A message from the child that is not what the protocol allows at that point."""


def _text(value: Any, limit: int) -> str:
    if type(value) is not str:
        raise Malformed(f"expected text, got {type(value).__name__}")
    return protocol.clean_text(value, limit)


def _texts(value: Any, count: int, limit: int) -> list[str]:
    if type(value) is not list or len(value) > count:
        raise Malformed("expected a short list of texts")
    return [_text(v, limit) for v in value]


def _cell_error(value: Any, cells: int) -> dict[str, Any]:
    if type(value) is not dict or type(value.get("cell")) is not int or not 0 < value["cell"] <= cells:
        raise Malformed("malformed cell error")
    return {"cell": value["cell"], "type": _text(value.get("type"), 100), "message": _text(value.get("message"), 500),
            "bases": _texts(value.get("bases"), 20, 100)}


def parse_ready(header: dict[str, Any], cells: int) -> tuple[list[dict[str, Any]], set[str]]:
    """The child's report after its cells ran: (cell errors, names defined).  Student code ran before it
    was sent, so every field is checked for type and size; it only ever informs feedback."""
    errors = header.get("errors")
    if header.get("ready") is not True or type(errors) is not list or len(errors) > cells:
        raise Malformed("malformed report after loading")
    return [_cell_error(e, cells) for e in errors], set(_texts(header.get("names"), 1000, 200))


class RemoteSubmission(Submission):
    def __init__(self, cells: list[str], limits: Limits, forbidden_ops: Sequence[str],
                 preload: Sequence[str] = ()) -> None:
        super().__init__()
        self.cells = cells
        self.limits = limits
        self.forbidden_ops = list(forbidden_ops)
        self.preload = list(preload)
        self.started = time.monotonic()
        self.load_deadline = self.started + limits.timeout * LOAD_SHARE
        self.part_deadline = self.started + limits.timeout
        self.part_share = limits.timeout
        self.restarts = 0
        self.sandbox: Sandbox | None = None
        self.generation = 0  # handles from an earlier child are dead
        self.ids = itertools.count(1)
        self.report = LoadReport()
        self.report.isolation = isolation_name(limits)
        self.broken_reason = ""
        self.exceeded = ""  # the memory bound was crossed: the whole submission fails, and nothing restarts it
        self.final = False  # every verdict is in: the bound crossed from now on (drawing pictures) costs nothing
        # names whose requests ran out of time or took the process down: later requests to them fail at
        # once, so one endless loop or crash cannot spend the whole budget and starve the other parts
        self.poisoned: dict[str, str] = {}
        self.skipped_cells: dict[int, str] = {}
        self.class_of: dict[int, str] = {}
        self._start()

    # lifecycle ---------------------------------------------------------------------------------------------
    def remaining(self) -> float:
        return self.limits.timeout - (time.monotonic() - self.started)

    def begin_part(self, part: str, parts_left: int) -> None:
        """Each part gets an equal share of the time left when it starts, so a slow part spends its own
        share and never the others'."""
        self.part_share = max(self.remaining(), 0) / max(parts_left, 1)
        self.part_deadline = time.monotonic() + self.part_share

    def _start(self) -> None:
        """Start a child and wait until it has run the cells.  A cell that hangs past the cell timeout or
        takes the process down is skipped in a fresh child, as an error in that cell alone would be."""
        while True:
            # the first load has its share of the limit; a restart loads again, out of what is left
            first = self.load_deadline - time.monotonic()
            load_seconds = first if self.generation == 0 else self.limits.timeout * LOAD_SHARE
            load_seconds = max(min(load_seconds, self.remaining()), 0)
            try:
                self.sandbox = Sandbox(self.cells, self.limits, self.forbidden_ops, self.skipped_cells, load_seconds,
                                       self.preload)
            except ZygoteFailed as exc:  # the grader's own failure: no grade, rather than a grade of 0
                raise JudgingInterrupted(f"could not start a sandbox ({exc})") from exc
            self.generation += 1
            self.report.memory = self.sandbox.memory_bound
            running, header = self._wait_until_loaded(time.monotonic() + load_seconds + LOAD_GRACE_SECONDS)
            if header is not None:
                try:
                    errors, names = parse_ready(header, len(self.cells))
                    break
                except Malformed as exc:
                    self._fail(f"malformed message from the submission's process after cell {running} ({exc})")
            if running is None or self.remaining() <= 0 or self.exceeded:  # over the memory bound: no retry
                if not self.report.loaded:
                    self.report.failure = self.broken_reason
                return
            # whatever broke loading (a crash, a hang, bytes that are not the protocol) came from that cell
            self.skipped_cells[running] = self.broken_reason
        if not self.report.loaded:  # the first load is the one reported; restarts load the same cells
            self.report.cell_errors = errors
            self.report.names = names
            self.report.loaded = True
        # a cell that ran out of time has cost its time once: restarts skip it
        self.skipped_cells.update({e["cell"]: e["message"] for e in errors if e["type"] == "Timeout"})

    def _wait_until_loaded(self, end: float) -> tuple[int | None, dict[str, Any] | None]:
        """(cell running when loading stopped, None) on failure; (last cell, ready message) on success."""
        running: int | None = None
        isolated = False
        while True:
            step = STARTUP_SECONDS if running is None else self.limits.cell_timeout + 2.0
            try:
                header, _ = protocol.recv(self.sandbox.sock, min(end, time.monotonic() + step), max_payload=0)
            except protocol.Timeout:
                if running is None or time.monotonic() >= end:
                    self._fail(f"the submission did not finish loading within {end - self.sandbox.started:.0f} s")
                    return running, None
                self._fail(f"cell {running} did not finish within {self.limits.cell_timeout:g} s and was stopped")
                return running, None
            except (EOFError, OSError) as exc:
                what = f"cell {running}" if running is not None else "starting Python"
                self._fail(f"the submission's process {self._ended(exc)} while running {what}")
                return running, None
            except protocol.ProtocolError as exc:
                self._fail(f"the submission's process sent bytes that are not the protocol ({exc})")
                return running, None
            if not isolated:  # the first message, sent before any student line ran: believed
                if type(header.get("isolated")) is not bool or type(header.get("notices")) is not list:
                    self._fail("malformed message from the submission's process while starting")
                    return None, None
                if not self.report.loaded:
                    self.report.notices = child_notices(header["notices"], self.sandbox.limits.isolate)
                    self.report.notices += self.sandbox.notices
                if not header["isolated"]:
                    refusal = header.get("refusal")
                    self._fail(protocol.clean_text(refusal, 500) if type(refusal) is str
                               else "the sandbox could not be set up")
                    return None, None
                isolated = True
                continue
            if header.get("ready") is not None:
                return running, header
            cell = header.get("cell")
            if type(cell) is not int or not 0 < cell <= len(self.cells):
                self._fail("malformed message from the submission's process while loading")
                return running, None
            running = cell

    def _ended(self, exc: BaseException) -> str:
        """How the child's connection ended; the child is killed first, so this never waits on it."""
        try:  # a crash closes the socket a moment before the process is seen to end
            self.sandbox.process.wait(timeout=1)
            alive = False
        except subprocess.TimeoutExpired:
            alive = True
        self.sandbox.kill()
        if alive:
            return f"closed its connection ({type(exc).__name__})"
        return self.sandbox.exit_description()

    def _fail(self, reason: str) -> None:
        self.broken_reason = reason
        self.close()

    def verdicts_final(self) -> None:
        if self.sandbox is not None:
            self.sandbox.check_memory()
            if self.sandbox.exceeded:
                self.close()
        self.final = True

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.kill()
            self.report.notices += self.sandbox.end_notices  # what its end left behind, if anything
            if self.sandbox.exceeded and not self.final:
                self.exceeded = self.broken_reason = f"the submission {self.sandbox.exceeded}"
            self.sandbox = None

    def printed(self) -> str:
        return self.sandbox.printed() if self.sandbox else ""

    def _out_of_time(self) -> str:
        if self.remaining() <= 0:
            return f"ran out of time: the submission used up its {self.limits.timeout:g} s"
        if time.monotonic() >= self.part_deadline:
            return f"ran out of time: this part used up its share ({self.part_share:.0f} s) of the time limit"
        return ""

    def _ensure_running(self) -> None:
        if self.exceeded:
            raise SubmissionBroken(self.exceeded)
        if self.sandbox is not None:
            return
        if not self.report.loaded and self.report.failure:
            raise SubmissionBroken(self.report.failure)
        if self.final:  # a picture is not worth a restart
            raise SubmissionBroken(self.broken_reason or "the submission's process ended")
        if self.restarts >= MAX_RESTARTS:
            raise SubmissionBroken(f"{self.broken_reason}; not restarted again")
        self.restarts += 1
        self._start()
        if self.sandbox is None:
            raise SubmissionBroken(self.broken_reason)

    def _object_key(self, value: Any) -> int | None:
        """The child's key of a module handle passed as an argument (None: not a handle)."""
        if not isinstance(value, ModuleHandle):
            return None
        if not isinstance(value, RemoteModule) or value.owner is not self:
            raise SubmissionBroken("a module of another submission cannot be passed to this one")
        if value.key // MAX_OBJECTS != self.generation:
            raise SubmissionBroken("this object was lost when the submission's process was restarted")
        return value.key % MAX_OBJECTS

    # one request -------------------------------------------------------------------------------------------
    def request(self, op: str, *, name: str | None = None, obj: int | None = None, args: Sequence[Any] = (),
                kwargs: dict[str, Any] | None = None, cotangents: Sequence[torch.Tensor] = ()) -> Any:
        subject = _subject(op, name, self.class_of.get(obj, "?") if obj is not None else "")
        if subject in self.poisoned:
            raise NotRun(f"an earlier request to {subject} {self.poisoned[subject]}")
        if late := self._out_of_time():
            raise SubmissionBroken(late)
        self._ensure_running()
        if obj is not None and obj // MAX_OBJECTS != self.generation:
            raise SubmissionBroken("this object was lost when the submission's process was restarted")
        encoder = protocol.Encoder(_tensor_bytes, self._object_key)
        header = {"op": op, "id": next(self.ids), "name": name,
                  "obj": None if obj is None else obj % MAX_OBJECTS, "args": encoder.encode(list(args)),
                  "kwargs": encoder.encode(dict(kwargs or {})), "cotangents": encoder.encode(list(cotangents))}
        sandbox = self.sandbox
        own_limit = self.limits.request_timeout + 2.0
        budget = max(min(own_limit, self.part_deadline - time.monotonic(), self.remaining()), 0)
        try:
            protocol.send(sandbox.sock, header, encoder.blobs)
            reply, payload = protocol.recv(sandbox.sock, time.monotonic() + budget,
                                           max_payload=self.limits.reply_mb << 20)
            if reply.get("id") != header["id"] or type(reply.get("ok")) is not bool:
                raise Malformed("reply to a different request")
            forbidden = _texts(reply.get("forbidden", []), 50, 160)
            self.forbidden_seen.update(f for f in forbidden if protocol.ROUTE.fullmatch(f)
                                       or any(fnmatch.fnmatchcase(f, p) for p in self.forbidden_ops))
            if not reply["ok"]:
                error = reply.get("error")
                if type(error) is not dict:
                    raise Malformed("error without a description")
                kind = _text(error.get("type", "Error"), 100)
                if kind == "Timeout":
                    self.poisoned[subject] = "did not finish in time"
                raise StudentError(kind, _text(error.get("message", ""), 500), _texts(error.get("bases", []), 20, 100))
            return _plain(protocol.Decoder(payload, _make_tensor).decode(reply.get("value")))
        except protocol.Timeout:
            if budget < own_limit:  # the part's or the submission's time ran out, not the request's own
                self._fail(self._out_of_time() or f"ran out of time after {budget:.0f} s")
            else:
                self.poisoned[subject] = "did not finish in time"
                self._fail(f"no answer within {budget:.0f} s (the process was stopped)")
        except (EOFError, OSError) as exc:
            ended = self._ended(exc)
            self.poisoned[subject] = f"ended the process ({ended})"
            self._fail(f"the submission's process {ended}")
        except (protocol.ProtocolError, Malformed) as exc:
            self._fail(f"malformed answer from the submission's process ({exc})")
        raise SubmissionBroken(self.broken_reason)

    # the Submission interface ------------------------------------------------------------------------------
    def names(self) -> set[str]:
        return set(self.report.names)

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        return self.request("call", name=function, args=args, kwargs=kwargs)

    def call_inputs(self, function, *args, **kwargs):
        return left_inputs(self.request("call_inputs", name=function, args=args, kwargs=kwargs), args, kwargs)

    def vjp(self, function, args, kwargs, cotangents):
        return _vjp_result(self.request("vjp", name=function, args=args, kwargs=kwargs, cotangents=cotangents))

    def rng(self, state=None):
        value = self.request("rng", args=[state])
        if not (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1):
            raise StudentError("TypeError", "the random number generator's state could not be read")
        return value

    def new(self, class_name: str, *args: Any, **kwargs: Any) -> ModuleHandle:
        return self.adopt(self.request("new", name=class_name, args=args, kwargs=kwargs), class_name)

    def adopt(self, key: Any, class_name: str) -> "RemoteModule":
        """The handle of the object the child keeps under `key` (its reply to new or child): an int the child's
        key space can hold, else the reply is malformed (a key of another generation would name a lost object)."""
        if type(key) is not int or not 0 < key < MAX_OBJECTS:
            self._fail("malformed answer from the submission's process (not an object key)")
            raise SubmissionBroken(self.broken_reason)
        handle = self.generation * MAX_OBJECTS + key
        self.class_of[handle] = class_name
        return RemoteModule(self, handle)


SAME_SUBJECT = {"forward_vjp": "forward", "forward_inputs": "forward", "forward_parameter_vjp": "forward",
                "load_and_list": "load_state_dict"}


def _subject(op: str, name: str | None, class_name: str) -> str:
    """What a request exercises, for remembering which code hangs or crashes: a function, a constructor,
    or one method of a class (forward and its backward count as one, as do loading and loading-and-listing)."""
    if op in ("call", "vjp", "call_inputs"):
        return str(name)
    if op == "rng":  # torch's own calls, none of the student's: nothing of theirs to remember
        return "torch's RNG"
    if op == "new":
        return f"{name}()"
    return f"{class_name}.{SAME_SUBJECT.get(op, op)}"



_UNREADABLE = "what the call left of its arguments could not be read"


def _input_state(value: Any, sent: Any) -> TensorState | None:
    """What the child reported of one argument: [tensor, requires_grad, has_grad] exactly where a tensor was
    sent, None exactly where none was (a None for a tensor would pass any check on it unseen)."""
    if not isinstance(sent, torch.Tensor):
        if value is not None:
            raise StudentError("TypeError", _UNREADABLE)
        return None
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], torch.Tensor)
            and type(value[1]) is bool and type(value[2]) is bool):
        raise StudentError("TypeError", _UNREADABLE)
    return TensorState(value[0], value[1], value[2])


def left_inputs(value: Any, args: Sequence[Any], kwargs: dict[str, Any]
                ) -> tuple[Any, list[TensorState | None], dict[str, TensorState | None]]:
    """A call_inputs or forward_inputs reply, validated against what was sent: [the call's value, one entry
    per positional argument, one per keyword argument, by the same names]."""
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[1], list)
            and isinstance(value[2], dict) and len(value[1]) == len(args) and set(value[2]) == set(kwargs)):
        raise StudentError("TypeError", _UNREADABLE)
    return (value[0], [_input_state(v, sent) for v, sent in zip(value[1], args)],
            {k: _input_state(value[2][k], sent) for k, sent in kwargs.items()})


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

    def forward_inputs(self, *args, **kwargs):
        return left_inputs(self._ask("forward_inputs", args=args, kwargs=kwargs), args, kwargs)

    def vjp(self, args, kwargs, cotangents):
        return _vjp_result(self._ask("forward_vjp", args=args, kwargs=kwargs, cotangents=cotangents))

    def parameter_vjp(self, args, kwargs, cotangents):
        value = self._ask("forward_parameter_vjp", args=args, kwargs=kwargs, cotangents=cotangents)
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], list)
                and len(value[1]) == len(cotangents)
                and all(isinstance(g, dict) and all(v is None or isinstance(v, torch.Tensor) for v in g.values())
                        for g in value[1])):
            raise StudentError("TypeError", "the gradients of the parameters could not be computed")
        return value[0], value[1]

    def _tensors(self, op: str, **fields: Any) -> dict[str, torch.Tensor]:
        value = self._ask(op, **fields)
        if not isinstance(value, dict) or not all(isinstance(v, torch.Tensor) for v in value.values()):
            raise StudentError("TypeError", f"{op} did not give a mapping of names to tensors")
        return value

    def state_dict(self):
        return self._tensors("state_dict")

    def named_parameters(self):
        return self._tensors("named_parameters")

    def load_state_dict(self, state, strict=True):
        self._ask("load_state_dict", kwargs={"state": dict(state), "strict": strict})

    def load_and_list(self, state):
        return self._tensors("load_and_list", kwargs={"state": dict(state)})

    def to(self, dtype):
        self._ask("to", kwargs={"dtype": str(dtype).removeprefix("torch.")})

    def child(self, name: str) -> ModuleHandle:
        return self.owner.adopt(self._ask("child", name=name), f"{self.owner.class_of.get(self.key, '?')}.{name}")

    def info(self):
        value = self._ask("info")
        if not isinstance(value, dict):
            raise StudentError("TypeError", "module description unavailable")
        children = value.get("children") if isinstance(value.get("children"), dict) else {}
        attributes = value.get("attributes") if isinstance(value.get("attributes"), dict) else {}
        return ModuleInfo(str(value.get("type", "?")), {str(k): str(v) for k, v in children.items()}, attributes,
                          _flags(value.get("training")), _flags(value.get("requires_grad")))


def _flags(value: Any) -> dict[str, bool]:
    """A name -> bool mapping from the child; anything else in it (the child chose it) is dropped."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if type(k) is str and type(v) is bool}
