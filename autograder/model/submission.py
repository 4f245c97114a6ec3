"""What a hidden suite may ask of a submission, and nothing more.

Suites never touch student objects: they name a function or class, send tensors and plain values, and get
tensors and plain values back.  Two implementations exist: `RemoteSubmission` (autograder.host.remote), which
talks to the sandboxed child process that ran the student's code, and `ModuleSubmission` below, which wraps
a trusted module (the reference solution) in the same interface so the suites can be checked against it
without a sandbox.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Sequence

import torch

from autograder.child.vjp import parameter_vjp_of, rng_state, vjp_of
from autograder.protocol import exception_bases


class StudentError(Exception):
    """The student's code raised (or the request could not be answered); carried as data, never re-raised
    from a student object."""

    def __init__(self, type_name: str, message: str, bases: Sequence[str] = ()) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name = type_name
        self.message = message
        self.bases = tuple(bases)  # names of the builtin exception classes it derives from

    def is_a(self, exc_type: type[BaseException]) -> bool:
        return exc_type.__name__ in self.bases


class SubmissionBroken(Exception):
    """The submission process died, timed out or answered nonsense; the current test cannot be judged."""


class NotRun(SubmissionBroken):
    """A request the host did not send at all: an earlier one to the same function or class broke it.  Its
    `reason` says what the earlier one did; the message says it was not run."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"not run: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Opaque:
    """A returned value that is neither a tensor nor a plain Python value: only its type name crosses over."""

    type_name: str


@dataclass
class ModuleInfo:
    type_name: str
    children: dict[str, str] = field(default_factory=dict)  # direct submodule name -> type name
    attributes: dict[str, Any] = field(default_factory=dict)  # plain (int/float/bool/str) attributes
    # the state a function taking the module may not change besides values: every submodule's training flag
    # (by its name in named_modules, "" for the module itself) and every parameter's requires_grad
    training: dict[str, bool] = field(default_factory=dict)
    requires_grad: dict[str, bool] = field(default_factory=dict)


class ModuleHandle(abc.ABC):
    """An nn.Module instance living on the submission side."""

    def __repr__(self) -> str:  # shown in failure messages: the same text on every run, no address
        return "a module of the submission"

    @abc.abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def forward_inputs(self, *args: Any, **kwargs: Any
                       ) -> tuple[Any, list[TensorState | None], dict[str, TensorState | None]]:
        """forward, and the state of each argument afterwards (None where it is not a tensor), as
        `Submission.call_inputs` reports a function's."""
        raise SubmissionBroken("this submission cannot report what a forward left of its arguments")

    @abc.abstractmethod
    def vjp(self, args: Sequence[Any], kwargs: dict[str, Any], cotangents: Sequence[torch.Tensor]
            ) -> tuple[Any, list[list[torch.Tensor | None]]]:
        """Forward with every floating tensor argument requiring grad, then for each cotangent c the gradients
        of (output * c).sum() with respect to each tensor argument (None for non-float or unused ones)."""

    def parameter_vjp(self, args: Sequence[Any], kwargs: dict[str, Any], cotangents: Sequence[torch.Tensor]
                      ) -> tuple[Any, list[dict[str, torch.Tensor | None]]]:
        """Forward, then for each cotangent c the gradients of (output * c).sum() with respect to each named
        parameter that requires grad (None where unused): what a trusted side needs to run an optimizer's step
        on the module's own parameters, the loss computed by itself."""
        raise SubmissionBroken("this submission cannot report the gradients of a module's parameters")

    @abc.abstractmethod
    def state_dict(self) -> dict[str, torch.Tensor]: ...

    @abc.abstractmethod
    def named_parameters(self) -> dict[str, torch.Tensor]: ...

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, torch.Tensor], strict: bool = True) -> None: ...

    def load_and_list(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """load_state_dict(state, strict=False), then named_parameters(): what loading a test's weights takes,
        in one request where the submission's side can answer both at once."""
        self.load_state_dict(state, strict=False)
        return self.named_parameters()

    @abc.abstractmethod
    def to(self, dtype: torch.dtype) -> None: ...

    @abc.abstractmethod
    def info(self) -> ModuleInfo: ...

    @abc.abstractmethod
    def child(self, name: str) -> "ModuleHandle":
        """The submodule under attribute `name` (nn.Module.get_submodule: dotted names reach deeper), as a handle
        of its own: the same object the module holds, so what is loaded into one is seen by the other."""


@dataclass
class TensorState:
    """A tensor argument as the function left it: what the caller who passed it would see afterwards."""
    value: torch.Tensor
    requires_grad: bool
    has_grad: bool


def tensor_state(value: Any) -> TensorState | None:
    if not isinstance(value, torch.Tensor):
        return None
    return TensorState(value.detach().clone(), bool(value.requires_grad), value.grad is not None)


class Submission(abc.ABC):
    """A submission, seen through requests.  Arguments are tensors, plain values (None, bool, int, float, str,
    lists, tuples, dicts with string keys) and handles that this submission's `new` returned: the student's
    function or module receives its own object in their place."""

    def __init__(self) -> None:
        self.forbidden_seen: set[str] = set()  # torch implementations of graded ops reached since last reset

    @abc.abstractmethod
    def names(self) -> set[str]:
        """Top-level names the submission defines."""

    @abc.abstractmethod
    def call(self, function: str, *args: Any, **kwargs: Any) -> Any: ...

    @abc.abstractmethod
    def vjp(self, function: str, args: Sequence[Any], kwargs: dict[str, Any],
            cotangents: Sequence[torch.Tensor]) -> tuple[Any, list[list[torch.Tensor | None]]]: ...

    @abc.abstractmethod
    def new(self, class_name: str, *args: Any, **kwargs: Any) -> ModuleHandle: ...

    def call_inputs(self, function: str, *args: Any, **kwargs: Any
                    ) -> tuple[Any, list[TensorState | None], dict[str, TensorState | None]]:
        """`call`, and the state of each argument afterwards (None where it is not a tensor): whether the
        function changed a tensor it was given, in place, by requires_grad_ or by filling its .grad."""
        raise SubmissionBroken("this submission cannot report what a call left of its arguments")

    def rng(self, state: int | torch.Tensor | None = None) -> torch.Tensor:
        """torch's global RNG state in the submission's process, then set to `state`: an int seeds it as
        torch.manual_seed(state) does (a recipe's first line: a module built next starts from the weights, and a
        function drawing from the RNG draws the values, that the student's own code gets after the same call),
        a state returned earlier restores it (what a request the recipe does not make drew is given back), None
        leaves it."""
        raise SubmissionBroken("this submission cannot report its random number generator's state")

    def take_forbidden(self) -> set[str]:
        seen, self.forbidden_seen = self.forbidden_seen, set()
        return seen

    def begin_part(self, part: str, parts_left: int) -> None:
        """the judge is about to run the checks of `part`; `parts_left` counts it and every part after it"""

    def verdicts_final(self) -> None:
        """every check has its verdict: what is asked from now on only draws pictures, and can change none"""


# --- the trusted in-process implementation --------------------------------------------------------------

def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) in (list, tuple):
        return [_plain(v) for v in value]
    return Opaque(type(value).__name__)


