"""nbgrader integration: how `nbgrader autograde` reads, sanitises and grades a submission with the kit.

`SubmissionExporter` reads the submitted notebook, and the kit's own reader decides, as it does for
`python -m autograder grade`: a file it refuses is refused for the same one-line reason, and becomes a
notebook holding only that reason (every test cell then scores 0 with it, in the gradebook and the feedback,
instead of the whole autograde failing); a file it reads is read with the same cells, even where nbformat
alone would refuse it (a UTF-8 byte-order mark) or read it otherwise (no format version: nbformat would
empty every cell).

`ReleaseCells` runs first among nbgrader's sanitising steps and decides which of the submission's cells are
the release's, with the kit's rules (autograder/host/source_cells.py), so that nbgrader's DeduplicateIds,
OverwriteCells and CheckCellMetadata have nothing left to fail on (nbgrader 0.9 fails a notebook with a cell
pasted twice, or with a test cell the gradebook does not know).  The last cell carrying a grade_id the
gradebook knows, with the same role (autograded test cell or not) and, unless locked, the same type, is that
release cell: it gets the gradebook's metadata, and nbgrader restores it if it is locked.  Every other cell
with nbgrader metadata is the student's own: the metadata goes, and a cell marked as a test cell is still not
run when grading.  A cell without nbgrader metadata (Colab strips it; VS Code, jupytext and copies lose it)
whose text matches a locked release cell, or a written answer as released, that no cell carries is that cell
(`restore_by_text`, text matched as model/cells.text_key says): it gets the gradebook's metadata, so a check
cell carries its verdict and an untouched answer scores 0 with nothing to review, as nbgrader scores it.

`SandboxedGrading` replaces nbgrader's kernel-executing `Execute`.  Instead of running hidden tests inside
the student's kernel, it grades the sanitised notebook with the same engine as `python -m autograder grade`,
then writes each part's verdict into that part's autograded test cell in the form nbgrader's SaveAutoGrades
reads: full marks as plain output, partial credit as a float execute_result (nbgrader's partial-credit rule),
no credit as an error output carrying the feedback.  After them comes the evidence of the part's failing
checks (display_data), which nbgrader's grading ignores and its feedback draws as pictures
(autograder.nbgrader.pictures).  A graded cell that matches no rubric part gets no credit either: nbgrader
gives full points to a graded cell without output, so leaving it alone would hand out points nobody checked.  A test cell of the gradebook that the
submission lacks (deleted, or no longer marked as one) is added back after grading, to carry its verdict:
the hidden suite graded the part anyway, so a deleted test cell neither loses nor gains points.

With `reuse_results_from` set, a grade that `python -m autograder grade-all` already made stands in for
grading: `<folder>/<student>.json` is used when it judged exactly the cells being graded (`cells_sha256`,
after nbgrader has restored locked cells) against the same assignment (`assignment_fingerprint`: suites,
rubric, kit, limits).  The cell outputs are then the ones a fresh grade writes.  Any other file there is
ignored: malformed, foreign, or keyed otherwise.

Every grade it makes or reuses is kept in <course root>/autograded-history/<assignment>/<student>/, and a
regrade (autograde --force, a resubmission) is compared with the student's previous grade there: whose score or
check verdicts moved, and why, go to <course root>/<assignment>-changes.csv and nbgrader's log
(autograder.nbgrader.regrades).
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Int, List, TraitType, Unicode

from autograder.grading.fingerprint import assignment_fingerprint, file_cells_sha256, fingerprint_components
from autograder.grading.batch import result_path, suite_names
from autograder.nbgrader import regrades as nbgrader_regrades
from autograder.nbgrader.ahead import GradeAhead, cores, grade_ahead
from autograder.nbgrader.hand_ins import HandIn, account_hand_ins
from autograder.nbgrader.pictures import evidence_outputs
from autograder.grading.result import GradeResult, display_name
from autograder.grading.results_json import from_gradescope, gradescope, message_text, summary
from autograder.grading.rubric import PartScore, Rubric, has_rubric, load_rubric, score
from autograder.model.limits import Limits, knobs
from autograder.host.sandbox import hide_course, isolation_refused
from autograder.host.intake import UnreadableSubmission, read_submission
from autograder.host.source_cells import cells_from, read_cells
from autograder.model.cells import code_text, grade_id_of, is_check_cell, last_carriers, text_key

# The kit's own metadata (cells and notebook), written by ReleaseCells and read by SandboxedGrading: what a
# submission holds under this key is dropped on reading, so only the kit's two steps ever write it.
KIT = "autograder"


def course_of(config: Any) -> str | None:
    """nbgrader's course root (c.CourseDirectory.root), where the course's own kit assignments are; None when the
    configuration does not set it (nbgrader's default then: the current directory)."""
    root = config.get("CourseDirectory", {}).get("root") if config is not None else None
    return root if isinstance(root, str) and root else None


def _kit_assignment(config: Any, assignment_id: str) -> str:
    """The kit's assignment SandboxedGrading grades against: c.SandboxedGrading.assignment, else nbgrader's."""
    configured = config.get("SandboxedGrading", {}).get("assignment", "") if config is not None else ""
    return configured if isinstance(configured, str) and configured else assignment_id


def is_ordinary(config: Any, assignment_id: str) -> bool:
    """An assignment the kit has no rubric for: nbgrader's own, graded by its test cells (autograder.nbgrader.
    ordinary).  The kit's reading and cell rules are for its own assignments; an ordinary one keeps nbgrader's."""
    return not has_rubric(_kit_assignment(config, assignment_id), course=course_of(config))


def _rubric(config: Any, assignment_id: str) -> Rubric:
    return load_rubric(_kit_assignment(config, assignment_id), course=course_of(config))


# --- reading the submission ---------------------------------------------------------------------------------

def _structure_problem(nb: NotebookNode) -> str | None:
    """What of a notebook nbformat read would make nbgrader's own steps fail, if anything."""
    cells = nb.get("cells")
    if not isinstance(cells, list):
        return "it has no list of cells"
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            return f"cell {number} is not a code, markdown or raw cell"
        if not isinstance(cell.get("metadata", {}), dict) or not isinstance(cell.get("source", ""), str):
            return f"cell {number} has malformed metadata or source"
    return None


def rebuilt_notebook(data: dict[str, Any]) -> NotebookNode:
    """A notebook that the kit reads (a JSON object with a list of cells) but nbformat refuses (no format
    version, a malformed cell), rebuilt as a valid one from what the kit reads of it: each cell's type, text
    and metadata.  A code cell whose source is not text, which the kit does not run, becomes a raw cell."""
    def meta(value: Any) -> dict:
        return copy.deepcopy(value) if isinstance(value, dict) else {}

    nb = nbformat.v4.new_notebook(metadata=meta(data.get("metadata")))
    for cell in data["cells"]:
        if not isinstance(cell, dict):
            continue  # not a cell to the kit either
        text, kind = code_text(cell), cell.get("cell_type")
        if kind == "code" and text is not None:
            nb.cells.append(nbformat.v4.new_code_cell(text, metadata=meta(cell.get("metadata"))))
        elif kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(text or "", metadata=meta(cell.get("metadata"))))
        else:
            nb.cells.append(nbformat.v4.new_raw_cell(text or "", metadata=meta(cell.get("metadata"))))
    return nb


