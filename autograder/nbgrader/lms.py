"""nbgrader's gradebook into the LMS, late penalties and per-student extensions.

`LmsExport`, an nbgrader export plugin, writes the gradebook as Canvas's or Moodle's grade import (the formats:
autograder.reports.lms):

    nbgrader export --exporter=autograder.nbgrader.lms.LmsExport --LmsExport.lms=canvas --to grades-canvas.csv

Every student of the gradebook gets a row in every assignment exported (--assignment limits them): the total
is nbgrader's score less its late penalty (as nbgrader's own CSV export computes it; 0 when nothing was
submitted), and each part is the grade of the test cell whose grade_id is that rubric part (the kit's
release notebooks name them so), before any penalty.  An assignment the kit has no rubric for gets a column
per grade cell.

`PerHourPenalty` is a late-submission plugin for nbgrader's AssignLatePenalties (run by `autograde` after
SaveAutoGrades, SandboxedGrading's verdicts included: see nbgrader_config.py):

    c.AssignLatePenalties.plugin_class = "autograder.nbgrader.lms.PerHourPenalty"
    c.PerHourPenalty.percent_per_hour = 10     # of the notebook's score, per hour or part of one
    c.PerHourPenalty.grace_minutes = 5

nbgrader computes every penalty afresh from the notebook's score before penalty, so a regrade
(`autograde --force`) gives the same penalty, never a second one.

Per-student extensions are nbgrader's own: SubmittedAssignment.extension, which moves that student's due date
(SubmittedAssignment.duedate, hence total_seconds_late).  nbgrader 0.9 offers no command for it, only
Gradebook.grant_extension, which needs the submission's row; `grant_extension` below makes the row first:

    python -m autograder.nbgrader.lms extension ASSIGNMENT STUDENT --hours 48 [--db sqlite:///gradebook.db]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin, LateSubmissionPlugin
from traitlets import Bool, Enum, Float, Unicode

from autograder.reports import lms as formats


def _rubric_parts(assignment: str) -> list[str] | None:
    """The rubric's part names in order, or None when the kit has no rubric for `assignment`."""
    from autograder.grading.rubric import RubricError, load_rubric

    try:
        return [p.name for p in load_rubric(assignment).parts]
    except (RubricError, OSError, ValueError):
        return None


def _grade_cells(gradebook: Gradebook, assignment) -> list[tuple[str, float]]:
    """(grade_id, points) of the assignment's grade cells, notebook by notebook, in their order."""
    cells = []
    for notebook in assignment.notebooks:
        several = len(assignment.notebooks) > 1
        for cell in notebook.grade_cells:
            cells.append((f"{notebook.name}/{cell.name}" if several else cell.name, float(cell.max_score)))
    return cells


def assignment_grades(gradebook: Gradebook, name: str, students: list[str] | None = None,
                      title: str = "", lms_id: str = "") -> formats.AssignmentGrades:
    """One assignment's grades as the LMS formats take them."""
    assignment = gradebook.find_assignment(name)
    cells = dict(_grade_cells(gradebook, assignment))
    parts = _rubric_parts(name)
    part_points = ([(p, cells[p]) for p in parts if p in cells] if parts is not None else list(cells.items()))
    rows = []
    for student in gradebook.students:
        if students and student.id not in students:
            continue
        try:
            submission = gradebook.find_submission(name, student.id)
        except MissingEntry:  # nothing handed in: 0, as nbgrader's own export
            total, by_part = 0.0, {p: 0.0 for p, _ in part_points}
        else:
            total = max(0.0, float(submission.score) - float(submission.late_submission_penalty or 0.0))
            scored = {}
            for notebook in submission.notebooks:
                several = len(submission.notebooks) > 1
                for grade in notebook.grades:
                    scored[f"{notebook.name}/{grade.name}" if several else grade.name] = float(grade.score or 0.0)
            by_part = {p: scored.get(p, 0.0) for p, _ in part_points}
        full_name = " ".join(n for n in (student.first_name, student.last_name) if n)
        rows.append(formats.GradeRow(student=student.id, total=total, parts=by_part, name=full_name,
                                 email=student.email or "", lms_user_id=student.lms_user_id or ""))
    return formats.AssignmentGrades(name=title or name, max_total=float(assignment.max_score), parts=part_points,
                                rows=rows, lms_id=lms_id)


