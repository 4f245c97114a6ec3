"""nbgrader integration: a preprocessor that replaces nbgrader's kernel-executing `Execute`.

Instead of running hidden tests inside the student's kernel, it grades the (sanitised) notebook with the
same engine as `python -m autograder grade`, then writes each part's verdict into that part's autograded
test cell in the form nbgrader's SaveAutoGrades reads: full marks as plain output, partial credit as a float
execute_result (nbgrader's partial-credit rule), no credit as an error output carrying the feedback.  After
them come the pictures of the part's failing checks (display_data, image/png), which nbgrader's grading
ignores and its feedback shows.  A graded cell that matches no rubric part gets no credit either: nbgrader
gives full points to a graded cell without output, so leaving it alone would hand out points nobody checked.

With `reuse_results_from` set, a grade that `python -m autograder grade-all` already made stands in for
grading: `<folder>/<student>.json` is used when it judged exactly the cells being graded (`cells_sha256`,
after nbgrader has restored locked cells, so a student who edited one is graded afresh) against the same
assignment (`assignment_fingerprint`: suites, rubric, kit, limits).  The cell outputs are then the ones a
fresh grade writes.  Any other file there is ignored: malformed, foreign, or keyed otherwise.
"""
from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Int, List, TraitType, Unicode

from autograder.judging.fingerprint import assignment_fingerprint, file_cells_sha256
from autograder.grading import grade_file
from autograder.result import GradeResult
from autograder.reports import figures
from autograder.reports.results import from_gradescope, message_text, summary
from autograder.judging.rubric import PartScore, Rubric, load_rubric
from autograder.host.limits import Limits, knobs
from autograder.host.sandbox import isolation_refused



def _part_feedback(part: PartScore, result: GradeResult) -> str:
    lines = [f"{part.part.title}: {part.score:.4g} / {part.part.points:g} points"]
    if part.forbidden:
        lines.append(part.forbidden_notice())
    for test in part.tests:
        mark = "ok  " if test.score == test.max_score else "FAIL"
        message = message_text(test.message)
        lines.append(f"[{mark}] {test.name}" + (f": {message}" if message and mark == "FAIL" else ""))
    if part.score < part.part.points and (result.load.cell_errors or result.load.failure or result.unreadable):
        lines += ["", summary(result)]
    return "\n".join(lines)


def picture_outputs(part: PartScore) -> list[NotebookNode]:
    """One image per piece of evidence the part's failing checks carry (checks of one experiment that failed
    on the same evidence share it), captioned with the first such check's name."""
    shown = {}
    for test in part.tests:
        if test.figure is not None:
            shown.setdefault(test.figure, test.name)
    return [nbformat.v4.new_output("display_data", data={
        "image/png": base64.b64encode(figures.png(figure)).decode("ascii"),
        "text/plain": f"{name}: {figures.caption(figure)}"}) for figure, name in shown.items()]


def verdict_outputs(part: PartScore, cell_points: float, result: GradeResult) -> list[NotebookNode]:
    """The outputs that make nbgrader's determine_grade give this cell its share of the part's score (it reads
    the first error or execute_result, and ignores the pictures after them)."""
    text = _part_feedback(part, result)
    fraction = part.score / part.part.points if part.part.points else 0.0
    earned = round(fraction * cell_points, 4)
    if earned <= 0:
        return [nbformat.v4.new_output("error", ename="NotGraded" if result.unreadable else "TestsFailed",
                                       evalue=f"0 / {cell_points:g} points", traceback=text.split("\n")),
                *picture_outputs(part)]
    stream = nbformat.v4.new_output("stream", name="stdout", text=text + "\n")
    if earned >= cell_points:
        return [stream, *picture_outputs(part)]
    result_output = nbformat.v4.new_output("execute_result", data={"text/plain": repr(earned)},
                                           execution_count=1)
    return [result_output, stream, *picture_outputs(part)]


def unmatched_outputs(grade_id: str, assignment: str, cell_points: float) -> list[NotebookNode]:
    """The outputs that make nbgrader score a graded cell that no rubric part checks 0."""
    text = (f"this check cell (grade_id {grade_id}) matches no part of the rubric for assignment {assignment}; "
            "ask your instructor")
    return [nbformat.v4.new_output("error", ename="NotGraded", evalue=f"0 / {cell_points:g} points",
                                   traceback=[text])]