def _kit_cells(nb: dict[str, Any], rubric: Rubric) -> list[str] | None:
    """The cells the kit grades of a notebook (None if it refuses it)."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-read-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        path.write_text(json.dumps(nb), encoding="utf-8")
        try:
            return read_cells(path, rubric.skip_when_unchanged, release=rubric.release_text)
        except UnreadableSubmission:
            return None


def read_submitted(path: Path, rubric: Rubric, log: Any = None, within: Path | None = None
                   ) -> tuple[NotebookNode | None, str]:
    """The submitted notebook and "", or None and the one-line reason it is refused.  The kit's reader decides
    what is a notebook and what its cells are, for every front end: a file `python -m autograder grade`
    refuses is refused for the same reason (a link anywhere below `within`, the submitted folder, included),
    and one it reads is read here with the same cells, even where nbformat alone would refuse it (a byte-order
    mark, no format version) or read it otherwise."""
    try:
        raw = read_submission(path, within)
        graded = cells_from(path, raw, rubric.skip_when_unchanged, rubric.release_text)
        if path.suffix == ".py":  # its cells as code cells, which grading matches with the release's by text
            return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text) for text in cells_from(
                path, raw, rubric.skip_when_unchanged)]), ""
    except UnreadableSubmission as exc:
        return None, str(exc)
    text = raw.decode("utf-8-sig")  # within the kit's bounds now; the byte-order mark is only a signature
    data = json.loads(text)
    if data.get("nbformat") == 4:  # nbformat "converts" what declares no version, losing every source
        try:
            nb = nbformat.reads(text, as_version=4)
            if _structure_problem(nb) is None and _kit_cells(nb, rubric) == graded:
                return nb, ""
        except Exception:  # nbformat's refusals are of many types (NotJSONError, KeyError, TypeError, ...)
            pass
    nb = rebuilt_notebook(data)
    if _kit_cells(nb, rubric) != graded:  # not expected: still a reason, never a failed autograde
        return None, f"{path.name} cannot be read by nbgrader: its cells cannot be rebuilt as a valid notebook"
    if log is not None:
        log.info("%s: nbformat does not read it as the grader does; rebuilt as a valid notebook from its cells",
                 display_name(str(path)))
    return nb, ""


def refused_notebook(reason: str) -> NotebookNode:
    """What nbgrader grades in place of a submission it cannot read: the reason, and no cell of the release
    (SandboxedGrading adds every test cell back, each scoring 0 with the reason)."""
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"**Not graded.** {reason}")])


class SubmissionExporter(NotebookExporter):
    """nbgrader autograde's reader (c.Autograde.exporter_class): the submission as the kit reads it, or, when it
    must be refused, a notebook carrying the reason.  Built by autograde once it has listed what it converts,
    it first adds every submission folder that holds something but no notebook it would convert
    (autograder.nbgrader.hand_ins), and reads what was handed in instead where it stands."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.hand_ins: dict[str, HandIn] = {}
        converter = self.parent
        if hasattr(converter, "assignments") and hasattr(converter, "coursedir"):  # nbgrader's Autograde
            self.hand_ins = account_hand_ins(converter, lambda assignment: not is_ordinary(self.config, assignment))

    def from_filename(self, filename: str, resources: dict | None = None, **kw: Any):
        hand_in = self.hand_ins.get(filename) if getattr(self.parent, "_sanitizing", True) else None
        ordinary = resources is not None and is_ordinary(self.config, resources["nbgrader"]["assignment"])
        if hand_in is None and (ordinary or not getattr(self.parent, "_sanitizing", True)):
            return super().from_filename(filename, resources, **kw)  # the second pass reads nbgrader's own file
        path = Path(filename)
        resources = {} if resources is None else resources
        info = resources["nbgrader"]
        # nbgrader found it as submitted/<student>/<assignment>/<notebook>.ipynb, following links: read from the
        # submitted folder down, so that a student's folder or assignment folder linked elsewhere is refused
        nested = path.parent.name == info["assignment"] and path.parent.parent.name == info["student"]
        within = path.parents[2] if nested and len(path.parents) > 2 else path.parent
        if hand_in is not None and not hand_in.gradable:
            nb, reason = None, hand_in.instead
        elif hand_in is not None:
            nb, reason = read_submitted(hand_in.path, _rubric(self.config, info["assignment"]), self.log, within)
        else:
            nb, reason = read_submitted(path, _rubric(self.config, info["assignment"]), self.log, within)
        if nb is None and ordinary:  # nbgrader's rule for a missing notebook: its cells score 0
            self.log.warning("%s not graded: %s", display_name(info["student"]), reason)
            nb = refused_notebook(reason)
            resources.setdefault("metadata", {}).update(name=path.stem, path=str(path.parent))
            return self.from_notebook_node(nb, resources, **kw)
        modified = os.lstat(hand_in.path if hand_in is not None else path).st_mtime
        if nb is None:
            self.log.warning("%s not graded: %s", display_name(info["student"]), reason)
            nb = refused_notebook(reason)
            resources[KIT] = {"unreadable": reason}
        metadata = resources.setdefault("metadata", {})  # what nbconvert's own from_filename records
        metadata.update(name=path.stem, path=str(path.parent), modified_date=datetime.datetime.fromtimestamp(
            modified, tz=datetime.timezone.utc).strftime("%B %-d, %Y"))
        return self.from_notebook_node(nb, resources, **kw)


