"""The untrusted side: runs a submission's code cells, then answers the judge's requests.

Started by autograder.sandbox as `python -I -c ...` with one JSON argument.  Everything here runs in a
process the student's code controls once its cells have run, so nothing this process says is believed: the
judge re-checks every reply.  What this module guarantees is only what it does *before* the first student
line runs: isolation (network and PID namespaces, an unprivileged user) and the recorder that notices
torch's own implementations of graded operations.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38


class Interrupted(BaseException):
    """Raised by the timer inside a cell or a request that ran out of time.  A BaseException so that a
    student's `except Exception` cannot swallow it."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def isolate(config: dict[str, Any]) -> list[str]:
    """Namespaces and privilege drop, each degrading to a notice where the OS refuses it."""
    import resource

    notices: list[str] = []
    for name, wanted in config.get("rlimits", {}).items():
        if resource.getrlimit(getattr(resource, name)) != (wanted, wanted):
            notices.append(f"{name} could not be set to {wanted}")
    libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader dying takes us with it
    if config.get("network_namespace", True):
        if libc.unshare(CLONE_NEWNET) != 0:
            notices.append(f"no network namespace ({os.strerror(ctypes.get_errno())}): network not cut off")
    if config.get("pid_namespace", True):
        if libc.unshare(CLONE_NEWPID) == 0:
            _become_namespace_init()
        else:
            notices.append(f"no PID namespace ({os.strerror(ctypes.get_errno())}): "
                           "processes that leave the process group may outlive grading")
    uid = config.get("uid")
    if uid is not None:
        try:
            os.setgroups([])
            os.setgid(config.get("gid", uid))
            os.setuid(uid)
        except OSError as exc:
            notices.append(f"could not switch to uid {uid} ({exc.strerror}): submission runs as the grader's user")
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return notices


def _become_namespace_init() -> None:
    """After unshare(CLONE_NEWPID) only our children enter the new namespace: fork, and let the child (PID 1
    there) carry on.  When it dies the kernel kills every process left in the namespace, including ones that
    called setsid() to leave our process group."""
    pid = os.fork()
    if pid == 0:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):  # die the same way, so the judge can say "killed by SIGSEGV"
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _alarm(_signum: int, _frame: Any) -> None:
    raise Interrupted()


def _describe(exc: BaseException) -> dict[str, Any]:
    from autograder.protocol import exception_bases  # imported before any student code ran
    try:
        message = str(exc)
    except BaseException:  # a student exception whose __str__ raises
        message = "<unprintable>"
    return {"type": type(exc).__name__[:100], "message": message[:500], "bases": exception_bases(exc)}


def run_cells(cells: list[str], namespace: dict[str, Any], cell_timeout: float, skip: dict[str, str],
              starting: Any) -> list[dict[str, Any]]:
    """Run each cell like a notebook would: in one namespace, in order, an error stopping only its cell.
    `starting(n)` tells the judge which cell is running, so a cell that kills or hangs the process can be
    skipped when it is restarted (`skip`: cell number -> why)."""
    errors = []
    for index, source in enumerate(cells):
        if str(index + 1) in skip:
            errors.append({"cell": index + 1, "type": "Stopped", "message": skip[str(index + 1)], "bases": []})
            continue
        starting(index + 1)
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, cell_timeout)
        try:
            exec(compile(source, f"<cell {index + 1}>", "exec"), namespace)
        except Interrupted:
            errors.append({"cell": index + 1, "type": "Timeout",
                           "message": f"cell did not finish within {cell_timeout:g} s", "bases": []})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: a notebook survives them
            errors.append({"cell": index + 1, **_describe(exc)})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return errors


