"""PrairieLearn's external-grader results.json, which its grading container leaves in
/grade/results/results.json: `score` in [0, 1], and the `tests` that the <pl-external-grader-results> element
lists with their points, one per hidden check.  A file that cannot be read at all is `gradable: false`:
PrairieLearn then awards nothing, does not count the attempt, and shows the reason.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autograder.protocol import one_line
from autograder.grading.results_json import MAX_LINE_CHARS, MAX_OUTPUT_CHARS, check_message, summary, write_json_atomic
from autograder.grading.result import GradeResult

# characters of check messages in one file: even at 12 bytes a character (an emoji, escaped as two \uXXXX)
# they stay well under PrairieLearn's 1 MB limit
MESSAGE_BUDGET = 60_000


def results(result: GradeResult) -> dict[str, Any]:
    output = summary(result)[:MAX_OUTPUT_CHARS]
    if result.unreadable:
        reason = one_line(result.unreadable, MAX_LINE_CHARS)
        return {"gradable": False, "message": f"Not graded: {reason}", "format_errors": [reason], "output": output}
    checks = [(part, test) for part in result.parts for test in part.tests]
    limit = min(MAX_OUTPUT_CHARS, MESSAGE_BUDGET // max(len(checks), 1))
    tests = [{"name": one_line(f"{part.part.name}: {test.name}", MAX_LINE_CHARS),
              "description": one_line(part.part.title, MAX_LINE_CHARS),
              "points": round(test.score, 4), "max_points": round(test.max_score, 4),
              "message": "" if test.earned_all else check_message(part, test, limit)}
             for part, test in checks]
    fraction = result.score / result.max_score if result.max_score else 0.0
    return {"gradable": True, "score": min(max(fraction, 0.0), 1.0),
            "message": f"{result.score:g} of {result.max_score:g} points", "output": output, "tests": tests}


def write(result: GradeResult, path: Path) -> None:
    write_json_atomic(path, results(result))
