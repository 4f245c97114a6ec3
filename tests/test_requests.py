"""Round trips: loading a test's weights into a student's module is one request, and it checks and reports
what it did exactly as the two requests it replaces would; the two requests a trusted side runs a training step
with (the gradients of a module's parameters, torch's RNG state) answer as torch does in the process."""
from __future__ import annotations

import types

import pytest
import torch

from autograder.model.limits import Limits
from autograder.host.remote import RemoteSubmission
from autograder.judging import checks as C
from autograder.model.submission import ModuleSubmission

CODE = '''
import torch
import torch.nn as nn


class Affine(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return self.lin(x)


class Noisy(Affine):
    def forward(self, x):
        return self.lin(x) + 0 * torch.rand(())  # draws from the global RNG, as a recipe's loop would see


class Secretive(Affine):
    def named_parameters(self, *args, **kwargs):
        raise RuntimeError("not telling")
'''
STATE = {"lin.weight": torch.eye(3) * 2, "lin.bias": torch.ones(3)}


class Counting(RemoteSubmission):
    def __init__(self, *args) -> None:
        self.ops: list[str] = []
        super().__init__(*args)

    def request(self, op, **fields):
        self.ops.append(op)
        return super().request(op, **fields)


@pytest.fixture(scope="module")
def remote():
    submission = Counting([CODE], Limits(), [])
    yield submission
    submission.close()


def in_process() -> ModuleSubmission:
    module = types.ModuleType("student")
    exec(compile(CODE, "student", "exec"), vars(module))
    return ModuleSubmission(module)


@pytest.mark.parametrize("where", ["sandbox", "in process"])
def test_loading_weights_is_one_request_and_the_module_holds_them(remote, where):
    student = remote if where == "sandbox" else in_process()
    module = C.new(student, "Affine", 3)
    if where == "sandbox":
        remote.ops.clear()
    module.load_weights(STATE)
    if where == "sandbox":
        assert remote.ops == ["load_and_list"]
    assert torch.equal(module(torch.ones(1, 3)), torch.full((1, 3), 3.0))


def test_a_failure_while_listing_says_what_was_being_done(remote):
    module = C.new(remote, "Secretive", 3)
    with pytest.raises(pytest.fail.Exception) as failure:
        module.load_weights(STATE)
    message = str(failure.value)
    assert "loading a state_dict with keys [lin.bias, lin.weight] into Secretive(3) (strict=False) and listing " \
           "its parameters" in message and "RuntimeError: not telling" in message, message


def test_the_listed_parameters_are_checked_against_what_was_loaded(remote):
    module = C.new(remote, "Affine", 3)
    remote.ops.clear()
    with pytest.raises(pytest.fail.Exception) as failure:
        module.load_weights({"lin.weight": torch.eye(3)})  # strict=False: loads, then the lists must match
    assert "named_parameters()" in str(failure.value) and remote.ops == ["load_and_list"]


@pytest.mark.parametrize("where", ["sandbox", "in process"])
def test_the_parameters_gradients_are_those_backward_leaves_and_the_rng_is_seeded_and_restored(remote, where):
    student = remote if where == "sandbox" else in_process()
    C.rng(student, 7)
    module = C.new(student, "Noisy", 3)
    x, cotangent = torch.randn(2, 3), torch.randn(2, 3)
    before = C.rng(student)
    out, (grads,) = module.parameter_vjp([x], {}, [cotangent])
    after = C.rng(student, before)  # the forward's draw given back
    assert not torch.equal(after, before) and torch.equal(C.rng(student), before)
    weights = module.named_parameters()
    assert set(grads) == {"lin.weight", "lin.bias"}
    assert torch.allclose(grads["lin.weight"], cotangent.T @ x) and torch.allclose(grads["lin.bias"], cotangent.sum(0))
    assert torch.allclose(out, x @ weights["lin.weight"].T + weights["lin.bias"])
    # seeding gives the same weights again: a module built after C.rng(student, 7) starts where its twin did
    C.rng(student, 7)
    again = C.new(student, "Noisy", 3).named_parameters()
    assert all(torch.equal(v, again[k]) for k, v in weights.items())
