"""Grading submissions ahead of a caller that takes their results one at a time, in the same order.

nbgrader's autograde converts one notebook after another in a single process: grading each in turn leaves a
core idle while nbgrader sanitises, writes and records.  Its plugin (autograder.nbgrader.ahead) starts

    python -m autograder.grading.ahead

with one JSON line on its standard input: {"assignment", "course" (nbgrader's course root), "limits" (the
Limits fields), "jobs", "out", "entries": [[student, path, root], ...]}.  This process grades the entries
in that order with `jobs` grading processes (autograder.grading.batch.worker_pool) and writes each result to `out` the moment it is graded, as
grade-all does, keyed by the cells it judged and the assignment it judged them against: the caller uses a
result only when both match what it would have graded.  A submission that fails to grade leaves no result,
and the caller grades it itself (and meets the failure there).  Each submission finished, graded or not, is
one line on the standard output: {"finished": student}.

It stops when its standard input closes: the caller has finished, or is gone.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from concurrent.futures import as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autograder.grading.batch import Entry, grade_in_worker, stop_workers, worker_pool
from autograder.grading.rubric import load_rubric
from autograder.host.sandbox import hide_course
from autograder.model.interrupts import Terminated, raise_terminated
from autograder.model.limits import Limits


def spec_line(assignment: str, limits: Limits, jobs: int, out: Path, entries: list[Entry],
              course: str | None = None) -> bytes:
    """What the caller writes on this process's standard input (`course`: the course root whose own kit
    assignments are looked in first, autograder.model.course)."""
    return (json.dumps({"assignment": assignment, "course": course, "limits": asdict(limits), "jobs": jobs,
                        "out": str(out),
                        "entries": [[e.student, str(e.path), str(e.root)] for e in entries]}) + "\n").encode()


def _stop_when_input_closes() -> None:
    while os.read(0, 1 << 16):  # not sys.stdin: a daemon thread holding its lock aborts the interpreter's exit
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        _grade(json.loads(sys.stdin.buffer.readline()))
    except Terminated:
        sys.exit(128 + signal.SIGTERM)


def _grade(spec: dict[str, Any]) -> None:
    threading.Thread(target=_stop_when_input_closes, daemon=True).start()
    rubric = load_rubric(spec["assignment"], course=spec.get("course"))
    if spec.get("course"):  # out of every sandbox's sight, as in the autograde process that started this one
        hide_course(spec["course"])
    limits = Limits(**spec["limits"])
    out = Path(spec["out"])
    entries = [Entry(student, Path(path), Path(root)) for student, path, root in spec["entries"]]
    with worker_pool(int(spec["jobs"])) as pool:
        futures = {pool.submit(grade_in_worker, entry, out, rubric, limits): entry for entry in entries}
        try:
            for future in as_completed(futures):
                student = futures[future].student
                try:
                    print(future.result(), file=sys.stderr, flush=True)
                except Exception as exc:  # noqa: BLE001 - the caller grades this one itself, and reports it
                    print(f"{student}: not graded ahead ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)
                print(json.dumps({"finished": student}), flush=True)
        except BaseException:  # told to stop
            stop_workers(pool, futures)
            raise


if __name__ == "__main__":
    main()
