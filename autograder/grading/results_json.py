"""Reports: Gradescope's results.json format, written atomically, and read back.

results.json carries, besides Gradescope's fields, the key of the grade (the file's sha256, the graded cells'
sha256 and the assignment's fingerprint, see autograder.grading.fingerprint) and the exact verdicts: every test's
unrounded score, its whole message, its hints and the evidence its pictures are drawn from
(autograder.judging.evidence), the cell errors the summary lists, the loading failure and the notices, each
with its kind.  With them `from_gradescope` rebuilds a GradeResult
that renders exactly as the original (Gradescope's rounded scores and clipped texts could not), so nbgrader
can reuse a grade made by grade-all, and feedback pages can be drawn from stored results.
"""
from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from autograder.protocol import clean_text, one_line
from autograder.grading.result import GradeResult, display_name
from autograder.model.load_report import LoadReport, Notice, NoticeKind
from autograder.judging import evidence, hints
from autograder.judging.resemblance import Resemblance
from autograder.grading.rubric import PartScore, Rubric, TestScore

# 3: each test's evidence; 4: torch's own code the source holds; 5: the cells graded by hand; 6: each test's
# hints apart from its message, each notice's kind
FORMAT_VERSION = 6
SUMMARY_CELL_ERRORS = 20  # what the summary lists, so all that a result needs to keep
MAX_OUTPUT_CHARS = 4000
MAX_LINE_CHARS = 500
MAX_MESSAGE_CHARS = 20_000  # a check's message; the suites' longest are a few hundred characters


def rounded(value: float) -> float:
    """A score as results.json stores it (and every report shows it)."""
    return round(value, 4)


