"""The untrusted side: runs a submission's code cells, then answers the judge's requests.

Forked from the warm zygote (autograder.child.zygote), which has already imported torch and this module; the cells
arrive as the first message on the child's socket.  Everything here runs in a process the student's code
controls once its first cell has run, so nothing this process says after that is believed: the judge
re-checks every reply.  What this module guarantees is only what it does *before* the first student line
runs: the steps of autograder.child.box, in their fixed order (the kernel's isolation, the disabled torch
implementations, the recorder that notices them, the provenance audit hook), reported in the first message
("isolated", and the "steps" that ran).
"""
from __future__ import annotations

import gc
import json
import os
import resource
import signal
import socket
import sys
import time
from typing import Any

from _signal import signal as _set_handler  # signal.signal, less the enum it makes of the handler it replaced

NOTEBOOK_MODE = "notebook"  # config["mode"] of an ordinary notebook's child (autograder.child.notebook)

# time left when loading stops, so the judge's own deadline (a little later) is never the one that fires
LOAD_SLACK_SECONDS = 1.0


class Interrupted(BaseException):
    """Raised by the timer inside a cell or a request that ran out of time.  A BaseException so that a
    student's `except Exception` cannot swallow it."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise Interrupted()


def _describe(exc: BaseException) -> dict[str, Any]:
    from autograder.protocol import exception_bases  # imported before any student code ran
    try:
        message = str(exc)
    except BaseException:  # a student exception whose __str__ raises
        message = "<unprintable>"
    return {"type": type(exc).__name__[:100], "message": message[:500], "bases": exception_bases(exc)}


def run_cells(cells: list[str], namespace: dict[str, Any], cell_timeout: float, load_seconds: float,
              skip: dict[str, str], starting: Any) -> list[dict[str, Any]]:
    """Run each cell like a notebook would: in one namespace, in order, an error stopping only its cell.
    Loading as a whole gets `load_seconds`; cells that would start after that are not run, so a slow
    notebook loses its last cells, not the whole grade.  `starting(n)` tells the judge which cell is
    running, so a cell that kills or hangs the process can be skipped when it is restarted (`skip`: cell
    number -> why)."""
    errors = []
    deadline = time.monotonic() + load_seconds - LOAD_SLACK_SECONDS
    for index, source in enumerate(cells):
        number = index + 1
        if str(number) in skip:
            errors.append({"cell": number, "type": "Stopped", "message": skip[str(number)], "bases": []})
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            errors.append({"cell": number, "type": "Timeout", "bases": [],
                           "message": f"not run: the notebook used up its {load_seconds:g} s to load"})
            continue
        starting(number)
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, min(cell_timeout, left))
        try:
            exec(compile(source, f"<cell {number}>", "exec"), namespace)
        except Interrupted:
            errors.append({"cell": number, "type": "Timeout", "bases": [],
                           "message": f"cell did not finish within {min(cell_timeout, left):g} s"})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: a notebook survives them
            errors.append({"cell": number, **_describe(exc)})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return errors


class Server:
    def __init__(self, sock: socket.socket, namespace: dict[str, Any], config: dict[str, Any], recorder: Any) -> None:
        """`recorder` is the op recorder the box started (autograder.child.box), already warmed up; everything
        imported here was imported by the zygote, before any child existed."""
        import torch
        from autograder import protocol
        from autograder.child.vjp import parameter_vjp_of, rng_state, vjp_of

        self.torch, self.protocol, self.vjp_of, self.parameter_vjp_of = torch, protocol, vjp_of, parameter_vjp_of
        self.rng_state = rng_state
        self.sock = sock
        self.namespace = namespace
        self.request_timeout = float(config["request_timeout"])
        self.recorder = recorder
        self.objects: dict[int, Any] = {}
        self.dtypes = {getattr(torch, name): name for name in protocol.DTYPES}

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

    def object_by_key(self, key: int) -> Any:
        if key not in self.objects:
            raise LookupError("unknown object")
        return self.objects[key]

    def keep(self, obj: Any) -> int:
        """The key the grader will name `obj` by in later requests."""
        key = len(self.objects) + 1
        self.objects[key] = obj
        return key

    def input_state(self, value: Any) -> Any:
        """[tensor, requires_grad, whether .grad is set] for a tensor argument after a call, else None."""
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            return None
        with torch._C.DisableTorchFunctionSubclass():
            return [value, bool(value.requires_grad), value.grad is not None]

    def leaving_inputs(self, fn: Any, args: list, kwargs: dict) -> list:
        """[fn's value, the state of each positional argument, of each keyword argument] after the call."""
        value = fn(*args, **kwargs)
        return [value, [self.input_state(v) for v in args], {k: self.input_state(v) for k, v in kwargs.items()}]

    def handle(self, request: dict[str, Any], args: list, kwargs: dict, cotangents: list) -> Any:
        op = request.get("op")
        torch = self.torch
        if op == "call":
            return self.lookup(request.get("name"))(*args, **kwargs)
        if op == "vjp":
            return self.vjp_of(self.lookup(request.get("name")), args, kwargs, cotangents)
        if op == "call_inputs":  # the call, and what it left of each tensor it was given
            return self.leaving_inputs(self.lookup(request.get("name")), args, kwargs)
        if op == "rng":
            return self.rng_state(*args[:1])
        if op == "new":
            return self.keep(self.lookup(request.get("name"))(*args, **kwargs))
        obj = self.object_by_key(request.get("obj"))
        if op == "child":  # a submodule, by its attribute name: a handle of its own, like new's
            name = request.get("name")
            if type(name) is not str:
                raise LookupError("a submodule is named by a string")
            return self.keep(obj.get_submodule(name))  # one module under two names is found under both
        if op == "forward":
            return obj(*args, **kwargs)
        if op == "forward_inputs":  # forward, and what it left of each tensor it was given
            return self.leaving_inputs(obj, args, kwargs)
        if op == "forward_vjp":
            return self.vjp_of(obj, args, kwargs, cotangents)
        if op == "forward_parameter_vjp":
            return self.parameter_vjp_of(obj, args, kwargs, cotangents)
        if op == "state_dict":
            return dict(obj.state_dict())
        if op == "named_parameters":
            return dict(obj.named_parameters())
        if op == "load_state_dict":
            obj.load_state_dict(kwargs["state"], strict=bool(kwargs.get("strict", True)))
            return None
        if op == "load_and_list":
            obj.load_state_dict(kwargs["state"], strict=False)
            return dict(obj.named_parameters())
        if op == "to":
            obj.to(getattr(torch, kwargs["dtype"]) if kwargs.get("dtype") in self.protocol.DTYPES else None)
            return None
        if op == "info":
            children = {name: type(child).__name__ for name, child in obj.named_children()}
            plain = {k: v for k, v in vars(obj).items() if type(v) in (bool, int, float, str)}
            training = {name: bool(module.training) for name, module in obj.named_modules()}
            requires_grad = {name: bool(p.requires_grad) for name, p in obj.named_parameters()}
            return {"type": type(obj).__name__, "children": children, "attributes": plain, "training": training,
                    "requires_grad": requires_grad}
        raise LookupError(f"unknown request {op!r}")

    def serve(self) -> None:
        protocol = self.protocol
        while True:
            try:
                request, payload = protocol.recv_from_grader(self.sock)
            except EOFError:
                return
            decoder = protocol.Decoder(payload, self.make_tensor, self.object_by_key)
            reply: dict[str, Any] = {"id": request.get("id")}
            encoder = protocol.Encoder(self.tensor_bytes)
            _set_handler(signal.SIGALRM, _alarm)  # again each time: the student's code may have replaced it
            signal.setitimer(signal.ITIMER_REAL, self.request_timeout)
            try:
                args = decoder.decode(request.get("args", {"k": "list", "v": []}))
                kwargs = decoder.decode(request.get("kwargs", {"k": "dict", "v": {}}))
                cotangents = decoder.decode(request.get("cotangents", {"k": "list", "v": []}))
                self.recorder.take()  # what was seen outside a request (while the cells ran) belongs to none
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


def _receive_cells(sock: socket.socket) -> list[str]:
    """The first message: the cells, from the trusted side (nothing student-written has run yet)."""
    from autograder import protocol

    _, payload = protocol.recv_from_grader(sock)
    return json.loads(payload)


# the devices torch.manual_seed seeds besides the CPU by queueing a call for when the device starts, each
# with the caller's formatted stack (a quarter of a millisecond; the notebooks seed dozens of times)
LAZILY_SEEDED_DEVICES = ("cuda", "xpu", "mtia")


def _nothing_to_seed(seed: int) -> None:
    int(seed)  # refuses what the original refuses; there is no device to seed


def skip_seeding_unbuilt_devices() -> None:
    """In the zygote: a device this torch was built without can never start, so the seed queued for it is
    never used; its manual_seed_all does nothing instead, in every child."""
    import torch

    for name in LAZILY_SEEDED_DEVICES:
        built = getattr(getattr(torch, name, None), "_is_compiled", None)  # torch's own answer, if it has one
        if built is not None and not built():
            getattr(torch, name).manual_seed_all = _nothing_to_seed


def prepare(hidden: tuple[str, ...], imports: tuple[str, ...]) -> None:
    """Runs once, in the zygote: torch and every module a child needs, imported before any child exists.  The
    first use of autograd imports parts of torch lazily: done here too, so that no request's timer ever
    interrupts an import half-way.  `hidden` and `imports` are the grader's (autograder.child.view)."""
    import torch
    from autograder import protocol  # noqa: F401 - imported for the children
    from autograder.child import box, forbidden, isolation, notebook, vjp  # noqa: F401
    from autograder.child.op_recorder import OpRecorder

    torch.set_num_threads(1)
    from autograder import PACKAGE_DIR
    from autograder.child import view

    try:  # the allow-list of what a child may read, the same for every child: worked out once
        view.readable_paths(str(PACKAGE_DIR), hidden, imports)
    except view.HiddenInView:
        pass  # each child's isolation refuses it, and says why
    with OpRecorder(frozenset()):
        leaf = torch.ones(2, requires_grad=True)
        torch.softmax(leaf * 2, dim=-1).sum().backward()
    from autograder.child import provenance

    provenance.neutralise_private(forbidden.refuse_route)  # for every child: none of them may run these
    skip_seeding_unbuilt_devices()
    # everything imported so far lives as long as the process: out of the garbage collector's sight, no
    # child's collection walks it, which would cost time and copy every page it touches (fork shares them)
    gc.freeze()


def start_forked(config: dict[str, Any], fds: list[int]) -> None:
    """Runs in a child just forked from the zygote: make it a process of its own (session, output, no
    descriptor but its socket, resource limits, working directory), then run the submission."""
    from autograder.child.zygote import parent_death_signal

    sock_fd, output_fd = fds
    os.setsid()
    parent_death_signal()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    # the zygote's control socket and whatever else it holds: nothing of it stays open here
    os.closerange(3, sock_fd)
    os.closerange(sock_fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    for name, value in config["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError):
            pass  # checked, and reported as a notice, by the box (autograder.child.box.check_rlimits)
    os.chdir(config["workdir"])
    os.environ["HOME"] = config["workdir"]
    run(config, socket.socket(fileno=sock_fd))


def run(config: dict[str, Any], sock: socket.socket) -> None:
    from autograder import protocol
    from autograder.child.box import enter_box

    cells = _receive_cells(sock)
    box = enter_box(config)  # every step up to the student's first line, in order (autograder.child.box)
    notices = box.notices + ([box.refusal] if box.refusal else [])
    protocol.send(sock, {"isolated": box.refusal is None, "refusal": box.refusal, "notices": notices,
                         "steps": box.ran})
    if box.refusal is not None:
        sys.exit(3)
    if config.get("mode") == NOTEBOOK_MODE:  # an ordinary nbgrader notebook: its own test cells decide
        from autograder.child.notebook import run_notebook

        run_notebook(sock, cells, float(config["cell_timeout"]))
        return
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    server = Server(sock, namespace, config, box.recorder)
    errors = run_cells(cells, namespace, float(config["cell_timeout"]), float(config["load_seconds"]),
                       config["skip_cells"], lambda number: protocol.send(sock, {"cell": number}))
    names = sorted(k for k in list(namespace) if type(k) is str and not k.startswith("_"))[:MAX_NAMES]
    protocol.send(sock, {"ready": True, "errors": errors, "names": names})
    server.serve()


MAX_NAMES = 1000
