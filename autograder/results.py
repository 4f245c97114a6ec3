"""Reports: Gradescope's results.json format, written atomically."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autograder.grading import GradeResult
from autograder.protocol import UNISOLATED, clean_text

FORMAT_VERSION = 1
MAX_OUTPUT_CHARS = 4000
MAX_LINE_CHARS = 500


def _round(value: float) -> float:
    return round(value, 4)


def _line(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """Text that came from the submission or its process, safe to print on one line (a lone surrogate in an
    exception message once crashed the CLI's print)."""
    return clean_text(value, limit).replace("\n", " ").replace("\t", " ")


def summary(result: GradeResult) -> str:
    lines = [f"{_line(result.assignment)}: {result.score:g} / {result.max_score:g}"]
    lines += [f"Notice: {_line(n)}" for n in result.load.notices if n.startswith(UNISOLATED)]
    if result.unreadable:
        lines.append(f"Not graded: {_line(result.unreadable)}")
    if result.load.failure:
        lines.append(f"Your notebook could not be run: {_line(result.load.failure)}")
    for part in result.parts:
        lines.append(f"  {_line(part.part.title)}: {_round(part.score):g} / {part.part.points:g}")
        if part.forbidden:
            lines.append(f"    0 points: torch's own implementation was used ({_line(', '.join(part.forbidden))}); "
                         "this part asks you to build it yourself")
    for error in result.load.cell_errors[:20]:
        lines.append(f"Cell {_line(error.get('cell'), 20)} raised {_line(error.get('type'), 100)}: "
                     f"{_line(error.get('message'), 200)}")
    return "\n".join(lines)


def gradescope(result: GradeResult) -> dict[str, Any]:
    tests = []
    for part in result.parts:
        for test in part.tests:
            output = test.message
            if part.forbidden:
                output = (f"0 points: torch's own implementation ({', '.join(part.forbidden)}) was used in this "
                          f"part. {output}").strip()
            output = clean_text(output, MAX_OUTPUT_CHARS)  # quotes the submission's messages and values
            tests.append({"name": f"{part.part.name}: {test.name}", "score": _round(test.score),
                          "max_score": _round(test.max_score),
                          "status": "passed" if test.score == test.max_score and test.max_score else "failed",
                          "output": output, "visibility": "visible"})
    return {
        "score": result.score,
        "max_score": _round(result.max_score),
        "output": summary(result)[:MAX_OUTPUT_CHARS],
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "format_version": FORMAT_VERSION,
            "assignment": result.assignment,
            "submission": clean_text(result.submission, 255),  # a file name need not be UTF-8
            "submission_sha256": result.sha256,
            "parts": {p.part.name: {"score": _round(p.score), "max_score": p.part.points,
                                    "forbidden_ops": list(p.forbidden)} for p in result.parts},
            "notices": [clean_text(n, MAX_LINE_CHARS) for n in result.load.notices],  # some come from the child
        },
    }


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers see the old file or the new one, never half of one; a crash leaves no partial file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # other students' results are nobody's business
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
