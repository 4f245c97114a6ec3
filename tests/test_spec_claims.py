"""Every docstring claim of a reference that a hidden check must exercise is exercised (refused arguments,
inputs left alone: autograder/authoring/spec_claims.py), and the finder does find an unexercised claim."""
from __future__ import annotations

import pytest

from autograder.authoring import spec_claims
from autograder.grading.rubric import load_rubric

ASSIGNMENTS = ("transformer_block", "gpt_decoder", "norms_and_gates")

SOLUTION = '''
def pick(kind):
    """kind is "a" or "b"; any other kind raises ValueError."""

def measure(blocks):
    """The norm of each block; the blocks are left as they were."""

class Layer:
    def forward(self, x):
        """x is unchanged."""

def _private(x):
    """raises KeyError"""
'''


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_docstring_claim_is_exercised(assignment):
    load_rubric(assignment)  # an assignment that cannot be read fails here, not as "no claims"
    assert spec_claims.unexercised(assignment) == []


def test_claims_are_found_in_functions_and_methods_not_private_ones():
    found = {(c.function, c.kind, c.detail) for c in spec_claims.claims_in(SOLUTION)}
    assert found == {("pick", "refuses", "ValueError"), ("measure", "leaves alone", "left as they were"),
                     ("Layer", "leaves alone", "unchanged")}


def test_a_claim_is_covered_only_by_a_test_naming_the_function_with_the_marker():
    refusing = '''
def test_pick_refuses(student):
    C.expect_raises(ValueError, lambda: student.call("pick", "c"), what="pick('c')")
'''
    elsewhere = '''
def test_other_refuses(student):
    C.expect_raises(ValueError, lambda: student.call("other", "c"), what="other('c')")

def test_measure_runs(student):
    C.call(student, "measure(blocks)", [])

def helper_not_a_test(student):
    C.expect_unchanged(block, before, what="x", where="measure(blocks)")
'''
    left = spec_claims.unexercised_in(SOLUTION, [refusing, elsewhere])
    assert {(c.function, c.kind) for c in left} == {("measure", "leaves alone"), ("Layer", "leaves alone")}
    assert {(c.function, c.kind) for c in spec_claims.unexercised_in(SOLUTION, [elsewhere])} == {
        ("pick", "refuses"), ("measure", "leaves alone"), ("Layer", "leaves alone")}


def test_a_class_claim_is_covered_by_a_check_of_its_forward_and_a_function_claim_is_not():
    """A class's "x is unchanged" is exercised by C.forward_leaving_inputs on the class; a function's claim about
    the modules it is given is not exercised by a check of its tensors (call_leaving_inputs) alone."""
    tensors_only = '''
def test_layer_forward_leaves_x(student):
    C.forward_leaving_inputs(C.new(student, "Layer"), x, names=("x",))

def test_measure_leaves_its_tensors(student):
    C.call_leaving_inputs(student, "measure", [], x)
'''
    left = spec_claims.unexercised_in(SOLUTION, [tensors_only])
    assert {(c.function, c.kind) for c in left} == {("pick", "refuses"), ("measure", "leaves alone")}


def test_a_test_names_a_class_through_a_helper_of_its_file_that_it_calls():
    """`_build(student, ...)` names the class for the tests that call it, and for no other test."""
    suite = '''
def _build(student):
    return C.new(student, "Layer")

def test_layer_forward_leaves_x(student):
    C.forward_leaving_inputs(_build(student), x, names=("x",))
'''
    uncalled = suite.replace("_build(student), x", "module, x")
    assert ("Layer", "leaves alone") not in {(c.function, c.kind) for c in spec_claims.unexercised_in(SOLUTION, [suite])}
    assert ("Layer", "leaves alone") in {(c.function, c.kind) for c in spec_claims.unexercised_in(SOLUTION, [uncalled])}