class Server:
    def __init__(self, sock: socket.socket, namespace: dict[str, Any], config: dict[str, Any]) -> None:
        import torch
        from autograder import protocol
        from autograder.submission import vjp_of
        from autograder.op_recorder import OpRecorder

        self.torch, self.protocol, self.vjp_of = torch, protocol, vjp_of
        self.sock = sock
        self.namespace = namespace
        self.request_timeout = float(config["request_timeout"])
        self.recorder = OpRecorder(frozenset(config.get("forbidden_ops", ())))
        self.objects: dict[int, Any] = {}
        self.dtypes = {getattr(torch, name): name for name in protocol.DTYPES}
        # The first use of the recorder's modes and of autograd imports parts of torch lazily (torch._dynamo
        # among them): do it now, before any timer runs, so that a request's timer never interrupts an import
        # half-way and leaves torch broken for the rest of the submission.
        with self.recorder:
            leaf = torch.ones(2, requires_grad=True)
            torch.softmax(leaf * 2, dim=-1).sum().backward()
        self.recorder.take()

    # tensors ----------------------------------------------------------------------------------------------
    def tensor_bytes(self, value: Any) -> tuple[str, tuple[int, ...], bytes] | None:
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            return None
        # a subclass's own methods are bypassed: its memory is what it is
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.detach(value).to("cpu").contiguous()
            if plain.dtype not in self.dtypes:
                raise self.protocol.ProtocolError(f"tensor dtype {plain.dtype} cannot be sent")
            return self.dtypes[plain.dtype], tuple(plain.shape), plain.numpy().tobytes()

    def make_tensor(self, array: Any, _dtype: str) -> Any:
        return self.torch.from_numpy(array)

    # requests ---------------------------------------------------------------------------------------------
    def lookup(self, name: Any) -> Any:
        if type(name) is not str or name not in self.namespace:
            raise NameError(f"name {name!r} is not defined")
        return self.namespace[name]

    def handle(self, request: dict[str, Any], args: list, kwargs: dict, cotangents: list) -> Any:
        op = request.get("op")
        torch = self.torch
        if op == "call":
            return self.lookup(request.get("name"))(*args, **kwargs)
        if op == "vjp":
            return self.vjp_of(self.lookup(request.get("name")), args, kwargs, cotangents)
        if op == "new":
            obj = self.lookup(request.get("name"))(*args, **kwargs)
            key = len(self.objects) + 1
            self.objects[key] = obj
            return key
        obj = self.objects.get(request.get("obj"))
        if obj is None:
            raise LookupError("unknown object")
        if op == "forward":
            return obj(*args, **kwargs)
        if op == "forward_vjp":
            return self.vjp_of(obj, args, kwargs, cotangents)
        if op == "state_dict":
            return dict(obj.state_dict())
        if op == "named_parameters":
            return dict(obj.named_parameters())
        if op == "load_state_dict":
            obj.load_state_dict(kwargs["state"], strict=bool(kwargs.get("strict", True)))
            return None
        if op == "to":
            obj.to(getattr(torch, kwargs["dtype"]) if kwargs.get("dtype") in self.protocol.DTYPES else None)
            return None
        if op == "info":
            children = {name: type(child).__name__ for name, child in obj.named_children()}
            plain = {k: v for k, v in vars(obj).items() if type(v) in (bool, int, float, str)}
            return {"type": type(obj).__name__, "children": children, "attributes": plain}
        raise LookupError(f"unknown request {op!r}")

    def serve(self) -> None:
        protocol = self.protocol
        while True:
            try:
                request, payload = protocol.recv(self.sock)
            except EOFError:
                return
            decoder = protocol.Decoder(payload, self.make_tensor)
            reply: dict[str, Any] = {"id": request.get("id")}
            encoder = protocol.Encoder(self.tensor_bytes)
            signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, self.request_timeout)
            try:
                args = decoder.decode(request.get("args", {"k": "list", "v": []}))
                kwargs = decoder.decode(request.get("kwargs", {"k": "dict", "v": {}}))
                cotangents = decoder.decode(request.get("cotangents", {"k": "list", "v": []}))
                with self.recorder:
                    value = self.handle(request, args, kwargs, cotangents)
                reply["value"] = encoder.encode(value)
                reply["ok"] = True
            except Interrupted:
                reply.update(ok=False, error={"type": "Timeout", "bases": [],
                                              "message": f"no answer within {self.request_timeout:g} s"})
                encoder.blobs.clear()
            except BaseException as exc:
                reply.update(ok=False, error=_describe(exc))
                encoder.blobs.clear()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            reply["forbidden"] = sorted(self.recorder.take())
            protocol.send(self.sock, reply, encoder.blobs)


def main() -> None:
    config = json.loads(sys.argv[1])
    notices = isolate(config)
    sock = socket.socket(fileno=config["sock_fd"])
    os.environ["MPLBACKEND"] = "Agg"
    import torch  # before the student's code, so the recorder holds the real classes

    torch.set_num_threads(1)
    from autograder import protocol

    with open(config["cells"], encoding="utf-8") as handle:
        cells = json.load(handle)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    server = Server(sock, namespace, config)  # imports all the kit's code the child needs, before the student's
    sys.path.remove(config["root"])  # the kit's root (solutions, suites) is not importable by the submission
    # torch seeds its global RNG randomly at start-up: a submission that draws from it must see the same
    # numbers on every run, or its grade would depend on the run
    import random

    random.seed(0)
    torch.manual_seed(0)
    errors = run_cells(cells, namespace, float(config["cell_timeout"]), config.get("skip_cells", {}),
                       lambda number: protocol.send(sock, {"cell": number}))
    names = sorted(k for k in list(namespace) if type(k) is str and not k.startswith("_"))[:MAX_NAMES]
    protocol.send(sock, {"ready": True, "errors": errors, "names": names, "notices": notices})
    server.serve()


MAX_NAMES = 1000

if __name__ == "__main__":
    main()
