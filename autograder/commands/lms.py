"""`python -m autograder lms RESULTS --format canvas|moodle -o FILE`: grade-all's results as an LMS's grade import
(the formats: autograder.reports.lms).

The students and the order of the parts are grades.csv's (grade-all writes it last, from every result); each
student's scores and each part's points are that student's RESULTS/<student>.json.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from autograder.commands import UsageError
from autograder.grading.batch import result_path
from autograder.grading.rubric import Rubric, RubricError, load_rubric
from autograder.reports import lms
from autograder.grading.results_json import NotAResult, read_result, rounded, write_text_atomic

HELP = "grade-all's results as a Canvas or Moodle grade import (CSV)"


class NotResults(ValueError):
    """The folder holds no finished grade-all run."""


def from_results_folder(folder: Path, *, title: str = "", lms_id: str = "",
                        part_ids: dict[str, str] | None = None) -> lms.AssignmentGrades:
    """The grades of a grade-all output folder.  `title` is the LMS column's name (default: the assignment)."""
    grades_csv = folder / "grades.csv"
    try:
        with grades_csv.open(newline="", encoding="utf-8") as handle:
            table = list(csv.reader(handle))
    except OSError:
        raise NotResults(f"{folder}: no grades.csv (is it grade-all's output folder, and did the run finish?)")
    if not table or table[0][:3] != ["student", "score", "max_score"]:
        raise NotResults(f"{grades_csv}: not grade-all's grades.csv")
    rows, rubric = [], None
    for line in table[1:]:
        student, path = _result_file(folder, line[0])
        rubric = rubric or _rubric_of(path)
        try:
            result = read_result(path, rubric)  # the one reader of stored results, as every report reads them
        except NotAResult as exc:
            raise NotResults(f"{folder}/{exc} (not a result of grade-all for {rubric.assignment})") from None
        rows.append(lms.GradeRow(student=student, total=result.score,
                                 parts={p.part.name: rounded(p.score) for p in result.parts}))
    if rubric is None:
        raise NotResults(f"{grades_csv}: no students")
    if table[0][3:] != [p.name for p in rubric.parts]:
        raise NotResults(f"{grades_csv}: its parts are not {rubric.assignment}'s")
    return lms.AssignmentGrades(name=title or rubric.assignment, max_total=rubric.max_score,
                                parts=[(p.name, p.points) for p in rubric.parts], rows=rows, lms_id=lms_id,
                                part_ids=part_ids or {})


def _rubric_of(path: Path) -> Rubric:
    """The rubric of the assignment a stored result names."""
    try:
        return load_rubric(json.loads(path.read_text(encoding="utf-8"))["extra_data"]["assignment"])
    except (OSError, ValueError, KeyError, TypeError, RubricError) as exc:
        raise NotResults(f"{path}: not a result of grade-all ({type(exc).__name__}: {exc})") from None


def _result_file(folder: Path, cell: str) -> tuple[str, Path]:
    """The student a grades.csv cell names, and their result: a cell grades.csv quoted against formulas
    (`'=x` for the student =x) names the student without the quote, if there is one."""
    if cell.startswith("'") and (path := result_path(folder, cell[1:])).exists():
        return cell[1:], path
    return cell, result_path(folder, cell)


def _id_pair(text: str) -> tuple[str, str]:
    part, sep, number = text.partition("=")
    if not sep or not part or not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not PART=ID (ID: the Canvas assignment's number)")
    return part, number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="grade-all's output folder (its -o)")
    parser.add_argument("--format", required=True, choices=lms.FORMATS, dest="lms_format")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the CSV file to write")
    parser.add_argument("--title", default="", help="the LMS assignment's name (default: the kit's assignment)")
    parser.add_argument("--canvas-id", default="", metavar="ID",
                        help="Canvas: the id of the assignment to update (its column becomes 'TITLE (ID)'); "
                             "without it, the import creates an assignment named TITLE")
    parser.add_argument("--canvas-part-id", type=_id_pair, action="append", default=[], metavar="PART=ID",
                        help="Canvas: the same for a part's column (repeatable)")
    parser.add_argument("--id-column", default="",
                        choices=[*lms.CANVAS_ID_COLUMNS, *lms.MOODLE_ID_COLUMNS],
                        help="where the student id goes: Canvas 'SIS Login ID' (default) or 'SIS User ID'; "
                             "Moodle username (default) or idnumber")
    parser.add_argument("--no-parts", dest="with_parts", action="store_false",
                        help="the total only, no column per rubric part")


def run(args: argparse.Namespace) -> int:
    allowed = lms.CANVAS_ID_COLUMNS if args.lms_format == "canvas" else ("username", "idnumber")
    if args.id_column and args.id_column not in allowed:
        raise UsageError(f"--id-column {args.id_column!r} is not one of {', '.join(allowed)} for {args.lms_format}")
    if args.canvas_id and not args.canvas_id.isdigit():
        raise UsageError(f"--canvas-id {args.canvas_id!r} is not a number")
    try:
        grades = from_results_folder(args.results, title=args.title, lms_id=args.canvas_id,
                                     part_ids=dict(args.canvas_part_id))
    except NotResults as exc:
        raise UsageError(str(exc)) from None
    if unknown := set(dict(args.canvas_part_id)) - {p for p, _ in grades.parts}:
        raise UsageError(f"--canvas-part-id: no part {', '.join(sorted(unknown))}")
    text = lms.render(args.lms_format, [grades], id_column=args.id_column, with_parts=args.with_parts)
    write_text_atomic(args.output, text)
    print(f"{args.output}: {len(grades.rows)} students, {args.lms_format} grade import", file=sys.stderr)
    return 0
