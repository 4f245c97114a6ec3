"""Claims in the reference's docstrings that a hidden check must exercise, where they can be found by reading.

The docstrings of the solutions module (generated from the source notebook's solution cells) are the spec a
student reads beside the code they write.  Two kinds of sentence there promise behaviour that a function's
return values on ordinary inputs never show, so a suite that only compares outputs lets a submission break them
silently:

* a refused argument ("any other kind raises ValueError"): some check must call the function and expect that
  exception (`C.expect_raises(SomeError, ...)` in a test that names the function);
* an input left alone ("the blocks are left as they were", "forward leaves its input x unchanged"): some check
  must look at the input's state after the call, in a test that names the function or class: `C.expect_unchanged`
  for a function (the modules it is given), `C.forward_leaving_inputs` (what its forward is given) or
  `C.expect_unchanged` (itself) for a class.

A test names a function when a string literal of its source (or of a helper of its file that it calls) starts
with the function's name ("batch_dependence", "layer_grad_norms(blocks, x, target)"), the way suites ask for it
and describe the call.
`unexercised(name)` lists the claims no test covers; the kit's tests require it to be empty for every
assignment.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.rubric import load_rubric

ROOT = Path(__file__).resolve().parents[2]

REFUSAL = re.compile(r"\braises?\s+`?([A-Z]\w*Error)\b")
LEFT_ALONE = re.compile(r"\b(left as (it|they) w(as|ere)|leaves? [\w' ]{0,40}\balone|unchanged|"
                        r"must not (change|modify)|may not modify)\b", re.IGNORECASE)

# what looks at an input's state after a call: a function's claims are about the modules it is given (their
# values and flags), a class's about what its forward is given (its tensors) or about itself
LEFT_ALONE_MARKERS = {ast.FunctionDef: ("expect_unchanged(",),
                      ast.ClassDef: ("forward_leaving_inputs(", "expect_unchanged(")}


@dataclass(frozen=True)
class Claim:
    function: str   # the function or class whose docstring makes the claim
    kind: str       # "refuses" or "leaves alone"
    detail: str     # the exception's name, or the words of the claim
    markers: tuple[str, ...]  # what a test covering it calls (one of them)


def claims_in(source: str) -> list[Claim]:
    """The claims of every public function's and class's docstring (a class's methods count as the class)."""
    found: list[Claim] = []
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name.startswith("_"):
            continue
        docs = [ast.get_docstring(node) or ""]
        if isinstance(node, ast.ClassDef):
            docs += [ast.get_docstring(n) or "" for n in node.body if isinstance(n, ast.FunctionDef)]
        text = " ".join(" ".join(doc.split()) for doc in docs)
        found += [Claim(node.name, "refuses", m.group(1), (f"expect_raises({m.group(1)}",))
                  for m in REFUSAL.finditer(text)]
        found += [Claim(node.name, "leaves alone", m.group(0), LEFT_ALONE_MARKERS[type(node)])
                  for m in LEFT_ALONE.finditer(text)]
    return found


def test_sources(suite_sources: list[str]) -> list[str]:
    """The source of every module-level test function of the suites, followed by that of the module-level
    helpers of its file it calls by name (one level: a test that builds its module with `_build(student, ...)`
    names the class through the helper's `C.new(student, "Class", ...)`)."""
    tests = []
    for source in suite_sources:
        functions = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
        helpers = {node.name: ast.get_source_segment(source, node) or "" for node in functions
                   if not node.name.startswith("test_")}
        for node in functions:
            if node.name.startswith("test_"):
                called = {call.func.id for call in ast.walk(node)
                          if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)}
                tests.append("\n".join([ast.get_source_segment(source, node) or ""]
                                       + [helpers[name] for name in sorted(called & set(helpers))]))
    return tests


def covered(claim: Claim, tests: list[str]) -> bool:
    named = re.compile(rf"""["']{re.escape(claim.function)}["'(]""")
    return any(any(m in test for m in claim.markers) and named.search(test) for test in tests)


def unexercised_in(solution_source: str, suite_sources: list[str]) -> list[Claim]:
    tests = test_sources(suite_sources)
    return [claim for claim in claims_in(solution_source) if not covered(claim, tests)]


def unexercised(assignment: str) -> list[Claim]:
    """The docstring claims of `assignment`'s reference that no test of its hidden suites exercises."""
    folder = ROOT / "assignments" / assignment
    suites = [(folder / part.suite).read_text() for part in load_rubric(assignment).parts]
    return unexercised_in((ROOT / "solutions" / f"{assignment}.py").read_text(), suites)
