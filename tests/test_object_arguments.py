"""A suite may pass a module it created (C.new) to a student's function, e.g. `generate(model, prompt, n)`:
the student's code receives its own object, in the sandbox and in process alike, and nothing else can be
smuggled in that way."""
from __future__ import annotations

import types

import pytest
import torch

from autograder import protocol
from autograder.model.limits import Limits
from autograder.host.remote import RemoteModule, RemoteSubmission, _subject, left_inputs
from autograder.judging import checks as C
from autograder.judging.checks.calls import Module
from autograder.model.submission import ModuleSubmission, StudentError, SubmissionBroken

CODE = '''
import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.factor


def apply_twice(module, x):
    return module(module(x))


def total(modules, x):
    return sum(m(x) for m in modules["all"])


def calls(module):
    return module.calls


def die():
    import os
    os._exit(3)


def meddle(module, x, scale=None):
    """Changes everything a caller could notice: its module's mode and flags, its tensors in place."""
    module.eval()
    module.lin.weight.requires_grad_(False)
    x.mul_(2)
    if scale is not None:
        scale.requires_grad_()
    return 1.0


def polite(module, x, scale=None):
    y = x.detach().requires_grad_()
    (module(y) * module.lin(y)).sum().backward()  # fills the parameters' .grad: allowed
    return 1.0


class Centring(nn.Module):
    """A forward that changes what it is given: its input in place, the mask in place, a flag."""
    def forward(self, x, padding=None, how="values"):
        if how == "values":
            x -= x.mean(-1, keepdim=True)
        elif how == "requires_grad":
            x.requires_grad_()
        if padding is not None:
            padding.logical_not_()
        return x.detach() * 1.0


class Careful(nn.Module):
    def forward(self, x, padding=None, how="values"):
        return x - x.mean(-1, keepdim=True)


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        return self.lin(x)
'''


def module_submission() -> ModuleSubmission:
    module = types.ModuleType("reference")
    exec(compile(CODE, "reference", "exec"), vars(module))
    return ModuleSubmission(module)


@pytest.fixture(scope="module")
def remote():
    submission = RemoteSubmission([CODE], Limits(), [])
    yield submission
    submission.close()


def behaviour(student) -> list:
    x = torch.arange(3.0)
    double, triple = C.new(student, "Scale", 2.0), C.new(student, "Scale", 3.0)
    return [C.call(student, "apply_twice", double, x).tolist(),
            C.call(student, "total", {"all": [double, triple]}, x).tolist(),
            C.call(student, "calls", double),  # the very object: its state is what the earlier calls left
            double(x).tolist()]


def test_the_student_function_gets_its_own_object_in_process_and_in_the_sandbox(remote):
    expected = [[0.0, 4.0, 8.0], [0.0, 5.0, 10.0], 3, [0.0, 2.0, 4.0]]
    assert behaviour(module_submission()) == expected
    assert behaviour(remote) == expected


def test_an_unknown_object_key_is_the_student_side_lookup_error(remote):
    forged = RemoteModule(remote, remote.generation * 1_000_000 + 999)
    with pytest.raises(pytest.fail.Exception, match="LookupError: unknown object"):
        C.call(remote, "calls", Module(forged, "forged"))


def test_another_submissions_module_is_refused_before_anything_is_sent(remote):
    other = RemoteSubmission([CODE], Limits(), [])
    try:
        theirs = C.new(other, "Scale", 2.0)
        with pytest.raises(SubmissionBroken, match="another submission"):
            remote.call("calls", theirs.handle)
    finally:
        other.close()


def test_a_module_lost_with_its_process_is_refused():
    submission = RemoteSubmission([CODE], Limits(), [])
    try:
        old = C.new(submission, "Scale", 2.0)
        with pytest.raises((SubmissionBroken, pytest.fail.Exception)):
            C.call(submission, "die")
        with pytest.raises(SubmissionBroken, match="lost when the submission's process was restarted"):
            submission.call("calls", old.handle)
    finally:
        submission.close()


def test_replies_never_carry_object_references():
    # the grader's decoder has no resolver: an object node from the child is malformed, not a lookup
    with pytest.raises(protocol.ProtocolError, match="unknown value kind"):
        protocol.Decoder(b"", lambda array, dtype: array).decode({"k": "object", "id": 1})
    resolved = protocol.Decoder(b"", lambda array, dtype: array, {7: "seven"}.__getitem__)
    assert resolved.decode({"k": "list", "v": [{"k": "object", "id": 7}]}) == ["seven"]
    with pytest.raises(protocol.ProtocolError, match="malformed object reference"):
        resolved.decode({"k": "object", "id": "7"})