# --- which cells are the release's ----------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseCell:
    """A cell of the release notebook, as nbgrader's gradebook holds it."""
    name: str
    cell_type: str
    locked: bool
    source: str
    checksum: str | None
    grade: bool
    solution: bool
    task: bool
    points: float | None

    @property
    def is_test(self) -> bool:  # an autograded test cell, by the kit's rule (model.cells.is_check_cell)
        return self.grade and not self.solution

    def nbgrader_metadata(self) -> dict[str, Any]:
        meta = {"grade": self.grade, "grade_id": self.name, "locked": self.locked, "schema_version": 3,
                "solution": self.solution, "task": self.task, "cell_type": self.cell_type}
        if self.checksum:
            meta["checksum"] = self.checksum
        if self.points is not None:
            meta["points"] = self.points
        return meta

    def added_back(self) -> NotebookNode:
        """The test cell put back into a submission that lacks it (nbgrader's own add_missing_cells' form)."""
        note = (f"# This cell (id:{self.name}) was missing from the submission. It was added back by the grader, "
                "to carry its part's verdict.\n\n")
        return nbformat.v4.new_code_cell(note + self.source, metadata={
            "deletable": False, "editable": False, "nbgrader": self.nbgrader_metadata()})


def release_cells(resources: dict[str, Any]) -> list[ReleaseCell]:
    """The gradebook's cells of the notebook being autograded, in the gradebook's order."""
    info = resources["nbgrader"]
    with Gradebook(info["db_url"]) as gradebook:
        notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
        points = {c.name: float(c.max_score) for c in [*notebook.grade_cells, *notebook.task_cells]}
        grades, solutions = {c.name for c in notebook.grade_cells}, {c.name for c in notebook.solution_cells}
        tasks = {c.name for c in notebook.task_cells}
        return [ReleaseCell(c.name, c.cell_type, bool(c.locked), c.source or "", c.checksum, c.name in grades,
                            c.name in solutions, c.name in tasks, points.get(c.name))
                for c in notebook.source_cells]


