"""The kit enabled in a course's own nbgrader_config.py, with one call that keeps every setting the course had:

    from autograder.nbgrader.course import enable
    enable(c)

Each of autograde's lists of steps is the course's own (nbgrader's defaults where it set none) with the kit's
steps in place of nbgrader's: SandboxedGrading where Execute was (every assignment of the course is then graded in
the sandbox: the kit's own by their rubrics, the others by their test cells, autograder.nbgrader.ordinary),
the kit's CheckCellMetadata where nbgrader's was (the same checks, its schema compiled once), and ReleaseCells
first among the sanitising steps (it leaves an ordinary assignment alone).  Autograde reads submissions with
the kit's SubmissionExporter, and generate_feedback's pages draw the pictures of failed checks.  Nothing else
is changed: the course's timeouts, LimitOutput, IgnorePattern, late penalties, database and exchange stay as
they were.
"""
from __future__ import annotations

from typing import Any

from nbgrader.converters import Autograde
from nbgrader.preprocessors import CheckCellMetadata, Execute

SANDBOXED_GRADING = "autograder.nbgrader.plugin.SandboxedGrading"
RELEASE_CELLS = "autograder.nbgrader.plugin.ReleaseCells"
KIT_CELL_METADATA = "autograder.nbgrader.cell_metadata.CheckCellMetadata"
SUBMISSION_EXPORTER = "autograder.nbgrader.plugin.SubmissionExporter"
DRAW_PICTURES = "autograder.nbgrader.pictures.DrawPictures"


def _is(step: Any, cls: type) -> bool:
    """A step named by its class or by its dotted name, as nbgrader_config.py may name it."""
    return step is cls or step == f"{cls.__module__}.{cls.__name__}" or step == f"nbgrader.preprocessors.{cls.__name__}"


def _configured(section: Any, name: str, converter: type) -> list:
    """The course's own list, or nbgrader's default where it set none."""
    value = section.get(name) if name in section else None
    return list(value) if isinstance(value, (list, tuple)) else list(converter.class_traits()[name].default())


def with_kit_steps(steps: list, *, sanitising: bool) -> list:
    """`steps` with the kit's in place of nbgrader's Execute and CheckCellMetadata (and ReleaseCells first when
    `sanitising`); a step already the kit's stays once."""
    kit = {SANDBOXED_GRADING, RELEASE_CELLS, KIT_CELL_METADATA}
    replaced = [SANDBOXED_GRADING if _is(step, Execute) else KIT_CELL_METADATA if _is(step, CheckCellMetadata)
                else step for step in steps]
    if sanitising:
        replaced = [RELEASE_CELLS, *(step for step in replaced if step != RELEASE_CELLS)]
    seen, unique = set(), []
    for step in replaced:
        if step in kit and step in seen:
            continue
        if isinstance(step, str):
            seen.add(step)
        unique.append(step)
    return unique


def enable(c: Any) -> None:
    """The kit in the course whose configuration `c` is (nbgrader_config.py's get_config())."""
    c.Autograde.exporter_class = SUBMISSION_EXPORTER
    c.Autograde.sanitize_preprocessors = with_kit_steps(
        _configured(c.Autograde, "sanitize_preprocessors", Autograde), sanitising=True)
    c.Autograde.autograde_preprocessors = with_kit_steps(
        _configured(c.Autograde, "autograde_preprocessors", Autograde), sanitising=False)
    if DRAW_PICTURES not in (pictures := list(c.HTMLExporter.get("preprocessors", []) or [])):
        c.HTMLExporter.preprocessors = [*pictures, DRAW_PICTURES]