@pytest.mark.parametrize("where", ["in process", "sandboxed"])
def test_a_function_that_changes_what_it_was_given_is_caught_and_one_that_does_not_passes(remote, where):
    """module_state / expect_unchanged see a module's training mode and requires_grad flags (ModuleInfo, through
    the info request), call_leaving_inputs what a call left of its tensor arguments (the call_inputs request);
    a backward pass filling the parameters' .grad is allowed."""
    student = module_submission() if where == "in process" else remote
    x, scale = torch.arange(3.0), torch.ones(3)
    for function, changed in (("polite", False), ("meddle", True)):
        module = C.new(student, "Gated")
        before = C.module_state(module)
        assert before.training == {"": True, "lin": True} and before.requires_grad == {"lin.weight": True,
                                                                                     "lin.bias": True}
        if changed:
            with pytest.raises(pytest.fail.Exception, match="changed its argument 2.*its values changed"):
                C.call_leaving_inputs(student, function, module, x, scale=scale)
            with pytest.raises(pytest.fail.Exception, match="requires_grad of 'lin.weight' went from True to False"):
                C.expect_unchanged(module, before, what="the module", where=f"{function}(module)")
            _, _, left = student.call_inputs(function, C.new(student, "Gated").handle, x, scale=scale)
            assert left["scale"].requires_grad and not left["scale"].has_grad
        else:
            assert C.call_leaving_inputs(student, function, module, x, scale=scale) == 1.0
            C.expect_unchanged(module, before, what="the module", where=f"{function}(module)")
        assert torch.equal(x, torch.arange(3.0))  # the judge's own tensors are never the function's


@pytest.mark.parametrize("where", ["in process", "sandboxed"])
def test_a_forward_that_changes_its_input_is_caught_naming_it_and_one_that_does_not_passes(remote, where):
    """forward_leaving_inputs (the forward_inputs request) reports what a module's forward left of each tensor
    it was given, positional or keyword, and returns the forward's value."""
    student = module_submission() if where == "in process" else remote
    x, padding = torch.arange(6.0).view(2, 3), torch.tensor([True, False, False])
    centred = x - x.mean(-1, keepdim=True)
    assert torch.equal(C.forward_leaving_inputs(C.new(student, "Careful"), x, names=("x",), padding=padding),
                       centred)
    changing = C.new(student, "Centring")
    with pytest.raises(pytest.fail.Exception, match=r"^Your forward changed its input x in place \(-=.*Centring"):
        C.forward_leaving_inputs(changing, x, names=("x",))
    with pytest.raises(pytest.fail.Exception, match=r"changed its input argument 1 \(its requires_grad went"):
        C.forward_leaving_inputs(changing, x, how="requires_grad")
    with pytest.raises(pytest.fail.Exception, match=r"changed its input padding in place"):
        C.forward_leaving_inputs(changing, x, names=("x",), padding=padding, how="neither")
    value, left, left_kwargs = changing.handle.forward_inputs(x, padding=padding, how="neither")
    assert torch.equal(value, x) and torch.equal(left[0].value, x) and left_kwargs["how"] is None
    assert torch.equal(left_kwargs["padding"].value, ~padding)
    assert torch.equal(x, torch.arange(6.0).view(2, 3)) and padding.tolist() == [True, False, False]


STATE = [torch.zeros(2), False, False]


@pytest.mark.parametrize("reply", [
    None, [1.0, [STATE], {}, "extra"], [1.0, (STATE,), {}], [1.0, [], {}], [1.0, [STATE, None], {}],
    [1.0, [STATE], {"padding": STATE}],  # a keyword that was not sent
    [1.0, [None], {}],  # None where a tensor was sent: every check on it would pass unseen
    [1.0, [STATE], {"how": STATE}],  # a state where a plain value was sent
    [1.0, [[torch.zeros(2), 1, False]], {}], [1.0, [[torch.zeros(2), False]], {}],
    [1.0, [["tensor", False, False]], {}], [1.0, [{"value": torch.zeros(2)}], {}],
])
def test_what_the_child_says_its_call_left_is_refused_unless_it_has_the_shape_of_what_was_sent(reply):
    """call_inputs and forward_inputs replies are the child's word: one entry per argument sent, a
    [tensor, bool, bool] exactly where a tensor was sent and None exactly where none was."""
    with pytest.raises(StudentError, match="what the call left of its arguments could not be read"):
        left_inputs(reply, [torch.zeros(2)], {"how": "values"})
    value, left, left_kwargs = left_inputs([1.0, [STATE], {"how": None}], [torch.zeros(2)], {"how": "values"})
    assert value == 1.0 and left[0].value is STATE[0] and left_kwargs == {"how": None}