def write_verdicts(nb: NotebookNode, result: GradeResult) -> list[str]:
    """Writes each autograded test cell's outputs from `result`; returns the grade_ids that matched no part."""
    by_name = {p.part.name: p for p in result.parts}
    unmatched = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        grade_id, points = str(meta.get("grade_id")), float(meta.get("points", 0))
        part = by_name.get(grade_id)
        if part is None:
            unmatched.append(grade_id)
            cell.outputs = unmatched_outputs(grade_id, result.assignment, points)
        else:
            cell.outputs = verdict_outputs(part, points, result)
    return unmatched


def _limit_traits() -> dict[str, TraitType]:
    """One configurable trait per limit (c.SandboxedGrading.timeout, .memory_mb, .allow_unisolated, ...)."""
    kinds = {float: Float, int: Int, bool: Bool}
    return {knob.name: kinds[knob.kind](knob.default, help=knob.help).tag(config=True) for knob in knobs()}


_LimitTraits = type("_LimitTraits", (NbGraderPreprocessor,), _limit_traits())


class SandboxedGrading(_LimitTraits):
    """Grades the notebook in the kit's sandbox and writes the verdicts into the autograded test cells."""

    assignment = Unicode("", help="Rubric to grade against; empty means the nbgrader assignment id.").tag(config=True)
    reuse_results_from = List(Unicode(), help="Folders of `python -m autograder grade-all` results "
                              "(<student>.json) to reuse instead of grading, when one judged the same cells "
                              "against the same suites, rubric, kit and limits.").tag(config=True)

    def limits(self) -> Limits:
        return Limits(**{knob.field: knob.limit_value(getattr(self, knob.name)) for knob in knobs()})

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        rubric = load_rubric(self.assignment or resources["nbgrader"]["assignment"])
        student = resources["nbgrader"]["student"]
        with tempfile.TemporaryDirectory(prefix="nbgrader-sandbox-") as tmp:
            path = Path(tmp) / f"{resources['nbgrader']['notebook']}.ipynb"
            nbformat.write(nb, str(path))
            result = self.reused(path, student, rubric)
            if result is None:
                if not self.allow_unisolated and (refused := isolation_refused()):
                    # no grade at all rather than a grade from an unisolated run: nbgrader reports the failure
                    raise RuntimeError(f"this machine allows no sandbox ({refused}); set "
                                       "c.SandboxedGrading.allow_unisolated = True to grade without one")
                result = grade_file(path, rubric, self.limits())
                self.log.info("%s graded: %s / %s in %.1f s, isolation %s", student, result.score,
                              result.max_score, result.seconds, result.load.isolation)
        for grade_id in write_verdicts(nb, result):
            self.log.warning("test cell %s matches no part of rubric %s: scored 0", grade_id, rubric.assignment)
        return nb, resources

    def reused(self, path: Path, student: str, rubric: Rubric) -> GradeResult | None:
        """The stored grade of exactly these cells against exactly this assignment, if a folder holds one."""
        if not self.reuse_results_from or not student or "/" in student or student.startswith("."):
            return None
        cells = file_cells_sha256(path, rubric)
        if not cells:
            return None
        fingerprint = assignment_fingerprint(rubric, self.limits())
        for folder in self.reuse_results_from:
            candidate = Path(folder) / f"{student}.json"
            if not candidate.is_file():
                continue
            # instructor-written, yet possibly half-copied or from another tool: anything wrong means grading
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
                extra = data["extra_data"]
                if extra.get("cells_sha256") != cells:
                    self.log.info("%s: %s judged other cells: not reused", student, candidate)
                    continue
                if extra.get("assignment_fingerprint") != fingerprint:
                    self.log.info("%s: %s was graded with a different version of the assignment: not reused",
                                  student, candidate)
                    continue
                result = from_gradescope(data, rubric)
            except Exception as exc:  # a bad file is never a reason to stop grading
                self.log.warning("%s: ignored %s (%s: %s)", student, candidate, type(exc).__name__,
                                 str(exc).split("\n", 1)[0][:200])
                continue
            self.log.info("%s reused: %s / %s from %s", student, result.score, result.max_score, candidate)
            return result
        return None