def _own_cell_reason(cell: NotebookNode, index: int, last: dict[str, int], release: dict[str, ReleaseCell]
                     ) -> str | None:
    """Why the cell, which has nbgrader metadata, is the student's own and not a cell of the release; None
    when it is the release cell of its grade_id."""
    grade_id = grade_id_of(cell)
    if grade_id is None:
        return "it carries no grade_id"
    if last[grade_id] != index:
        return f"it is a copy of cell {grade_id} (a later cell carries the same grade_id)"
    known = release.get(grade_id)
    if known is None:
        return f"the assignment has no cell {grade_id}"
    if is_check_cell(cell) != known.is_test:
        return (f"cell {grade_id} of the release is not an autograded test cell" if is_check_cell(cell) else
                f"cell {grade_id} of the release is an autograded test cell, and this one is not marked as one")
    if not known.locked and cell.cell_type != known.cell_type:
        return f"cell {grade_id} of the release is a {known.cell_type} cell"
    return None


def _plain(nbgrader: Any) -> bool:
    """nbgrader metadata that gives its cell no role (what the Create Assignment toolbar leaves on "-")."""
    return isinstance(nbgrader, dict) and not any(nbgrader.get(k) for k in ("grade", "solution", "locked", "task"))


def _known_by_text(cell: ReleaseCell) -> bool:
    """A release cell that a cell without metadata is, when its text matches: a locked cell (nbgrader restores
    it anyway), or a written answer (graded by hand) as released, which nbgrader scores 0 with nothing to
    review when it knows the cell."""
    return cell.locked or (cell.grade and cell.solution and cell.cell_type == "markdown")