HIDING = '''
import sys
import torch
import torch.nn as nn

# the student's code runs in the process that answers: it can make the answer say anything, so the host
# takes only answers of the shape of what it sent
sys.modules["autograder.child.serve"].Server.input_state = lambda self, value: None


def shift(x):
    x -= 1
    return 1.0


class Shift(nn.Module):
    def forward(self, x):
        x -= 1
        return x
'''


def test_a_child_that_hides_what_its_call_left_fails_the_check_instead_of_passing_it():
    hiding = RemoteSubmission([HIDING], Limits(), [])
    try:
        x = torch.zeros(2)
        with pytest.raises(pytest.fail.Exception, match="TypeError: what the call left of its arguments could not"):
            C.call_leaving_inputs(hiding, "shift", x)
        with pytest.raises(pytest.fail.Exception, match="TypeError: what the call left of its arguments could not"):
            C.forward_leaving_inputs(C.new(hiding, "Shift"), x, names=("x",))
    finally:
        hiding.close()


def test_a_forward_that_reports_its_inputs_is_the_same_subject_as_forward():
    """A forward_inputs request that hangs or crashes poisons the class's forward, as forward_vjp does: the
    next forward of that class is not sent at all."""
    assert _subject("forward_inputs", None, "Shift") == _subject("forward", None, "Shift") == "Shift.forward"


SUBMODULES = '''
import sys
import torch.nn as nn


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(2, 2)
        self.second = self.first  # one module under two names


def lie_about_keys(key):
    """What a hostile child can do: answer new and child with a key of its own choosing."""
    sys.modules["autograder.child.serve"].Server.keep = lambda self, obj: key
'''


@pytest.fixture(scope="module")
def submodules():
    submission = RemoteSubmission([SUBMODULES], Limits(), [])
    yield submission
    submission.close()


def _in_process(code: str) -> ModuleSubmission:
    module = types.ModuleType("reference")
    exec(compile(code, "reference", "exec"), vars(module))
    return ModuleSubmission(module)


@pytest.mark.parametrize("where", ["in process", "sandboxed"])
def test_a_submodule_is_the_very_object_its_module_holds(submodules, where):
    """child(name) hands back the submodule the module holds, under each of its names: what is loaded into the
    module is what the submodule holds, and the other way round; an unknown name is the student side's error."""
    student = _in_process(SUBMODULES) if where == "in process" else submodules
    pair = C.new(student, "Pair")
    first, second = pair.child("first"), pair.child("second")
    assert first.label == "Pair().first"
    first.load_state_dict({"weight": torch.eye(2), "bias": torch.ones(2)})
    assert torch.equal(pair.named_parameters()["first.weight"], torch.eye(2))
    assert torch.equal(second.named_parameters()["bias"], torch.ones(2))
    assert second(torch.zeros(1, 2)).tolist() == [[1.0, 1.0]]
    with pytest.raises(pytest.fail.Exception, match="While taking the submodule 'third' of Pair\\(\\), your code raised"):
        pair.child("third")


def test_an_object_key_the_child_makes_up_is_malformed_and_replaces_the_child(submodules):
    """A key outside the child's key space (it would name an object of another generation of the process) or
    not an int is refused on the host, for new and child alike, and the lying child is replaced."""
    for key in (10 ** 9, 0, "1"):
        pair = C.new(submodules, "Pair")
        generation = submodules.generation
        C.call(submodules, "lie_about_keys", key)
        with pytest.raises(SubmissionBroken, match="not an object key"):
            pair.child("first")
        assert submodules.sandbox is None  # replaced before the next request
        with pytest.raises(SubmissionBroken, match="lost when the submission's process was restarted"):
            pair.child("first")
        assert C.new(submodules, "Pair").child("second").label == "Pair().second"  # a fresh child, honest again
        assert submodules.generation == generation + 1
