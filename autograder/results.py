"""Reports: Gradescope's results.json format, written atomically."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autograder.grading import GradeResult

FORMAT_VERSION = 1
MAX_OUTPUT_CHARS = 4000


def _round(value: float) -> float:
    return round(value, 4)


def summary(result: GradeResult) -> str:
    lines = [f"{result.assignment}: {result.score:g} / {result.max_score:g}"]
    if result.unreadable:
        lines.append(f"Not graded: {result.unreadable}")
    if result.load.failure:
        lines.append(f"Your notebook could not be run: {result.load.failure}")
    for part in result.parts:
        lines.append(f"  {part.part.title}: {_round(part.score):g} / {part.part.points:g}")
        if part.forbidden:
            lines.append(f"    0 points: torch's own implementation was used ({', '.join(part.forbidden)}); "
                         "this part asks you to build it yourself")
    for error in result.load.cell_errors[:20]:
        lines.append(f"Cell {error.get('cell')} raised {error.get('type')}: {str(error.get('message'))[:200]}")
    return "\n".join(lines)


def gradescope(result: GradeResult) -> dict[str, Any]:
    tests = []
    for part in result.parts:
        for test in part.tests:
            output = test.message
            if part.forbidden:
                output = (f"0 points: torch's own implementation ({', '.join(part.forbidden)}) was used in this "
                          f"part. {output}").strip()
            tests.append({"name": f"{part.part.name}: {test.name}", "score": _round(test.score),
                          "max_score": _round(test.max_score),
                          "status": "passed" if test.score == test.max_score and test.max_score else "failed",
                          "output": output[:MAX_OUTPUT_CHARS], "visibility": "visible"})
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
            "submission": result.submission,
            "submission_sha256": result.sha256,
            "parts": {p.part.name: {"score": _round(p.score), "max_score": p.part.points,
                                    "forbidden_ops": list(p.forbidden)} for p in result.parts},
            "notices": result.load.notices,
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
