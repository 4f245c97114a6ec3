"""Requests to the submission, and how they are described (sizes, dtypes and settings only).

The wrappers (`call`, `vjp`, `new` and the `Module` wrapper) turn a `StudentError` into a readable failure
("while calling layer_norm(float32[2, 5, 6], ...), your code raised ValueError: ...").  `SubmissionBroken` is
deliberately left alone: the judge handles it.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from autograder.judging.checks.failing import fail
from autograder.judging.checks.kinds import dtype_name
from autograder.judging.checks.own_parts import fill_parameters
from autograder.judging.checks.structure import expect_parameters
from autograder.model.submission import ModuleHandle, StudentError, Submission

_MAX_ERROR_TEXT = 800


def describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{dtype_name(value.dtype)}[{', '.join(str(s) for s in value.shape)}]"
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, Module):
        return f"your {value.label}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    if isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        return "{" + ", ".join(f"{k}: {describe_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def describe_inputs(inputs: str | Mapping[str, Any]) -> str:
    if isinstance(inputs, str):
        return inputs
    return ", ".join(f"{k}={v if isinstance(v, str) else describe_value(v)}" for k, v in inputs.items())


def describe_call(name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> str:
    parts = [describe_value(a) for a in args] + [f"{k}={describe_value(v)}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


def student_error_message(err: StudentError, doing: str) -> str:
    if err.type_name == "NameError" and "is not defined" in err.message and doing.startswith("calling"):
        return f"While {doing}: {err.message}. Does your submission define it at the top level of the file?"
    text = err.message if len(err.message) <= _MAX_ERROR_TEXT else err.message[:_MAX_ERROR_TEXT] + " ..."
    if err.type_name == "ForbiddenOperation":  # the sandbox's refusal (autograder.child.forbidden): nothing ran
        return (f"While {doing}, your code reached an operation the grader does not run (ForbiddenOperation), so "
                f"this cannot be judged until the code that calls it is fixed (the part that asks you to build it "
                f"says so too): {text}")
    return f"While {doing}, your code raised {err.type_name}" + (f": {text}" if text else "")


@contextlib.contextmanager
def student_code(doing: str) -> Iterator[None]:
    """Run requests to the submission; a StudentError becomes a student-facing failure."""
    try:
        yield
    except StudentError as err:
        fail(student_error_message(err, doing))


def _handles(value: Any) -> Any:
    """Arguments as the submission takes them: a Module (from `new`) is passed as its handle."""
    if isinstance(value, Module):
        return value.handle
    if type(value) in (list, tuple):
        return type(value)(_handles(v) for v in value)
    if type(value) is dict:
        return {k: _handles(v) for k, v in value.items()}
    return value


def call(student: Submission, function: str, *args: Any, **kwargs: Any) -> Any:
    """Call the student's `function`; tensors, plain values and Modules from `new` may be passed."""
    with student_code(f"calling {describe_call(function, args, kwargs)}"):
        return student.call(function, *_handles(args), **_handles(kwargs))


def vjp(student: Submission, function: str, args: Sequence[Any], kwargs: Mapping[str, Any],
        cotangents: Sequence[torch.Tensor]) -> tuple[Any, list[list[torch.Tensor | None]]]:
    with student_code(f"back-propagating through {describe_call(function, args, kwargs)}"):
        return student.vjp(function, list(_handles(args)), _handles(dict(kwargs)), list(cotangents))


def rng(student: Submission, state: int | torch.Tensor | None = None) -> torch.Tensor:
    """torch's global RNG state in the submission's process, then set to `state` (an int: torch.manual_seed)."""
    doing = f"seeding torch with torch.manual_seed({state})" if type(state) is int else "setting torch's RNG state"
    with student_code(doing):
        return student.rng(state)


def new(student: Submission, class_name: str, *args: Any, **kwargs: Any) -> "Module":
    label = describe_call(class_name, args, kwargs)
    with student_code(f"creating {label}"):
        handle = student.new(class_name, *_handles(args), **_handles(kwargs))
    return Module(handle, label)