def restore_by_text(cells: list[NotebookNode], release: list[ReleaseCell]) -> list[str]:
    """Gives each cell without nbgrader metadata whose text matches (model/cells.text_key) a release cell that
    no cell of the notebook carries, of the same type and `_known_by_text`, that cell's metadata and source;
    cells of one text go to the release's cells of that text in order.  Colab, VS Code, jupytext and copies
    lose nbgrader's metadata; this is how the release's cells stay the release's, and untouched answers stay
    untouched.  Returns the grade_ids restored."""
    carried = {grade_id for cell in cells if (grade_id := grade_id_of(cell)) is not None}
    waiting: dict[tuple[str, tuple[str, ...]], list[ReleaseCell]] = {}
    for known in release:
        if known.name not in carried and _known_by_text(known) and text_key(known.source):
            waiting.setdefault((known.cell_type, text_key(known.source)), []).append(known)
    restored = []
    for cell in cells:
        if "nbgrader" in cell.metadata or not isinstance(cell.get("source"), str):
            continue
        candidates = waiting.get((cell.cell_type, text_key(cell.source)))
        if candidates:
            known = candidates.pop(0)
            cell.metadata["nbgrader"] = nbformat.from_dict(known.nbgrader_metadata())
            cell.source = known.source
            restored.append(known.name)
    return restored


class ReleaseCells(NbGraderPreprocessor):
    """Sanitising, before nbgrader's own steps: the release's cells get the gradebook's metadata, every other
    cell's nbgrader metadata goes (one marked as a test cell is marked not to run when grading)."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        if is_ordinary(self.config, resources["nbgrader"]["assignment"]):
            return nb, resources  # nbgrader's own rules, unchanged
        release = {cell.name: cell for cell in release_cells(resources)}
        student = display_name(resources["nbgrader"]["student"])  # for the log: a folder name is hostile
        nb.metadata.pop(KIT, None)
        if resources.get(KIT, {}).get("unreadable"):
            nb.metadata[KIT] = {"unreadable": resources[KIT]["unreadable"]}
        for cell in nb.cells:
            if not isinstance(cell.get("metadata"), dict):
                cell.metadata = nbformat.from_dict({})
            cell.metadata.pop(KIT, None)
        restored = restore_by_text(nb.cells, list(release.values()))
        if restored:
            self.log.info("%s: %d cells without nbgrader metadata are the release's by their text (%s): "
                          "their metadata is restored", student, len(restored), ", ".join(restored))
        last = last_carriers(nb.cells)
        for index, cell in enumerate(nb.cells):
            if "nbgrader" not in cell.metadata:
                continue
            why = _own_cell_reason(cell, index, last, release)
            if why is None:
                cell.metadata["nbgrader"] = nbformat.from_dict(release[grade_id_of(cell)].nbgrader_metadata())
                continue
            if is_check_cell(cell):
                cell.metadata[KIT] = nbformat.from_dict({"not_run": (
                    f"This cell is marked as an autograded test cell, and {why}. Test cells never run when "
                    "grading (the hidden tests take their place), and this one earns no points.")})
            claims = grade_id_of(cell) is not None or not _plain(cell.metadata["nbgrader"])
            del cell.metadata["nbgrader"]
            if claims:  # metadata that claims nothing (every flag off, no grade_id) goes without a word
                self.log.warning("%s: cell %d is the student's own, not the release's (%s): its nbgrader "
                                 "metadata is removed", student, index + 1, why)
        return nb, resources


def add_missing_test_cells(nb: NotebookNode, release: list[ReleaseCell]) -> list[str]:
    """Adds back each autograded test cell of the release that the notebook lacks, after the nearest cell of
    the release before it (or before the nearest after it); returns their grade_ids."""
    present = {grade_id_of(cell) for cell in nb.cells if is_check_cell(cell)}
    order = [cell.name for cell in release]
    added = []
    for position, cell in enumerate(release):
        if not cell.is_test or cell.cell_type != "code" or cell.name in present:
            continue
        carriers = {grade_id: i for i, c in enumerate(nb.cells) if (grade_id := grade_id_of(c)) is not None}
        before = [carriers[name] + 1 for name in reversed(order[:position]) if name in carriers]
        after = [carriers[name] for name in order[position + 1:] if name in carriers]
        nb.cells.insert((before or after or [len(nb.cells)])[0], cell.added_back())
        present.add(cell.name)
        added.append(cell.name)
    return added


def grading_copy(nb: NotebookNode) -> NotebookNode:
    """The notebook as it is graded: the student's own test cells, whose nbgrader metadata ReleaseCells
    removed, are marked as test cells again, so that they are not run, as `grade` does not run them."""
    copied = copy.deepcopy(nb)
    for cell in copied.cells:
        if isinstance(cell.metadata.get(KIT), dict) and cell.metadata[KIT].get("not_run"):
            cell.metadata["nbgrader"] = {"grade": True, "solution": False}
    return copied


def explain_not_run(nb: NotebookNode) -> None:
    """Drops the kit's marks; a code cell marked not to run shows why as its output."""
    for cell in nb.cells:
        mark = cell.metadata.pop(KIT, None)
        if isinstance(mark, dict) and mark.get("not_run") and cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"Not run: {mark['not_run']}\n")]


