"""`python -m autograder similarity FOLDER -o PAGE`: which submissions of a class resemble each other in the
code their students wrote, and which hold torch's own implementation of a graded operation, as one HTML page
for review (autograder/judging/similarity.py compares, autograder/reports/similarity.py draws the page).

Submissions are found as grade-all finds them and read as grading reads them; nothing runs, no sandbox is
needed, and no grade changes: it can be run before, after or without grading, with another --threshold.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from autograder.authoring.assignment import Assignment, chosen_assignment, source_text
from autograder.host.intake import UnreadableSubmission, shown_name
from autograder.host.source_cells import read_cells
from autograder.grading.rubric import RubricError, load_rubric
from autograder.judging.similarity import REVIEW_SHARE, Report, report

HELP = "rank the pairs of submissions whose students' own code is alike, side by side (an HTML page for review)"


def release_code(assignment: str) -> list[str]:
    """Every code cell of the release notebook, as handed out: imports, stubs, check cells, plots."""
    notebook = json.loads(Assignment(assignment).release_notebook.read_text(encoding="utf-8"))
    return [source_text(c) for c in notebook["cells"] if c.get("cell_type") == "code"]


def class_report(folder: Path, assignment: str, threshold: float = REVIEW_SHARE) -> Report:
    """The report on the submissions in `folder`, found as grade-all finds them."""
    from autograder.grading.batch import discover

    rubric = load_rubric(assignment)
    submissions: list[tuple[str, Sequence[str] | str]] = []
    for entry in discover(folder, assignment):
        try:
            submissions.append((entry.student, read_cells(entry.path, rubric.skip_when_unchanged, entry.root, rubric.release_text)))
        except UnreadableSubmission as exc:
            submissions.append((entry.student, str(exc)))
    return report(assignment, submissions, release_code(assignment), rubric.torch_implementations, threshold)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="the submissions, as grade-all reads them")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the HTML page to write")
    parser.add_argument("--assignment", help="the assignment (default: $AUTOGRADER_ASSIGNMENT, or the checkout's only one)")
    parser.add_argument("--threshold", type=float, default=REVIEW_SHARE,
                        help=f"score from which a pair is to review, between 0 and 1 (default {REVIEW_SHARE})")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the ranking as JSON to FILE")


def run_from_arguments(args: argparse.Namespace) -> int:
    from autograder.reports.similarity import page  # with matplotlib, through reports.html
    from autograder.grading.results_json import write_text_atomic

    if not 0 < args.threshold <= 1:
        print("python -m autograder similarity: error: --threshold is a share, above 0 and at most 1", file=sys.stderr)
        return 2
    if not args.folder.is_dir():
        print(f"python -m autograder similarity: error: {shown_name(str(args.folder))} is not a folder", file=sys.stderr)
        return 2
    try:
        found = class_report(args.folder, chosen_assignment(args.assignment), args.threshold)
    except RubricError as exc:
        print(f"python -m autograder similarity: error: {exc}", file=sys.stderr)
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.output, page(found))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.json, json.dumps(found.as_json(), indent=1) + "\n")
    print(f"similarity: {len(found.submissions)} submissions, {len(found.pairs)} pairs sharing code, "
          f"{len(found.to_review)} pairs to review; wrote {args.output}", file=sys.stderr)
    return 0