class LmsExport(ExportPlugin):
    """The gradebook as Canvas's or Moodle's grade-import CSV (--to FILE, default grades-<lms>.csv)."""

    lms = Enum(formats.FORMATS, default_value="canvas", help="which LMS's import format").tag(config=True)
    id_column = Unicode("", help="where the student id goes: Canvas 'SIS Login ID' (default) or 'SIS User ID'; "
                                 "Moodle 'username' (default), 'email' (nbgrader's email of the student) or "
                                 "'idnumber'").tag(config=True)
    parts = Bool(True, help="a column per rubric part besides the total").tag(config=True)
    canvas_id = Unicode("", help="Canvas: the id of the assignment to update (one assignment exported); "
                                 "without it the import creates an assignment named like nbgrader's"
                        ).tag(config=True)

    def export(self, gradebook: Gradebook) -> None:
        from autograder.grading.results_json import write_text_atomic

        dest = self.to or f"grades-{self.lms}.csv"
        names = [str(a) for a in self.assignment] or [a.name for a in gradebook.assignments]
        if self.canvas_id and len(names) != 1:
            raise ValueError("LmsExport.canvas_id names one assignment: export one (--assignment NAME)")
        students = [str(s) for s in self.student] or None
        grades = [assignment_grades(gradebook, name, students, lms_id=self.canvas_id) for name in names]
        write_text_atomic(Path(dest).absolute(),
                          formats.render(self.lms, grades, id_column=self.id_column, with_parts=self.parts))
        self.log.info("Exported %d assignment(s) for %s to %s", len(grades), self.lms, dest)


class PerHourPenalty(LateSubmissionPlugin):
    """A late notebook loses percent_per_hour of its score for each hour, or part of one, past the due date
    (the student's extension included) beyond grace_minutes; at most the whole score."""

    percent_per_hour = Float(10.0, help="percent of the notebook's score lost per hour late").tag(config=True)
    grace_minutes = Float(0.0, help="minutes late that cost nothing").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        if total_seconds_late <= self.grace_minutes * 60:
            return None
        hours = math.ceil(total_seconds_late / 3600)
        penalty = min(float(score), float(score) * self.percent_per_hour / 100 * hours)
        self.log.info("%s: %g hour(s) late, penalty %g of %g", student_id, hours, penalty, score)
        return penalty


def grant_extension(db_url: str, assignment: str, student: str, *, course_id: str = "default_course",
                    minutes: float = 0, hours: float = 0, days: float = 0) -> None:
    """Moves `student`'s due date for `assignment` by the time given (all zero: no extension), with nbgrader's
    own Gradebook.grant_extension; the student and their submission's row are made if they are not there yet
    (autograde keeps the extension: it only updates the submission's timestamp)."""
    with Gradebook(db_url, course_id) as gradebook:
        gradebook.find_assignment(assignment)  # MissingEntry: not in the gradebook (generate_assignment adds it)
        gradebook.update_or_create_student(student)
        try:
            gradebook.find_submission(assignment, student)
        except MissingEntry:
            gradebook.add_submission(assignment, student)
        gradebook.grant_extension(assignment, student, minutes=minutes, hours=hours, days=days)


def _default_db() -> str:
    from autograder.model.course import course_root

    # nbgrader's default: the gradebook in the course root (the kit's checkout, when it is the course)
    return os.environ.get("AUTOGRADER_DB_URL", f"sqlite:///{course_root() / 'gradebook.db'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.nbgrader.lms")
    commands = parser.add_subparsers(dest="command", required=True)
    extension = commands.add_parser("extension", help="give a student an extension (all zero: remove it)")
    extension.add_argument("assignment")
    extension.add_argument("student")
    for unit in ("minutes", "hours", "days"):
        extension.add_argument(f"--{unit}", type=float, default=0)
    extension.add_argument("--db", default=_default_db(), help="the gradebook (default: $AUTOGRADER_DB_URL, "
                                                               "else the course's gradebook.db)")
    extension.add_argument("--course-id", default=os.environ.get("AUTOGRADER_COURSE_ID", "transformer-blocks"))
    args = parser.parse_args(argv)
    try:
        grant_extension(args.db, args.assignment, args.student, course_id=args.course_id, minutes=args.minutes,
                        hours=args.hours, days=args.days)
    except MissingEntry as exc:
        print(f"python -m autograder.nbgrader.lms: error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.student}: extension of {args.days:g} d {args.hours:g} h {args.minutes:g} min on {args.assignment}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
