"""`python -m autograder grade FILE -o results.json`: one submission, graded here or by the warm service."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from autograder.commands import UsageError, service_client
from autograder.commands.common import add_assignment_and_limit_flags, require_sandbox, rubric_of, stopped
from autograder.grading.batch import grade_report
from autograder.grading.result import display_name
from autograder.grading.results_json import summary, write_json_atomic, write_text_atomic
from autograder.host.sandbox import Zygote
from autograder.model import limits
from autograder.model.interrupts import JudgingInterrupted
from autograder.reports import formats

HELP = "grade one .ipynb or .py submission"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submission", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True, help="results.json to write")
    add_assignment_and_limit_flags(parser)
    formats.add_flags(parser)
    parser.add_argument("--html", type=formats.output_file, metavar="FILE",
                        help="also write the student's feedback page (self-contained HTML with pictures) to FILE")


def run(args: argparse.Namespace) -> int:
    if address := os.environ.get(service_client.VARIABLE):
        code = service_client.grade_through(address, args.argv)
        if code is not None:
            return code
    rubric = rubric_of(args)
    require_sandbox(args)
    Zygote.shared()  # its zygote imports torch while this process imports the judge
    if not os.path.lexists(args.submission):  # anything else there is graded: a link or a FIFO scores 0, saying so
        raise UsageError(f"{display_name(str(args.submission))}: no such file")
    outputs = {"-o": args.output, **{fmt.flag: path for fmt, path in formats.requested(args)},
               **({"--html": args.html} if args.html else {})}
    if clash := formats.clash(outputs):
        raise UsageError(clash)
    try:
        result, report = grade_report(args.submission, rubric, limits.from_flags(args))
        write_json_atomic(args.output, report)  # atomic: a signal during the write leaves no file
        formats.write(args, result)
        if args.html:
            from autograder.reports import html

            write_text_atomic(args.html, html.student_page(result))
    except (JudgingInterrupted, KeyboardInterrupt) as exc:
        return stopped(exc, f"no grade written to {args.output}")
    print(summary(result))
    return 0
