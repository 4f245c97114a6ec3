"""The course's ordinary nbgrader assignments (no rubric of the kit's), graded as nbgrader grades them, in the
kit's sandbox.

nbgrader's `Execute` runs every code cell of the sanitised notebook in a kernel started as the instructor, next
to the gradebook, the instructor's solutions and every other student's submission; its test cells then decide
the grade (an error output loses the cell's points, a number as the result is partial credit).  Here the same
cells run in order, in one namespace, through IPython, in a child of the kit's sandbox (autograder.child.
notebook): its own user and mount namespaces or Landlock, no network, the kit's limits, a fresh child per
notebook, and only the notebook's own files beside it.  The outputs come back as data, are checked
(autograder.host.notebook_run) and written into the notebook here, on the trusted side; nbgrader's own
IgnorePattern, LimitOutput, SaveAutoGrades and late penalties then run on them as always.

What `Execute` does that this keeps: its `timeout` per cell (a cell past it is interrupted, its outputs end with
`error_on_timeout`, and the next cell runs), `skip_cells_with_tag`, blank cells left alone, and
NBGRADER_EXECUTION=autograde in the notebook's environment.  A kernel that dies (os._exit, a crash, the memory
bound) fails that notebook's autograde, as nbgrader's DeadKernelError does.

What no sandbox changes: nbgrader's test cells run in the student's own namespace, so an answer whose `__eq__`
always returns True still passes `assert answer == expected`.  The sandbox protects the course, not the verdict
of a test cell (docs/security.md).

A notebook whose kernel is not Python is run by nbgrader's own Execute, unsandboxed, and says so.
"""
from __future__ import annotations

import shutil
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute

from autograder.grading.result import display_name
from autograder.host.notebook_run import NotebookRun, run_notebook, staged_files
from autograder.model.limits import Limits
from autograder.nbgrader import ordinary_ahead
from autograder.nbgrader.ahead import GradeAhead, cores

NOTICE_CELL = "autograder_notice"  # the metadata key of the notice cell this module adds to a graded notebook
FALLBACK_TIMEOUT = 3600.0  # Execute.timeout None (no limit) still gets one: the sandbox never runs forever


class DeadKernel(RuntimeError):
    """The notebook's process ended before its last cell: nbgrader fails such a notebook (DeadKernelError)."""


def kernel_language(nb: NotebookNode) -> str:
    """The notebook's language, as nbgrader's OverwriteKernelspec left it; a notebook that names none runs in
    nbclient's default kernel, Python's."""
    spec = nb.metadata.get("kernelspec") or {}
    language = spec.get("language") or (nb.metadata.get("language_info") or {}).get("name") or "python"
    return str(language).lower()


def cells_to_run(nb: NotebookNode, skip_tag: str) -> list[NotebookNode]:
    """The code cells nbclient executes: not blank, not tagged to be skipped."""
    return [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()
            and skip_tag not in cell.metadata.get("tags", [])]


def own_files(config: Any, resources: dict[str, Any]) -> list[Path]:
    """The folders whose files nbgrader puts beside the notebook: the submission, then the assignment's own
    files from source/ over it.  Read from the submitted folder itself (never followed through a link), not
    from the autograded copy, which nbgrader made by following links."""
    info, course = resources["nbgrader"], CourseDirectory(config=config)
    return [Path(course.format_path(course.submitted_directory, info["student"], info["assignment"])),
            Path(course.format_path(course.source_directory, ".", info["assignment"]))]


def write_outputs(cells: list[NotebookNode], run: NotebookRun, error_on_timeout: dict[str, Any] | None) -> None:
    """Each cell's checked outputs and count into the notebook; a cell that ran out of time ends with
    Execute's `error_on_timeout`, as nbgrader's own on_cell_executed appends it."""
    for cell, ran in zip(cells, run.cells):
        cell.outputs = [nbformat.from_dict(output) for output in ran.outputs]
        cell.execution_count = ran.execution_count
        if ran.timed_out and error_on_timeout:
            _timed_out(cell, error_on_timeout)
    if run.stuck:  # a kernel busy past its interrupt answers no later cell either
        for cell in cells[len(run.cells):]:
            cell.outputs = []
            if error_on_timeout:
                _timed_out(cell, error_on_timeout)


