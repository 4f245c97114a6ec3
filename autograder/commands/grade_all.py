"""`python -m autograder grade-all FOLDER -o OUT`: a class, here (`--jobs N`) or on a Dask cluster."""
from __future__ import annotations

import argparse
from pathlib import Path

from autograder.commands import UsageError
from autograder.commands.common import add_assignment_and_limit_flags, require_sandbox, rubric_of, stopped
from autograder.grading.batch import (DUPLICATE_RULES, DUPLICATES_HELP, DuplicateSubmissions, UnknownStudents,
                                     grade_all, stored_results)
from autograder.grading.result import display_name
from autograder.grading.results_json import NotAResult
from autograder.host.sandbox import Zygote
from autograder.model import limits
from autograder.model.interrupts import JudgingInterrupted
from autograder.reports import formats

HELP = "grade a folder of submissions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True, help="folder for results and grades.csv")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded side by side (default 1)")
    parser.add_argument("--duplicates", choices=DUPLICATE_RULES, default="refuse", help=DUPLICATES_HELP)
    parser.add_argument("--only", nargs="+", metavar="STUDENT",
                        help="regrade exactly these students (as grades.csv names them), even if their stored "
                             "results are current; everyone else's result is kept as it is, and grades.csv "
                             "is rewritten for the whole class")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786)")
    add_assignment_and_limit_flags(parser)
    formats.add_flags(parser, batch=True)
    parser.add_argument("--html", type=Path, metavar="DIR",
                        help="also write feedback pages to DIR: students/<student>.html and the class's index.html")


def _check_arguments(args: argparse.Namespace) -> None:
    if not args.folder.is_dir():
        raise UsageError(f"{display_name(str(args.folder))}: no such folder")
    if args.output.exists() and not args.output.is_dir():
        raise UsageError(f"{args.output}: exists and is not a folder")
    if args.html and args.html.exists() and not args.html.is_dir():
        raise UsageError(f"{args.html}: exists and is not a folder")
    for fmt, path in formats.requested(args):
        if problem := formats.unwritable(path, created=args.output):
            raise UsageError(f"argument {fmt.flag}: {problem}")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.scheduler and args.jobs != 1:
        raise UsageError("--jobs is for this machine; with --scheduler, workers grade (dask worker --nworkers N)")


def run(args: argparse.Namespace) -> int:
    rubric = rubric_of(args)
    if not args.scheduler:  # on a cluster the workers grade, and each checks its own sandbox
        require_sandbox(args)
    if args.jobs == 1 and not args.scheduler:
        Zygote.shared()  # this process grades: its zygote imports torch while this process imports the judge
    _check_arguments(args)
    try:
        if args.scheduler:
            from autograder.grading import cluster

            try:
                entries = cluster.grade_all(args.folder, args.output, rubric, limits.from_flags(args),
                                            args.scheduler, duplicates=args.duplicates, only=args.only)
            except cluster.ClusterUnusable as exc:
                raise UsageError(str(exc)) from None
        else:
            entries = grade_all(args.folder, args.output, rubric, limits.from_flags(args), jobs=args.jobs,
                                duplicates=args.duplicates, only=args.only)
        if formats.requested(args) or args.html:
            results = list(stored_results(args.output, entries, rubric))  # read once, written in every form asked
            formats.write_batch(args, rubric.assignment, results)
            if args.html:
                from autograder.reports import html

                html.write_class(args.html, rubric.assignment, results)
    except DuplicateSubmissions as exc:  # found before anything was graded
        raise UsageError(*exc.lines) from None
    except UnknownStudents as exc:  # found before anything was graded
        raise UsageError(str(exc)) from None
    except NotAResult as exc:  # a result --only kept, which no report can read: every result stays as it is
        raise UsageError(f"{display_name(str(args.output))}/{exc}; grade-all without --only grades that "
                         "submission again") from None
    except (JudgingInterrupted, KeyboardInterrupt) as exc:
        return stopped(exc, f"nothing recorded for the submissions in progress; the results in {args.output} "
                            "are kept, and a rerun grades the rest")
    print((args.output / "grades.csv").read_text(encoding="utf-8"), end="")
    return 0