def refused_result(rubric: Rubric, name: str, reason: str) -> GradeResult:
    """The grade of a submission that cannot be read: every check fails with the reason, as grading does."""
    from autograder.grading.grade import Unjudgeable  # torch and the judge: only where this process grades
    from autograder.judging.judge import run_suite

    result = GradeResult(name, "", rubric.assignment, [], rubric.max_score, graded_by_hand=dict(rubric.graded_by_hand))
    result.unreadable = reason
    result.parts = score(rubric, run_suite(rubric.suite_files(), Unjudgeable(reason), rubric.part_names))
    return result


# --- verdicts -------------------------------------------------------------------------------------------

def _part_feedback(part: PartScore, result: GradeResult) -> str:
    lines = [f"{part.part.title}: {part.score:.4g} / {part.part.points:g} points"]
    if part.forbidden:
        lines.append(part.forbidden_notice())
    for test, shown in zip(part.tests, part.shown_texts()):  # a hint once per part
        mark = "ok  " if test.earned_all else "FAIL"
        message = message_text(shown)
        lines.append(f"[{mark}] {test.name}" + (f": {message}" if message and mark == "FAIL" else ""))
    if part.score < part.part.points and (result.load.cell_errors or result.load.failure or result.unreadable):
        lines += ["", summary(result)]
    return "\n".join(lines)


def verdict_outputs(part: PartScore, result: GradeResult) -> list[NotebookNode]:
    """The outputs that make nbgrader's determine_grade give this part's cell the rubric's score for it (it
    reads the first error or execute_result, and ignores the evidence for pictures after them): the points are
    the rubric's (grading/rubric.score), written here and never computed again."""
    text = _part_feedback(part, result)
    earned, points = round(part.score, 4), part.part.points
    if earned <= 0:
        return [nbformat.v4.new_output("error", ename="NotGraded" if result.unreadable else "TestsFailed",
                                       evalue=f"0 / {points:g} points", traceback=text.split("\n")),
                *evidence_outputs(part)]
    stream = nbformat.v4.new_output("stream", name="stdout", text=text + "\n")
    if earned >= points:
        return [stream, *evidence_outputs(part)]
    result_output = nbformat.v4.new_output("execute_result", data={"text/plain": repr(earned)},
                                           execution_count=1)
    return [result_output, stream, *evidence_outputs(part)]


def not_graded_outputs(cell_points: float, why: str) -> list[NotebookNode]:
    """The outputs that make nbgrader score a graded cell 0, saying why (an instructor's problem)."""
    return [nbformat.v4.new_output("error", ename="NotGraded", evalue=f"0 / {cell_points:g} points",
                                   traceback=[f"{why}; ask your instructor"])]


