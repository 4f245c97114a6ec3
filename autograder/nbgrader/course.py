"""The kit enabled in a course's own nbgrader_config.py, every setting the course had kept:

    from autograder.nbgrader.course import enable
    enable(c)

`enable` edits the course's lists in place (its own steps, or nbgrader's defaults when it set none), never
replacing them: ReleaseCells goes first among autograde's sanitising steps; SandboxedGrading takes the place of
nbgrader's Execute (the course's other autograde steps stay where they are); the exporter becomes the kit's
SubmissionExporter; the HTML exporter of generate_feedback draws the evidence pictures (DrawPictures); nbgrader's
CheckCellMetadata becomes the kit's, which compiles its schema once and is otherwise nbgrader's.  The sandbox's
limits come from the AUTOGRADER_* variables (autograder/model/limits.py), and AUTOGRADER_REUSE_RESULTS names
grade-all's results to reuse, as in the kit's own nbgrader_config.py.

Every step is named, not imported: only autograde loads the grader (torch and all, seconds), and every other
nbgrader command reads the configuration too.
"""
from __future__ import annotations

import os
from typing import Any

PLUGIN = "autograder.nbgrader.plugin"
RELEASE_CELLS = f"{PLUGIN}.ReleaseCells"
SANDBOXED_GRADING = f"{PLUGIN}.SandboxedGrading"
SUBMISSION_EXPORTER = f"{PLUGIN}.SubmissionExporter"
CHECK_CELL_METADATA = "autograder.nbgrader.cell_metadata.CheckCellMetadata"
DRAW_PICTURES = "autograder.nbgrader.pictures.DrawPictures"
NBGRADER_EXPORTER = "nbconvert.exporters.notebook.NotebookExporter"  # nbgrader's default for autograde


def _name(step: Any) -> str:
    """A step as nbgrader names it in a configuration: a dotted name, or the class itself."""
    return step if isinstance(step, str) else f"{step.__module__}.{step.__qualname__}"


def _is(step: Any, class_name: str) -> bool:
    # nbgrader's steps are named by their module (nbgrader.preprocessors.execute.Execute) or by the package
    # that exports them (nbgrader.preprocessors.Execute)
    name = _name(step)
    return name.startswith("nbgrader.") and name.rsplit(".", 1)[-1] == class_name


def _current(section: Any, trait: str, owner: type) -> list[Any]:
    return list(section[trait]) if trait in section else list(owner.class_traits()[trait].default())


def enable(c: Any) -> None:
    """Enable the kit in the nbgrader configuration `c` (get_config()'s), keeping the course's settings."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters.autograde import Autograde

    from autograder.model.limits import BadLimit, from_environment as limits_from_environment

    sanitize = [CHECK_CELL_METADATA if _is(s, "CheckCellMetadata") else s
                for s in _current(c.Autograde, "sanitize_preprocessors", Autograde)]
    if RELEASE_CELLS not in map(_name, sanitize):
        sanitize.insert(0, RELEASE_CELLS)
    c.Autograde.sanitize_preprocessors = sanitize

    steps = [SANDBOXED_GRADING if _is(s, "Execute") else CHECK_CELL_METADATA if _is(s, "CheckCellMetadata") else s
             for s in _current(c.Autograde, "autograde_preprocessors", Autograde)]
    if SANDBOXED_GRADING not in map(_name, steps):
        steps.insert(0, SANDBOXED_GRADING)
    c.Autograde.autograde_preprocessors = steps

    exporter = c.Autograde.get("exporter_class")
    if exporter is not None and _name(exporter) not in (SUBMISSION_EXPORTER, NBGRADER_EXPORTER):
        raise ValueError(f"nbgrader_config.py: c.Autograde.exporter_class is {_name(exporter)}; the kit needs "
                         f"{SUBMISSION_EXPORTER} (it writes each check cell's verdict)")
    c.Autograde.exporter_class = SUBMISSION_EXPORTER

    pictures = _current(c.HTMLExporter, "preprocessors", HTMLExporter)
    if DRAW_PICTURES not in map(_name, pictures):
        c.HTMLExporter.preprocessors = [*pictures, DRAW_PICTURES]

    try:  # the sandbox's limits: a setting of the course's own wins over the environment's
        for trait, value in limits_from_environment(os.environ).items():
            if trait not in c.SandboxedGrading:
                setattr(c.SandboxedGrading, trait, value)
    except BadLimit as exc:
        raise SystemExit(f"nbgrader_config.py: {exc}") from None
    if os.environ.get("AUTOGRADER_REUSE_RESULTS") and "reuse_results_from" not in c.SandboxedGrading:
        c.SandboxedGrading.reuse_results_from = [
            folder for folder in os.environ["AUTOGRADER_REUSE_RESULTS"].split(os.pathsep) if folder]
