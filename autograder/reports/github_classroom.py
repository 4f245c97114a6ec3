"""GitHub Classroom: the result its grading reporter (classroom-resources/autograding-grading-reporter@v1) reads.

The reporter takes each runner's result from the environment variable <RUNNER>_RESULTS, as base64 of a JSON
object {version, status, max_score, tests}.  What it reports to Classroom is the sum of the tests' `score` out
of `max_score`, so there is one test per rubric part carrying the part's points: partial credit counts.  Its
log shows each test's name after a tick or a cross, and the message only of a test whose status is "error",
so a part's name carries its points.  A top-level status other than "pass" marks the workflow run failed.

The file is one line of base64 (and a newline), for a workflow step to pass on with
    echo "result=$(cat FILE)" >> "$GITHUB_OUTPUT"
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from autograder.grading.rubric import PartScore
from autograder.protocol import clean_text, one_line
from autograder.grading.results_json import MAX_LINE_CHARS, MAX_OUTPUT_CHARS, summary, write_text_atomic
from autograder.grading.result import GradeResult

VERSION = 1
# characters of messages in one result: it reaches the reporter as one environment variable, which Linux
# caps at 128 KiB; at 4 bytes a character and base64's 4/3, this stays under 90 KiB
TEXT_BUDGET = 16_000


def _part_message(part: PartScore, limit: int) -> str:
    failed = [(test, shown) for test, shown in zip(part.tests, part.shown_texts()) if not test.earned_all]
    if not failed:
        return f"all {len(part.tests)} checks passed"
    lines = [part.forbidden_notice(one_line(", ".join(part.forbidden), 200))] if part.forbidden else []
    lines.append(f"{len(failed)} of {len(part.tests)} checks failed:")
    lines += [f"{one_line(test.name, 200)}: {one_line(shown, MAX_LINE_CHARS)}" for test, shown in failed]
    return clean_text("\n".join(lines), limit)


def results(result: GradeResult) -> dict[str, Any]:
    message = summary(result)[:MAX_OUTPUT_CHARS]
    limit = (TEXT_BUDGET - len(message)) // max(len(result.parts), 1)
    tests = [{"name": f"{one_line(part.part.title, 200)}: {round(part.score, 4):g} / {part.part.points:g} points",
              "status": "pass" if all(test.earned_all for test in part.tests) else "fail",
              "score": round(part.score, 4), "max_score": part.part.points,
              "message": _part_message(part, limit),
              "line_no": 0}  # the reporter appends " - line N" to a test's name unless line_no is 0
             for part in result.parts]
    if result.unreadable:  # "error": the one status whose message the reporter's log shows
        reason = f"Not graded: {one_line(result.unreadable, MAX_LINE_CHARS)}"
        tests = [{**test, "status": "error", "message": reason} for test in tests]
        status = "error"
    else:
        status = "pass" if all(test["status"] == "pass" for test in tests) else "fail"
    return {"version": VERSION, "status": status, "message": message, "max_score": result.max_score,
            "tests": tests}


def encode(result: GradeResult) -> str:
    text = json.dumps(results(result), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def write(result: GradeResult, path: Path) -> None:
    write_text_atomic(path, encode(result) + "\n")
