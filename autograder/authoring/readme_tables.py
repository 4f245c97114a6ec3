"""Tables in the documentation that are generated from the code, so that they cannot drift from it.

    python -m autograder.authoring.readme_tables check   # exit 1 if a generated table is stale
    python -m autograder.authoring.readme_tables write   # regenerate them

Each table sits in its document between `<!-- BEGIN GENERATED name -->` and `<!-- END GENERATED name -->`:
the limits in docs/instructors.md (from autograder/model/limits.py), the hidden suites' toolkit in
docs/authoring.md (every public name of autograder.judging.checks with its signature, and the methods of the
module wrapper `C.new` returns).  The one-line summaries of the toolkit are kept here, beside the code that
checks them: a public name without one, or a summary of a name that is no longer public, is an error, so a
new verb of the toolkit cannot go undocumented.
"""
from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any, Callable

from autograder import REPO_ROOT
from autograder.model.limits import knobs

INSTRUCTORS = REPO_ROOT / "docs" / "instructors.md"
AUTHORING = REPO_ROOT / "docs" / "authoring.md"


def _default(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def limits_table() -> str:
    rows = ["| limit (`c.SandboxedGrading.<limit>`) | flag | environment (nbgrader) | default | what it bounds |",
            "|---|---|---|---|---|"]
    rows += [f"| `{k.name}` | `{k.flag}` | `{k.variable}` | {_default(k.default)} | {k.help} |" for k in knobs()]
    return "\n".join(rows)


# what each public name of autograder.judging.checks is for, in one line (its signature comes from the code)
CHECKS_SUMMARIES: dict[str, str] = {
    # inputs
    "generator": "a `torch.Generator` seeded with `seed`: inputs independent of the global RNG, which the student's code may use",
    "randn": "normal samples drawn in float64 from a fixed seed, then rounded to `dtype`: the same values in every dtype",
    "random_bool_mask": "a random bool mask in which every row has a True and a False, so neither it nor its inverse masks a whole row",
    "tril_mask": "the trusted causal mask, `[S, S]`, True where a query may attend",
    "linear_state": "random `nn.Linear` weights (and bias) under `prefix`, weight ~ N(0, gain^2 / in_features)",
    "layer_norm_state": "random LayerNorm weight and bias (not ones and zeros), so swapped or shared norms show",
    "MHA_PROJECTIONS": "the contract's projection names `(\"Wq\", \"Wk\", \"Wv\", \"Wo\")`",
    "mha_state": "random Wq, Wk, Wv, Wo weights whose attention scores are of order 1 (scaling and masking bugs show)",
    "cast_floats": "a value with every floating tensor in it (nested lists, tuples, dicts) cast to `dtype`",
    # caching
    "once": "decorator: a reference that does not depend on the submission, computed once per grading process per argument values; callers get copies",
    # failing
    "fail": "fail the current check with a student-facing message only (no traceback), optionally with evidence for a picture and `hints` (a list of texts, each shown whole after the message; never write \"Hint:\" into the message)",
    "evidence_on_failure": "context manager: a failure inside it that carries no evidence gets `build()`'s, drawn once every verdict is final",
    # calls
    "call": "call the student's top-level function in the child; an error it raises becomes a readable failure",
    "new": "construct the student's class in the child; returns the module wrapper below",
    "vjp": "the output of the student's function and, per cotangent, the gradients of its inputs, back-propagated in the child",
    "rng": "torch's global RNG state in the child, then set to `state`: an int seeds it (`torch.manual_seed`), a state returned earlier restores it, None leaves it",
    "student_code": "context manager: an error the student's code raises inside becomes \"While <doing>, your code raised ...\"",
    "expect_raises": "`action()` must make the student's code raise `exc_type` (or a subclass); returns the error",
    "expect_unchanged": "the module still has the state `module_state` recorded before a call (values, buffers, "
                        "requires_grad, training modes; not .grad), else a failure naming the change",
    "call_leaving_inputs": "`call`, failing when the function changed a tensor it was given (values in place, "
                           "requires_grad, .grad)",
    "forward_leaving_inputs": "`module(*args, **kwargs)` in one request, failing when its forward changed a tensor "
                              "it was given (\"your forward changed its input x in place\"; `names` are the "
                              "positional arguments' names)",
    "module_state": "what a caller could notice of a module: its tensors by name, training and requires_grad flags",
    "describe_value": "a value in a message's words: `float32[2, 5, 6]`, `your MultiHeadAttention(8, 2)`, never tensor values",
    "describe_inputs": "the inputs of a check (a mapping, or a string kept as it is) in a message's words",
    "describe_call": "a call in a message's words: `layer_norm(float32[2, 5, 6], ...)`",
    # kinds
    "kind_of": "what a returned value is, in words (\"a Python float\", \"a torch.Tensor of dtype float32 and shape [2, 3]\")",
    # shapes
    "expect_tensor": "the value must be a tensor (of `shape` and `dtype` when given); returns it; a None asks \"Did you forget a `return`?\"",
    "expect_exact_type": "`type(value)` must be exactly `expected` (a Python float, not a tensor)",
    "expect_number": "a float or int, or a one-element tensor, as a float; anything else fails (\"expected a Python float\")",
    # structure
    "expect_parameters": "a module's `named_parameters()` must hold exactly these names and shapes (buffers are fine)",
    # tolerance
    "DEFAULT_FACTOR": "the safety factor over the reference's own float32 error (docs/tolerances.md)",
    "reference_tolerance": "evaluates `reference(dtype)` in float64 and float32; returns the float64 reference and the `atol` for an output of `dtype`",
    "composition_tolerance": "the `atol` between the student's whole module and the trusted composition of the student's own pieces (own_parts checks), for a setting run in `dtype`",
    # comparison
    "assert_close": "the value check: type, shape, dtype, then the tolerance; a hint when the output matches a known mistake; attaches an error map",
    "expect_equal": "exact equality (values and dtype) for discrete outputs such as masks, with hints for known mistakes",
    "is_close": "whether `assert_close` would pass, without failing: to choose a hint or a cause",
    # causality
    "check_causal_jacobian": "the gradient of each output position with respect to later input positions must be exactly 0 (and nonzero at earlier ones for `must_matter`)",
    "check_causal_perturbation": "moving the inputs at positions after t must leave the outputs up to t bit-identical",
    "check_depends_on_future": "without the causal flag, output position 0 must change when later positions do",
    # own_parts
    "OwnParts": "an own-parts check's configurations: `compose` from the student's pieces (a piece failing skips the configuration, and `expect_fails_too` asks the whole to fail there as well), `judged`, then `finish` fails \"cannot be judged on your own parts\" only when no configuration was judged",
}

# the module wrapper `C.new` returns (autograder.judging.checks.calls.Module)
MODULE_SUMMARIES: dict[str, str] = {
    "__call__": "forward on these inputs, in the child",
    "vjp": "forward, and per cotangent the gradients of the inputs, in the child",
    "parameter_vjp": "forward, and per cotangent the gradients of the module's own parameters by name (None where unused), in the child: an optimizer's step run on the trusted side",
    "state_dict": "the module's state_dict, as tensors copied to the trusted side",
    "named_parameters": "the module's parameters by name",
    "load_state_dict": "load a state_dict, as `nn.Module.load_state_dict` does",
    "load_weights": "load the test's weights: the parameters must be exactly the loaded names, each holding its values (extra buffers are the student's)",
    "to": "cast the module to `dtype`",
    "info": "its type name, its direct submodules' type names, its plain attributes, every submodule's training "
            "flag and every parameter's requires_grad (`ModuleInfo`)",
    "child": "the submodule registered under an attribute name, as a module wrapper of its own (the same object)",
    "load_fitting": "load non-strictly the test's weights where the module's parameter names and shapes match, seeded random values under its other parameters (own-parts checks)",
}


def _signature(value: Any) -> str:
    """A callable's parameters as a suite writes them: names and defaults, no annotations."""
    signature = inspect.signature(value)
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def _checked(summaries: dict[str, str], names: list[str], where: str) -> None:
    if missing := sorted(set(names) - set(summaries)):
        raise ValueError(f"{where}: no summary for {', '.join(missing)} (add one to {__name__}.py)")
    if stale := sorted(set(summaries) - set(names)):
        raise ValueError(f"{where}: summaries of names that are not public: {', '.join(stale)}")


def checks_table() -> str:
    from autograder.judging import checks

    # grouped by the module of each name's job, in the order the package's docstring gives them
    order = ["inputs", "caching", "failing", "calls", "kinds", "shapes", "structure", "tolerance", "comparison",
             "causality", "untouched", "own_parts"]
    names = list(checks.__all__)
    _checked(CHECKS_SUMMARIES, names, "autograder.judging.checks")

    def home(name: str) -> str:
        value = getattr(checks, name)
        module = getattr(value, "__module__", "") if callable(value) else ""
        if not module.startswith("autograder.judging.checks."):  # a constant: the module that defines it
            module = next(f"autograder.judging.checks.{m}" for m in order
                          if name in vars(sys.modules[f"autograder.judging.checks.{m}"]))
        return module.rsplit(".", 1)[-1]

    rows = ["| name | signature | module | what it is for |", "|---|---|---|---|"]
    for name in sorted(names, key=lambda n: (order.index(home(n)), n.lower())):
        value = getattr(checks, name)
        shown = f"`C.{name}{_signature(value)}`" if callable(value) else f"`C.{name} = {value!r}`"
        rows.append(f"| `{name}` | {shown.replace('|', '&#124;')} | `{home(name)}` | {CHECKS_SUMMARIES[name]} |")
    return "\n".join(rows)


def module_table() -> str:
    from autograder.judging.checks.calls import Module

    methods = [n for n, v in vars(Module).items() if callable(v) and (n == "__call__" or not n.startswith("_"))]
    _checked(MODULE_SUMMARIES, methods, "autograder.judging.checks.calls.Module")
    rows = ["| method | what it asks the child |", "|---|---|"]
    for name in methods:
        shown = ("module" if name == "__call__" else f"module.{name}") + _signature(getattr(Module, name)).replace(
            "(self, ", "(").replace("(self)", "()")
        rows.append(f"| `{shown}` | {MODULE_SUMMARIES[name]} |")
    return "\n".join(rows)


TABLES: dict[str, tuple[Path, Callable[[], str]]] = {
    "limits": (INSTRUCTORS, limits_table),
    "checks": (AUTHORING, checks_table),
    "module": (AUTHORING, module_table),
}


def rendered(text: str, doc: Path) -> str:
    """`text` (the document `doc`) with each of its generated tables rendered afresh."""
    for name, (home, table) in TABLES.items():
        if home != doc:
            continue
        pattern = re.compile(rf"(<!-- BEGIN GENERATED {name} -->\n)(?:.*?\n)?(<!-- END GENERATED {name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{doc}: no generated table named {name!r}")
        text = pattern.sub(lambda m: m[1] + table() + "\n" + m[2], text)
    return text


def main(argv: list[str] | None = None) -> int:
    command = (sys.argv[1:] if argv is None else argv or ["check"])[0]
    status = 0
    for doc in dict.fromkeys(home for home, _ in TABLES.values()):
        text = doc.read_text()
        try:
            fresh = rendered(text, doc)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        if command == "write":
            doc.write_text(fresh)
        elif fresh != text:
            print(f"{doc}: a generated table is stale; run `python -m autograder.authoring.readme_tables write`",
                  file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
