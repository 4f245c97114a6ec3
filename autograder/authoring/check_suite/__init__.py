"""Does the hidden suite mean what it says?  Grade an assignment's catalogue of known mistakes and
correct-but-different submissions through the real grader and report the suite's mutation score.

    python -m autograder check-suite [ASSIGNMENT] [--margins] [--reruns N] [--workers W]
    python -m autograder.authoring.check_suite [ASSIGNMENT] ...            (the same)

Every catalogue entry (`assignments/<name>/catalogue/`) is written to a file and graded by
`autograder.grading.grade.grade_file`: sandboxed child, hidden suites, rubric, exactly as a student's file.
A mistake is *caught* when it loses points in its own part; it is *unfair* when it also loses points in a part
that does not build on that part; its *hint* is missing when the failure output of its own part does not
contain the text the entry declares.  A variant *fails* when it gets less than full marks.

Exit status: 0 when every mistake is caught (fairly) and no variant loses a point, 1 otherwise (missing
hints are listed but do not change it; the kit's tests enforce them), 2 for usage errors.

--margins   per hidden test, the worst error ratio (|error| / allowed) of any correct submission and the
            smallest ratio of a mistake that this comparison catches (docs/tolerances.md quotes these).
--reruns N  grade the reference and three buggy entries N times with `python -m autograder grade` under varied
            PYTHONHASHSEED and thread counts, and compare the results.json files byte for byte.
"""
from __future__ import annotations

from autograder.authoring.check_suite.command import add_arguments, main, run, run_from_arguments
from autograder.authoring.check_suite.grading import (DEFAULT_WORKERS, CheckSuiteError, grade_entry, load_catalogue,
                                                      run_catalogue)
from autograder.authoring.check_suite.reports import (combined_share, follow_through, format_follow_through, format_margins,
                                                      format_weakest, margins, summarise, weakest_catches)
from autograder.authoring.check_suite.reruns import determinism, determinism_entries, rerun_conditions
from autograder.authoring.check_suite.verdicts import lost_parts, verdict

__all__ = ["DEFAULT_WORKERS", "CheckSuiteError", "add_arguments", "combined_share", "determinism", "determinism_entries", "follow_through",
           "format_follow_through", "format_margins",
           "format_weakest", "grade_entry", "load_catalogue", "lost_parts", "main", "margins", "rerun_conditions", "run",
           "run_catalogue", "run_from_arguments", "summarise", "verdict", "weakest_catches"]
