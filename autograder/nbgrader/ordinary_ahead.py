"""An ordinary assignment's class run ahead, in parallel, while nbgrader's autograde converts one notebook after
another (the kit's own assignments have autograder.grading.ahead).

On its first ordinary notebook, SandboxedGrading starts

    python -m autograder.nbgrader.ordinary_ahead

with one JSON line: {"course" (its root: hidden from every sandbox), "db_url", "assignment", "notebook", "timeout", "skip_tag", "limits", "jobs", "out",
"entries": [[student, student_id, notebook path, [folders of its own files]], ...]}.  For each entry, in that
order and `jobs` at a time, it sanitises the submitted notebook with nbgrader's own steps (DeduplicateIds,
OverwriteKernelspec, OverwriteCells, reading the gradebook), runs the cells nbgrader's Execute would run in a
sandbox of their own (autograder.host.notebook_run), and writes the run to `out/<student>.json` with the cells
it ran.  Each student finished is one line on its standard output, {"finished": student}.  When autograde
reaches a notebook, a run is used only if it ran exactly the cells autograde hands over, with the same timeout:
otherwise the notebook runs there and then.  So running ahead changes when the cells run, never what they are.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from autograder.grading.batch import result_path
from autograder.grading.result import display_name
from autograder.host.notebook_run import CellRun, NotebookRun, run_notebook, staged_files
from autograder.host.sandbox import hide_course
from autograder.model.interrupts import Terminated, raise_terminated
from autograder.model.limits import Limits
from autograder.model.load_report import Notice, NoticeKind
from autograder.nbgrader.ahead import GradeAhead, submissions_from

MODULE = "autograder.nbgrader.ordinary_ahead"


def spec_line(out: Path, *, course: str, db_url: str, assignment: str, notebook: str, timeout: float,
              skip_tag: str, limits: Limits, jobs: int, entries: list[tuple[str, str, Path, list[Path]]]) -> bytes:
    return (json.dumps({"course": course, "db_url": db_url, "assignment": assignment, "notebook": notebook,
                        "timeout": timeout,
                        "skip_tag": skip_tag, "limits": asdict(limits), "jobs": jobs, "out": str(out),
                        "entries": [[s, i, str(p), [str(f) for f in fs]] for s, i, p, fs in entries]}) + "\n").encode()


# --- what a stored run holds ------------------------------------------------------------------------------------

def stored(run: NotebookRun, sources: list[str], timeout: float) -> dict[str, Any]:
    return {"sources": sources, "timeout": timeout, "cells": [asdict(cell) for cell in run.cells],
            "isolation": run.isolation, "memory": run.memory, "notices": [[n.kind.value, n.text] for n in run.notices], "died": run.died,
            "stuck": run.stuck}


def stored_run(path: Path, sources: list[str], timeout: float) -> NotebookRun | None:
    """The run kept in `path` if it ran exactly `sources` with `timeout`, else None.  The file was written by
    this kit's trusted side, from outputs already checked."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["sources"] != sources or data["timeout"] != timeout:
            return None
        return NotebookRun([CellRun(c["outputs"], c["execution_count"], c["timed_out"]) for c in data["cells"]],
                           data["isolation"], data["memory"], [Notice(NoticeKind(k), t) for k, t in data["notices"]],
                           data["died"], data["stuck"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- the process ---------------------------------------------------------------------------------------------

def _cells(path: Path, resources: dict[str, Any], skip_tag: str) -> list[str] | None:
    """The sources autograde will run of the notebook at `path`, or None when it is not Python's."""
    import nbformat
    from nbgrader.preprocessors import DeduplicateIds, OverwriteCells, OverwriteKernelspec

    from autograder.nbgrader.ordinary import cells_to_run, kernel_language

    nb = nbformat.read(str(path), as_version=4)
    for step in (DeduplicateIds(), OverwriteKernelspec(), OverwriteCells()):
        nb, resources = step.preprocess(nb, resources)
    if kernel_language(nb) != "python":
        return None
    return [cell.source for cell in cells_to_run(nb, skip_tag)]


def _run_one(spec: dict[str, Any], entry: list) -> str:
    student, student_id, path, folders = entry
    resources = {"nbgrader": {"db_url": spec["db_url"], "assignment": spec["assignment"],
                              "notebook": spec["notebook"], "student": student_id}}
    sources = _cells(Path(path), resources, spec["skip_tag"])
    if sources is None:
        return f"{student}: not Python: left to autograde"
    from autograder.nbgrader.ordinary import notebook_limits

    limits = notebook_limits(Limits(**spec["limits"]), spec["timeout"], len(sources))
    staging, _ = staged_files([Path(f) for f in folders])
    try:
        run = run_notebook(sources, limits, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    target = result_path(Path(spec["out"]), student)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".partial")
    temporary.write_text(json.dumps(stored(run, sources, spec["timeout"])), encoding="utf-8")
    os.replace(temporary, target)
    return f"{student}: ran ahead"


def _stop_when_input_closes() -> None:
    while os.read(0, 1 << 16):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    signal.signal(signal.SIGTERM, raise_terminated)
    spec = json.loads(sys.stdin.buffer.readline())
    hide_course(spec["course"])  # the gradebook and every submission: out of every sandbox's sight
    threading.Thread(target=_stop_when_input_closes, daemon=True).start()
    try:
        with ThreadPoolExecutor(int(spec["jobs"])) as pool:
            futures = {pool.submit(_run_one, spec, entry): entry[0] for entry in spec["entries"]}
            for future in as_completed(futures):
                try:
                    print(future.result(), file=sys.stderr, flush=True)
                except Exception as exc:  # noqa: BLE001 - autograde runs this one itself, and meets the failure
                    print(f"{futures[future]}: not run ahead ({type(exc).__name__}: {exc})", file=sys.stderr,
                          flush=True)
                print(json.dumps({"finished": futures[future]}), flush=True)
    except Terminated:
        os._exit(128 + signal.SIGTERM)  # the pool's threads wait on sandboxes that end with this process


# --- autograde's side -------------------------------------------------------------------------------------------

def start(converter: Any, resources: dict[str, Any], timeout: float, skip_tag: str, limits: Limits, jobs: int,
          folders: Callable[[str], list[Path]], log: Callable[[str], None]) -> GradeAhead | None:
    """The run ahead of this notebook and those autograde converts after it (nbgrader's order and rules), or
    None when there are fewer than two, or the process cannot start."""
    info = resources["nbgrader"]
    entries = [(display_name(student), student, notebook, folders(student))
               for student, notebook in submissions_from(converter, info["student"], info["assignment"])]
    if len(entries) < 2 or jobs < 1:
        return None
    jobs = min(jobs, len(entries))
    try:
        ahead = GradeAhead({entry[0] for entry in entries}, MODULE, lambda out: spec_line(
            out, course=str(converter.coursedir.root), db_url=info["db_url"], assignment=info["assignment"], notebook=info["notebook"], timeout=timeout,
            skip_tag=skip_tag, limits=limits, jobs=jobs, entries=entries))
    except OSError as exc:
        log(f"could not run ahead ({type(exc).__name__}: {exc}): each notebook runs in its turn")
        return None
    log(f"running {len(entries)} notebooks ahead in the sandbox, {jobs} at a time")
    return ahead


if __name__ == "__main__":
    main()
