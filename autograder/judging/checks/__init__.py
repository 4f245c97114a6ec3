"""The hidden suites' toolkit: deterministic inputs, student-facing checks, tolerance derivation.

Suites use it as `from autograder.judging import checks as C`; this package exports exactly the names they
use, each from the module of its job: `inputs` (seeded inputs and random parameters), `caching` (`once`),
`failing` (`fail`, `evidence_on_failure`), `calls` (requests to the submission and how they are described),
`kinds`, `shapes` and `structure` (what was returned and what a module holds), `tolerance` and `comparison`
(numbers against the reference), `causality` (future dependence), `untouched` (inputs a function must leave
alone), `own_parts` (a part judged on the student's own earlier pieces, configuration by configuration), and the evidence the feedback draws (`mismatch`, `dependence`).

Every student-facing failure goes through `fail()` (pytest's Failed with pytrace=False and no chained
exception context), so a student sees what was compared, on which input (sizes, dtypes, settings; never
values), by how much it was off and, when the output matches a known mistake, a hint.  Never a traceback,
never test source, never full reference values (a single compared number is reported to one significant
digit of relative error only).  Suites must not use bare `assert` for anything a submission can influence.

A failure can carry evidence for the pictures in feedback (autograder.judging.evidence), computed here from
the values the submission returned: `assert_close` attaches where the error sits, the causality checks which
output position depends on which input position, and a suite adds its own with `evidence_on_failure`.
"""
from autograder.judging.checks.caching import once
from autograder.judging.checks.calls import (call, describe_call, describe_inputs, describe_value, expect_raises, new,
                                             rng, student_code, vjp)
from autograder.judging.checks.causality import (check_causal_jacobian, check_causal_perturbation,
                                                 check_depends_on_future)
from autograder.judging.checks.comparison import assert_close, expect_equal, is_close
from autograder.judging.checks.failing import evidence_on_failure, fail
from autograder.judging.checks.inputs import (MHA_PROJECTIONS, cast_floats, generator, layer_norm_state,
                                              linear_state, mha_state, randn, random_bool_mask, tril_mask)
from autograder.judging.checks.kinds import kind_of
from autograder.judging.checks.own_parts import OwnParts
from autograder.judging.checks.shapes import expect_exact_type, expect_number, expect_tensor
from autograder.judging.checks.structure import expect_parameters
from autograder.judging.checks.tolerance import DEFAULT_FACTOR, composition_tolerance, reference_tolerance
from autograder.judging.checks.untouched import (call_leaving_inputs, expect_unchanged,
                                                forward_leaving_inputs, module_state)

__all__ = [
    "DEFAULT_FACTOR", "MHA_PROJECTIONS", "OwnParts", "assert_close", "call", "call_leaving_inputs", "cast_floats",
    "check_causal_jacobian",
    "check_causal_perturbation", "check_depends_on_future", "composition_tolerance", "describe_call",
    "describe_inputs", "describe_value", "evidence_on_failure", "expect_equal", "expect_exact_type", "expect_number",
    "expect_parameters", "expect_raises", "expect_unchanged", "forward_leaving_inputs",
    "expect_tensor", "fail", "generator", "is_close", "kind_of", "layer_norm_state", "linear_state", "mha_state",
    "module_state", "new", "once", "randn", "random_bool_mask", "reference_tolerance", "rng", "student_code",
    "tril_mask",
    "vjp",
]