def _timed_out(cell: NotebookNode, error_on_timeout: dict[str, Any]) -> None:
    if not any(o.output_type == "error" and o.get("ename") == error_on_timeout.get("ename") for o in cell.outputs):
        cell.outputs.append(nbformat.from_dict({"output_type": "error", "ename": error_on_timeout.get("ename", ""),
                                                "evalue": error_on_timeout.get("evalue", ""),
                                                "traceback": list(error_on_timeout.get("traceback", []))}))


def notice_cell(lines: list[str]) -> NotebookNode:
    """A note at the top of the graded notebook (and so of its feedback): which sandbox ran it."""
    return nbformat.v4.new_markdown_cell("\n".join(f"*{line}*  " for line in lines),
                                         metadata={NOTICE_CELL: True})


def notebook_limits(limits: Limits, timeout: float, cells: int) -> Limits:
    """The sandbox's limits for a notebook of `cells` cells, each given Execute's `timeout`: the submission's
    whole time (and CPU) is what its cells may take, never less than the kit's own."""
    return replace(limits, cell_timeout=timeout, timeout=max(limits.timeout, timeout * cells + 60))


# this process's runs ahead: by autograde run (nbgrader's converter), then assignment; None where there is none
_ahead: weakref.WeakKeyDictionary[Any, dict[str, GradeAhead | None]] = weakref.WeakKeyDictionary()


def _ahead_of(step: Any, resources: dict[str, Any], timeout: float, skip_tag: str, limits: Limits
              ) -> GradeAhead | None:
    """This autograde run's notebooks of this assignment run ahead, decided on the first of them."""
    converter = getattr(step.parent, "parent", None)  # the exporter's: nbgrader's Autograde
    if not all(hasattr(converter, name) for name in ("assignments", "coursedir", "force")):
        return None
    runs = _ahead.setdefault(converter, {})
    assignment = resources["nbgrader"]["assignment"]
    if assignment not in runs:
        available = cores()
        jobs = step.grade_ahead if step.grade_ahead >= 0 else (available if available >= 2 else 0)

        def folders(student: str) -> list[Path]:
            return own_files(step.config, {"nbgrader": {**resources["nbgrader"], "student": student}})
        runs[assignment] = ordinary_ahead.start(converter, resources, timeout, skip_tag, limits, jobs, folders,
                                                step.log.info)
    return runs[assignment]


def grade_ordinary(step: Any, nb: NotebookNode, resources: dict[str, Any], limits: Limits
                   ) -> tuple[NotebookNode, dict[str, Any]]:
    """What nbgrader's Execute would make of `nb`, made in the sandbox (`step` is the SandboxedGrading running)."""
    student = display_name(resources["nbgrader"]["student"])
    execute = Execute(config=step.config, parent=step.parent)  # the course's settings of nbgrader's own step
    language = kernel_language(nb)
    if language != "python":
        line = (f"Graded WITHOUT the sandbox: the notebook's kernel is {language}, not Python, so nbgrader's own "
                "Execute ran it, as the instructor")
        step.log.warning("%s: %s", student, line)
        nb, resources = execute.preprocess(nb, resources)
        nb.cells.insert(0, notice_cell([line]))
        return nb, resources
    timeout = float(execute.timeout) if execute.timeout and execute.timeout > 0 else FALLBACK_TIMEOUT
    cells = cells_to_run(nb, execute.skip_cells_with_tag)
    for cell in cells:
        cell.outputs, cell.execution_count = [], None
    sources = [cell.source for cell in cells]
    run = None
    if (ahead := _ahead_of(step, resources, timeout, execute.skip_cells_with_tag, limits)) is not None:
        with ahead.result(student) as path:
            run = None if path is None else ordinary_ahead.stored_run(path, sources, timeout)
        if run is not None:
            step.log.info("%s: ran ahead, in parallel", student)
    if run is None:
        staging, left_out = staged_files(own_files(step.config, resources))
        try:
            run = run_notebook(sources, notebook_limits(limits, timeout, len(cells)), staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for line in left_out:
            step.log.warning("%s: not copied beside the notebook: %s", student, line)
    lines = [f"Graded in the sandbox: isolation {run.isolation}", f"Its memory was held by {run.memory}",
             *(notice.text for notice in run.notices)]
    if run.died and not run.stuck:
        raise DeadKernel(f"{student}: {run.died}")
    write_outputs(cells, run, execute.error_on_timeout)
    if run.stuck:
        step.log.warning("%s: %s: every later cell timed out", student, run.died)
    step.log.info("%s: ran %d cells in the sandbox, isolation %s", student, len(run.cells), run.isolation)
    nb.cells.insert(0, notice_cell(lines))
    return nb, resources