def _line(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """Text that came from the submission or its process, safe to print on one line (a lone surrogate in an
    exception message once crashed the CLI's print)."""
    return one_line(value, limit)


def summary(result: GradeResult) -> str:
    lines = [f"{_line(result.assignment)}: {result.score:g} / {result.max_score:g}"]
    if result.graded_by_hand:
        lines.append(by_hand_notice(result))
    if result.load.isolation:
        lines.append(f"Isolation: {_line(result.load.isolation)}")
    lines += [f"Notice: {_line(n)}" for n in result.load.notices_of(NoticeKind.UNISOLATED)]
    if result.unreadable:
        lines.append(f"Not graded: {_line(result.unreadable)}")
    lines += [f"To review: {r.notice()}" for r in result.resembles]
    if result.load.failure:
        lines.append(f"Your notebook could not be run: {_line(result.load.failure)}")
    for part in result.parts:
        lines.append(f"  {_line(part.part.title)}: {rounded(part.score):g} / {part.part.points:g}")
        if part.forbidden:
            lines.append("    " + part.forbidden_notice(_line(", ".join(part.forbidden))))
    for error in result.load.cell_errors[:SUMMARY_CELL_ERRORS]:
        lines.append(f"Cell {_line(error.get('cell'), 20)} raised {_line(error.get('type'), 100)}: "
                     f"{_line(error.get('message'), 200)}")
    return "\n".join(lines)


def by_hand_notice(result: GradeResult) -> str:
    """What the autograded score leaves out: the written answers, which the instructor grades by hand."""
    count, points = len(result.graded_by_hand), sum(result.graded_by_hand.values())
    answers = "1 written answer" if count == 1 else f"{count} written answers"
    return f"Graded by hand: {answers} ({points:g} points), not included in this score"


def message_text(message: object) -> str:
    """A check's message as reports and nbgrader's cells show it: clean text (it can quote the submission),
    unclipped in practice.  Cleaning twice changes nothing, so a stored message renders as the original."""
    return clean_text(message, MAX_MESSAGE_CHARS)


VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")  # Gradescope's words


def gradescope(result: GradeResult, *, cells_sha256: str = "", assignment_fingerprint: str = "",
               visibility: str = "visible") -> dict[str, Any]:
    """Gradescope's results.json for `result`.  `cells_sha256` and `assignment_fingerprint` (see
    autograder.grading.fingerprint) say what was graded against what; "" (unknown) never matches, so a result
    without them is never reused.  `visibility` is when students see the tests (one of VISIBILITIES)."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility {visibility!r} is not one of {', '.join(VISIBILITIES)}")
    tests = []
    for part in result.parts:
        for test in part.tests:
            tests.append({"name": f"{part.part.name}: {test.name}", "score": rounded(test.score),
                          "max_score": rounded(test.max_score),
                          "status": "passed" if test.earned_all else "failed",
                          # plain text: a message can quote the submission, which must not render as markup
                          "output": _output(part, test), "output_format": "text", "visibility": visibility})
    return {
        "score": result.score,
        "max_score": rounded(result.max_score),
        "output": fenced(summary(result)[:MAX_OUTPUT_CHARS]),
        "output_format": "md",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "format_version": FORMAT_VERSION,
            "assignment": result.assignment,
            "submission": display_name(result.submission, 255),  # a file name: hostile, and need not be UTF-8
            "submission_sha256": result.sha256,
            "cells_sha256": cells_sha256,
            "assignment_fingerprint": assignment_fingerprint,
            "parts": {p.part.name: {"score": rounded(p.score), "max_score": p.part.points,
                                    "forbidden_ops": list(p.forbidden), **_exact_verdicts(p)} for p in result.parts},
            "isolation": result.load.isolation,  # which tier of the sandbox graded it
            "memory": result.load.memory,  # what held its memory to the limit there
            # [kind, text]: some texts come from the child, the kind never does
            "notices": [[n.kind.value, clean_text(n.text, MAX_LINE_CHARS)] for n in result.load.notices],
            # as the summary shows them: all that rendering this result again needs
            "unreadable": _line(result.unreadable),
            "load_failure": _line(result.load.failure),
            "cell_errors": [_cell_error(e) for e in result.load.cell_errors[:SUMMARY_CELL_ERRORS]],
            "resembles": [[r.function, r.share] for r in result.resembles],
            "graded_by_hand": dict(result.graded_by_hand),  # grade_id -> points, outside score and max_score
        },
    }


def fenced(text: str) -> str:
    """`text` as a Markdown code block, shown verbatim: its fence is longer than any run of backticks inside,
    so nothing the submission put in a message renders as markup or links."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def check_message(part: PartScore, test: TestScore, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A check's message as students see it (results.json's test output, every format's): clean text, since it
    can quote the submission, led by the notice when the part scored 0 for torch's own implementation and
    followed by its hints."""
    message = f"{part.forbidden_notice()} {test.shown_text}".strip() if part.forbidden else test.shown_text
    return clean_text(message, limit)


def _output(part: PartScore, test: TestScore) -> str:
    return check_message(part, test, MAX_OUTPUT_CHARS)  # Gradescope's field is clipped


def _exact_verdicts(part: PartScore) -> dict[str, Any]:
    """What the rounded scores and clipped outputs above lose: unrounded scores (they sum and print
    differently), whole messages and the hints apart; a message is null where the test's output is that
    message (most are: those without hints), so that results stay small."""
    tests = []
    for test in part.tests:
        message = message_text(test.message)
        tests.append([test.name, test.score, test.max_score, test.passed,
                      None if message == _output(part, test) else message,
                      None if test.figure is None else evidence.to_json(test.figure),
                      list(hints.bounded(test.hints))])
    return {"exact_score": part.score, "tests": tests}


def _cell_error(error: dict[str, Any]) -> dict[str, Any]:
    cell = error.get("cell")
    return {"cell": cell if type(cell) is int else _line(cell, 20), "type": _line(error.get("type"), 100),
            "message": _line(error.get("message"), 200)}


class NotAResult(ValueError):
    """Not a results.json this kit wrote for this rubric: malformed, foreign or of another format version."""


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise NotAResult(what)


def _is_number(value: object) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _is_texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_notice(value: object) -> bool:
    """[kind, text] as `gradescope` writes a notice: a known kind, clean text of bounded length."""
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and value[0] in NOTICE_KINDS
            and isinstance(value[1], str) and clean_text(value[1], MAX_LINE_CHARS) == value[1])


NOTICE_KINDS = frozenset(kind.value for kind in NoticeKind)


def _test(part: str, stored: object, outputs: dict[str, Any]) -> TestScore:
    _check(isinstance(stored, list) and len(stored) == 7 and isinstance(stored[0], str) and _is_number(stored[1])
           and _is_number(stored[2]) and type(stored[3]) is bool and isinstance(stored[4], (str, type(None))),
           f"a test of part {part} is not [name, score, max_score, passed, message, evidence, hints]")
    name, score, max_score, passed, message, figure, advice = stored
    wrong = hints.problem(advice)
    _check(not wrong, f"the hints of test {part}: {name} {wrong}")
    _check(not (passed and advice), f"test {part}: {name} passed, yet carries hints")
    if message is None:  # the message is the test's Gradescope output, which has no hints then
        message = outputs.get(f"{part}: {name}")
        _check(isinstance(message, str), f"test {part}: {name} has no output")
        _check(not advice, f"test {part}: {name} has hints, so its message cannot be its output")
    if figure is not None:
        _check(not passed, f"test {part}: {name} passed, yet carries evidence of a failure")
        try:
            figure = evidence.from_json(figure)
        except evidence.EvidenceError as exc:
            raise NotAResult(f"the evidence of test {part}: {name} is malformed ({exc})") from None
    return TestScore(part, name, score, max_score, passed, message, figure, tuple(advice))


def from_gradescope(data: Any, rubric: Rubric) -> GradeResult:
    """The GradeResult `data` was made from, as far as reports and nbgrader's cell outputs show it (not its
    printed output or seconds).  Raises NotAResult for anything `gradescope` did not write for `rubric`."""
    extra = data.get("extra_data") if isinstance(data, dict) else None
    _check(isinstance(extra, dict), "no extra_data object")
    _check(extra.get("format_version") == FORMAT_VERSION, f"format_version is not {FORMAT_VERSION}")
    _check(extra.get("assignment") == rubric.assignment, f"not a result for assignment {rubric.assignment}")
    stored_parts = extra.get("parts")
    _check(isinstance(stored_parts, dict) and set(stored_parts) == {p.name for p in rubric.parts},
           "its parts are not the rubric's")
    _check(isinstance(data.get("tests"), list) and all(isinstance(t, dict) for t in data["tests"]),
           "tests are not a list of objects")
    outputs = {t["name"]: t.get("output") for t in data["tests"] if isinstance(t.get("name"), str)}
    parts = []
    for part in rubric.parts:
        stored = stored_parts[part.name]
        _check(isinstance(stored, dict) and _is_number(stored.get("exact_score"))
               and isinstance(stored.get("tests"), list) and _is_texts(stored.get("forbidden_ops")),
               f"part {part.name} has no exact_score, tests or forbidden_ops")
        tests = [_test(part.name, t, outputs) for t in stored["tests"]]
        parts.append(PartScore(part, stored["exact_score"], tests, tuple(stored["forbidden_ops"])))
    _check(sum(t.figure is not None for p in parts for t in p.tests) <= evidence.MAX_FIGURES,
           f"more than {evidence.MAX_FIGURES} tests carry evidence")
    _check(isinstance(extra.get("notices"), list) and all(_is_notice(n) for n in extra["notices"]),
           f"notices are not a list of [kind, text] (kinds: {', '.join(NoticeKind)}; texts of at most "
           f"{MAX_LINE_CHARS} characters)")
    _check(all(isinstance(extra.get(k), str) for k in ("submission", "submission_sha256", "unreadable",
                                                       "load_failure", "isolation")),
           "submission, submission_sha256, unreadable, load_failure or isolation is not text")
    cell_errors = extra.get("cell_errors")
    _check(isinstance(cell_errors, list) and all(isinstance(e, dict) for e in cell_errors),
           "cell_errors are not a list of objects")
    resembles = extra.get("resembles")
    _check(isinstance(resembles, list) and all(isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)
                                               and _is_number(r[1]) for r in resembles),
           "resembles is not a list of [function, share]")
    by_hand = extra.get("graded_by_hand")
    _check(isinstance(by_hand, dict) and all(isinstance(k, str) and _is_number(v) for k, v in by_hand.items()),
           "graded_by_hand is not an object of points")
    load = LoadReport()
    load.notices = [Notice(NoticeKind(kind), text) for kind, text in extra["notices"]]
    load.failure, load.cell_errors = extra["load_failure"], cell_errors
    load.isolation = extra["isolation"]
    _check(isinstance(extra.get("memory", ""), str), "memory is not text")
    load.memory = extra.get("memory", "")  # absent from results written before it was recorded
    return GradeResult(submission=extra["submission"], sha256=extra["submission_sha256"],
                       assignment=rubric.assignment, parts=parts, max_score=rubric.max_score, load=load,
                       unreadable=extra["unreadable"], resembles=[Resemblance(*r) for r in resembles],
                       graded_by_hand=dict(by_hand))


def read_result(path: Path, rubric: Rubric) -> GradeResult:
    """The GradeResult stored in the results.json at `path`; NotAResult when it cannot be read as one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise NotAResult(f"{path.name} cannot be read ({type(exc).__name__})") from None
    try:
        return from_gradescope(data, rubric)
    except NotAResult as exc:
        raise NotAResult(f"{path.name}: {exc}") from None


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never half of one; a crash leaves no partial file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # other students' results are nobody's business
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