def write_verdicts(nb: NotebookNode, result: GradeResult) -> list[str]:
    """Writes each autograded test cell's outputs from `result`; returns what kept a cell from its verdict (a
    grade_id that matches no part, or points that are not the part's: the release was not regenerated), each
    such cell scored 0 rather than a grade the rubric did not decide."""
    by_name = {p.part.name: p for p in result.parts}
    problems = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        grade_id, points = str(meta.get("grade_id")), float(meta.get("points", 0))
        part = by_name.get(grade_id)
        if part is None:
            why = f"this check cell (grade_id {grade_id}) matches no part of the rubric for assignment {result.assignment}"
        elif points != part.part.points:
            why = (f"this check cell (grade_id {grade_id}) carries {points:g} points, and the rubric's part "
                   f"{grade_id} of assignment {result.assignment} {part.part.points:g}")
        else:
            cell.outputs = verdict_outputs(part, result)
            continue
        cell.outputs = not_graded_outputs(points, why)
        problems.append(why)
    return problems


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
    grade_ahead = Int(-1, help="Processes that grade the notebooks autograde will convert next while it "
                      "converts this one (autograder.nbgrader.ahead): -1, one per core when there are two or more; "
                      "0, none (each notebook is graded in its turn).").tag(config=True)

    def limits(self) -> Limits:
        return Limits(**{knob.field: knob.limit_value(getattr(self, knob.name)) for knob in knobs()})

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        # the gradebook and the submissions: out of every sandbox's sight, wherever autograde was started
        hide_course(CourseDirectory(config=self.config).root)
        if is_ordinary(self.config, resources["nbgrader"]["assignment"]):
            self.require_sandbox()
            from autograder.nbgrader.ordinary import grade_ordinary

            return grade_ordinary(self, nb, resources, self.limits())
        rubric = _rubric(self.config, resources["nbgrader"]["assignment"])
        # shown in the log, and as grade-all names the student (<student>.json to reuse)
        student = display_name(resources["nbgrader"]["student"])
        # before grading: the suites the judge will read (as grade-all keys its results)
        fingerprint = assignment_fingerprint(rubric, self.limits())
        components = fingerprint_components(rubric, self.limits())
        kit = nb.metadata.pop(KIT, None)  # ReleaseCells' (a submission's own was dropped when it was read)
        refused = kit.get("unreadable") if isinstance(kit, dict) else None
        if isinstance(refused, str) and refused:
            result = refused_result(rubric, f"{resources['nbgrader']['notebook']}.ipynb", refused)
        else:
            result = self.graded(nb, student, rubric, resources["nbgrader"]["notebook"], self.ahead(resources))
        self.keep_grade(resources, rubric, result, fingerprint, components)
        for grade_id in add_missing_test_cells(nb, release_cells(resources)):
            self.log.warning("%s: test cell %s was missing from the submission: added back with its verdict",
                             student, grade_id)
        for problem in write_verdicts(nb, result):
            self.log.warning("%s: %s: scored 0", student, problem)
        explain_not_run(nb)
        return nb, resources

    def require_sandbox(self) -> None:
        """No grade at all rather than a grade from an unisolated run: nbgrader reports the failure."""
        if not self.allow_unisolated and (refused := isolation_refused()):
            raise RuntimeError(f"this machine allows no sandbox ({refused}); set "
                               "c.SandboxedGrading.allow_unisolated = True to grade without one")

    def keep_grade(self, resources: dict[str, Any], rubric: Rubric, result: GradeResult, fingerprint: str,
                   components: dict[str, Any]) -> None:
        """Keeps the grade in the student's history and reports a regrade (autograder.nbgrader.regrades).  A
        history that cannot be written is logged, and grading goes on: the gradebook still gets the grade."""
        info = resources["nbgrader"]
        report = gradescope(result, cells_sha256=result.cells_sha256, assignment_fingerprint=fingerprint)
        report["extra_data"]["assignment_components"] = components
        root = Path(CourseDirectory(config=self.config).root)
        try:
            change = nbgrader_regrades.record(root, info["assignment"], info["student"], info["notebook"], report,
                                              suite_names(rubric), self.log.info)
        except OSError as exc:
            self.log.warning("%s: grade not kept in %s (%s: %s): its next regrade cannot say what changed",
                             display_name(info["student"]), display_name(str(
                                 nbgrader_regrades.assignment_history(root, info["assignment"]))),
                             type(exc).__name__, exc)
            return
        if change is not None and change.changed:
            self.log.warning("%s", nbgrader_regrades.change_line(change))
        elif change is not None:
            self.log.info("%s", nbgrader_regrades.unchanged_line(change))

    def ahead(self, resources: dict[str, Any]) -> GradeAhead | None:
        """This autograde run's grading ahead (started on its first notebook), if it has one."""
        available = cores()
        jobs = self.grade_ahead if self.grade_ahead >= 0 else (available if available >= 2 else 0)
        if jobs < 1 or (not self.allow_unisolated and isolation_refused()):
            return None  # unisolated: each notebook is refused in its turn, as below
        converter = getattr(self.parent, "parent", None)  # the exporter's: nbgrader's Autograde

        def reusable(student: str) -> bool:  # a result to reuse is likely: not worth grading ahead
            return any(result_path(Path(folder), student).is_file() for folder in self.reuse_results_from)
        info = resources["nbgrader"]
        return grade_ahead(converter, info["student"], info["assignment"], self.assignment or info["assignment"],
                           self.limits(), jobs, self.log.info, reusable)

    def graded(self, nb: NotebookNode, student: str, rubric: Rubric, notebook: str,
               ahead: GradeAhead | None = None) -> GradeResult:
        with tempfile.TemporaryDirectory(prefix="nbgrader-sandbox-") as tmp:
            path = Path(tmp) / f"{notebook}.ipynb"
            nbformat.write(grading_copy(nb), str(path))
            result = self.reused(path, student, rubric)
            if result is None and ahead is not None:
                with ahead.result(student) as stored:
                    result = None if stored is None else self.stored(stored, path, student, rubric)
                if result is not None:
                    self.log.info("%s graded: %s / %s, isolation %s (ahead, in parallel)", student, result.score,
                                  result.max_score, result.load.isolation)
            if result is None:
                self.require_sandbox()
                from autograder.grading.grade import grade_file  # torch and the judge: only when needed

                result = grade_file(path, rubric, self.limits())
                self.log.info("%s graded: %s / %s in %.1f s, isolation %s", student, result.score,
                              result.max_score, result.seconds, result.load.isolation)
        return result

    def reused(self, path: Path, student: str, rubric: Rubric) -> GradeResult | None:
        """The stored grade of exactly these cells against exactly this assignment, if a folder holds one."""
        if not self.reuse_results_from or not student or "/" in student or student.startswith("."):
            return None
        for folder in self.reuse_results_from:
            candidate = result_path(Path(folder), student)
            if candidate.is_file() and (result := self.stored(candidate, path, student, rubric)) is not None:
                self.log.info("%s reused: %s / %s from %s", student, result.score, result.max_score, candidate)
                return result
        return None

    def stored(self, candidate: Path, path: Path, student: str, rubric: Rubric) -> GradeResult | None:
        """The grade in `candidate` if it judged exactly the cells of `path` against exactly this assignment."""
        cells = file_cells_sha256(path, rubric)
        if not cells:
            return None
        # instructor-written, yet possibly half-copied or from another tool: anything wrong means grading
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
            extra = data["extra_data"]
            if extra.get("cells_sha256") != cells:
                self.log.info("%s: %s judged other cells: not used", student, candidate)
                return None
            if extra.get("assignment_fingerprint") != assignment_fingerprint(rubric, self.limits()):
                self.log.info("%s: %s was graded with a different version of the assignment: not used",
                              student, candidate)
                return None
            result = from_gradescope(data, rubric)
        except Exception as exc:  # a bad file is never a reason to stop grading
            self.log.warning("%s: ignored %s (%s: %s)", student, candidate, type(exc).__name__,
                             str(exc).split("\n", 1)[0][:200])
            return None
        result.cells_sha256 = cells
        return result