class Module:
    """A student module handle whose every request turns a StudentError into a readable failure."""

    def __init__(self, handle: ModuleHandle, label: str) -> None:
        self.handle = handle
        self.label = label

    def __repr__(self) -> str:  # a failure's message names it (in a list of blocks, say), never by address
        return f"your {self.label}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with student_code(f"running {self.label} forward on {describe_call('', args, kwargs)[1:-1] or 'no input'}"):
            return self.handle(*_handles(args), **_handles(kwargs))

    def vjp(self, args: Sequence[Any], kwargs: Mapping[str, Any], cotangents: Sequence[torch.Tensor]
            ) -> tuple[Any, list[list[torch.Tensor | None]]]:
        with student_code(f"back-propagating through {self.label} on "
                          f"{describe_call('', args, kwargs)[1:-1]}"):
            return self.handle.vjp(list(_handles(args)), _handles(dict(kwargs)), list(cotangents))

    def parameter_vjp(self, args: Sequence[Any], kwargs: Mapping[str, Any], cotangents: Sequence[torch.Tensor]
                      ) -> tuple[Any, list[dict[str, torch.Tensor | None]]]:
        """The forward, and the gradients of (output * c).sum() with respect to the module's named parameters."""
        with student_code(f"back-propagating through {self.label} to its parameters on "
                          f"{describe_call('', args, kwargs)[1:-1]}"):
            return self.handle.parameter_vjp(list(_handles(args)), _handles(dict(kwargs)), list(cotangents))

    def state_dict(self) -> dict[str, torch.Tensor]:
        with student_code(f"calling state_dict() on {self.label}"):
            return self.handle.state_dict()

    def named_parameters(self) -> dict[str, torch.Tensor]:
        with student_code(f"listing the parameters of {self.label}"):
            return self.handle.named_parameters()

    def load_state_dict(self, state: Mapping[str, torch.Tensor], strict: bool = True) -> None:
        keys = ", ".join(sorted(state))
        with student_code(f"loading a state_dict with keys [{keys}] into {self.label} (strict={strict})"):
            self.handle.load_state_dict(dict(state), strict=strict)

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None:
        """Load the test's weights: exactly the parameters the contract names (random, or torch's).

        The contract fixes the parameters, not the rest of the module's state, so the load is not strict:
        extra buffers (a registered causal mask, persistent or not) and other non-parameter state belong to
        the student and keep their values.  What strictness would catch for parameters is checked here
        instead: named_parameters() must be exactly the loaded names, each holding its loaded values."""
        keys = ", ".join(sorted(state))
        with student_code(f"loading a state_dict with keys [{keys}] into {self.label} (strict=False) and listing "
                          "its parameters"):
            params = self.handle.load_and_list(dict(state))
        what = f"{self.label}: loading the test's weights"
        # values first: a parameter registered under two names (one module assigned to two attributes) is
        # listed once by named_parameters and ends up holding the values loaded into the other name
        for name, value in state.items():
            got = params.get(name) if isinstance(params, Mapping) else None
            if isinstance(got, torch.Tensor) and got.shape == value.shape and not torch.equal(got.to(value.dtype),
                                                                                             value):
                twin = next((other for other, v in state.items() if other != name and v.shape == value.shape
                             and torch.equal(got.to(v.dtype), v)), None)
                fail(f"{what}: parameter '{name}' does not hold the values loaded into it"
                     + (f"; it holds those loaded into '{twin}', so the two names share one module or parameter"
                        if twin else ""))
        expect_parameters(params, {k: v.shape for k, v in state.items()}, what=f"{what}: named_parameters()")

    def to(self, dtype: torch.dtype) -> None:
        with student_code(f"calling .to({dtype}) on {self.label}"):
            self.handle.to(dtype)

    def info(self):
        with student_code(f"inspecting {self.label}"):
            return self.handle.info()

    def child(self, name: str) -> "Module":
        """The submodule the module holds under attribute `name`, as a module wrapper of its own (the same
        object: what the parent loads or casts, it holds too)."""
        with student_code(f"taking the submodule '{name}' of {self.label}"):
            return Module(self.handle.child(name), f"{self.label}.{name}")

    def load_fitting(self, state: Mapping[str, torch.Tensor], *, seed: int) -> None:
        """Load, non-strictly, the test's weights under the module's own parameter names that match them and
        seeded random values under its others (own_parts.fill_parameters): for own-parts checks, which judge
        a module on whatever weights it holds, so misnamed or unregistered parameters do not stop them."""
        self.load_state_dict(fill_parameters(self.named_parameters(), state, seed=seed), strict=False)


def expect_raises(exc_type: type[BaseException], action: Callable[[], Any], *, what: str) -> StudentError:
    """`action` must make the student's code raise `exc_type` (or a subclass)."""
    try:
        action()
    except StudentError as err:
        if err.is_a(exc_type):
            return err
        text = f": {err.message[:_MAX_ERROR_TEXT]}" if err.message else ""
        message = (f"{what}: expected {exc_type.__name__} (or a subclass), but your code raised "
                   f"{err.type_name}{text}")
    else:
        message = f"{what}: expected {exc_type.__name__}, but nothing was raised"
    fail(message)