def _modules(value: Any) -> Any:
    """Arguments as the reference's code receives them: a handle of one of its modules is that module."""
    if isinstance(value, _LocalModule):
        return value.module
    if type(value) in (list, tuple):
        return type(value)(_modules(v) for v in value)
    if type(value) is dict:
        return {k: _modules(v) for k, v in value.items()}
    return value


def _guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    args, kwargs = _modules(args), _modules(kwargs)
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # the reference raising is data for the suite, exactly like a student's raise
        raise StudentError(type(exc).__name__, str(exc), exception_bases(exc)) from None


def _leaving_inputs(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]
                    ) -> tuple[Any, list[TensorState | None], dict[str, TensorState | None]]:
    """fn on copies of the tensor arguments, as a sandboxed one gets them (the caller's tensors are never its
    own), and what it left of each."""
    args = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in args]
    kwargs = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    value = fn(*args, **kwargs)
    return value, [tensor_state(v) for v in args], {k: tensor_state(v) for k, v in kwargs.items()}


class _LocalModule(ModuleHandle):
    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _plain(_guarded(self.module, *args, **kwargs))

    def forward_inputs(self, *args, **kwargs):
        return _leaving_inputs(lambda *a, **k: _plain(_guarded(self.module, *a, **k)), args, kwargs)

    def vjp(self, args, kwargs, cotangents):
        return _guarded(vjp_of, self.module, args, kwargs, cotangents)

    def parameter_vjp(self, args, kwargs, cotangents):
        return _guarded(parameter_vjp_of, self.module, args, kwargs, cotangents)

    def state_dict(self):
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def named_parameters(self):
        return {k: v.detach().clone() for k, v in self.module.named_parameters()}

    def load_state_dict(self, state, strict=True):
        _guarded(self.module.load_state_dict, state, strict=strict)

    def to(self, dtype):
        _guarded(self.module.to, dtype)

    def child(self, name):
        return _LocalModule(_guarded(self.module.get_submodule, name))

    def info(self):
        plain = {k: v for k, v in vars(self.module).items() if type(v) in (bool, int, float, str)}
        return ModuleInfo(type(self.module).__name__,
                          {k: type(v).__name__ for k, v in self.module.named_children()}, plain,
                          {k: bool(m.training) for k, m in self.module.named_modules()},
                          {k: bool(p.requires_grad) for k, p in self.module.named_parameters()})


class ModuleSubmission(Submission):
    """A trusted Python module (the reference solution) behind the Submission interface."""

    def __init__(self, module: ModuleType) -> None:
        super().__init__()
        self.module = module

    def names(self):
        return {k for k in vars(self.module) if not k.startswith("_")}

    def _get(self, name: str) -> Any:
        if not hasattr(self.module, name):
            raise StudentError("NameError", f"name '{name}' is not defined", ["NameError", "Exception"])
        return getattr(self.module, name)

    def call(self, function, *args, **kwargs):
        return _plain(_guarded(self._get(function), *args, **kwargs))

    def call_inputs(self, function, *args, **kwargs):
        return _leaving_inputs(lambda *a, **k: _plain(_guarded(self._get(function), *a, **k)), args, kwargs)

    def vjp(self, function, args, kwargs, cotangents):
        return _guarded(vjp_of, self._get(function), args, kwargs, cotangents)

    def rng(self, state=None):
        return _guarded(rng_state, state)

    def new(self, class_name, *args, **kwargs):
        return _LocalModule(_guarded(self._get(class_name), *args, **kwargs))
