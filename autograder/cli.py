"""python -m autograder: the command line for course CI and instructors."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from autograder import lms, platforms, service
from autograder.authoring import check_suite, similarity
from autograder.authoring.assignment import chosen_assignment
from autograder.interrupts import JudgingInterrupted, interruption, raise_terminated
from autograder.reports import formats
from autograder.judging.rubric import RubricError, load_rubric
from autograder.model import limits
from autograder.host.sandbox import Zygote, isolation_refused
from autograder.result import display_name

USAGE_ERROR = 2  # a stopped run exits with JudgingInterrupted.exit_code: 130 (SIGINT), 143 (SIGTERM) or 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR)


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--assignment", help="assignment to grade against (default: $AUTOGRADER_ASSIGNMENT, or "
                                             "the checkout's only assignment)")
    limits.add_flags(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    grade = commands.add_parser("grade", help="grade one .ipynb or .py submission")
    grade.add_argument("submission", type=Path)
    grade.add_argument("-o", "--output", type=Path, required=True, help="results.json to write")
    _add_limit_flags(grade)
    formats.add_flags(grade)
    grade.add_argument("--html", type=formats.output_file, metavar="FILE",
                       help="also write the student's feedback page (self-contained HTML with pictures) to FILE")
    grade_all = commands.add_parser("grade-all", help="grade a folder of submissions")
    grade_all.add_argument("folder", type=Path)
    grade_all.add_argument("-o", "--output", type=Path, required=True, help="folder for results and grades.csv")
    grade_all.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded side by side (default 1)")
    from autograder.batch import DUPLICATE_RULES, DUPLICATES_HELP

    grade_all.add_argument("--duplicates", choices=DUPLICATE_RULES, default="refuse", help=DUPLICATES_HELP)
    grade_all.add_argument("--only", nargs="+", metavar="STUDENT",
                           help="regrade exactly these students (as grades.csv names them), even if their stored "
                                "results are current; everyone else's result is kept as it is, and grades.csv "
                                "is rewritten for the whole class")
    grade_all.add_argument("--scheduler", metavar="ADDRESS",
                           help="grade on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786)")
    _add_limit_flags(grade_all)
    formats.add_flags(grade_all, batch=True)
    grade_all.add_argument("--html", type=Path, metavar="DIR",
                           help="also write feedback pages to DIR: students/<student>.html and the class's index.html")
    serve = commands.add_parser("serve", help="keep a warm grader running: `grade` commands run with "
                                              f"{service.VARIABLE}=SOCKET are graded by it")
    serve.add_argument("--socket", type=Path, default=os.environ.get(service.VARIABLE) or None,
                       help=f"where to listen, in a folder only you may enter (default: ${service.VARIABLE})")
    serve.add_argument("--assignment", action="append", default=[], dest="assignments", metavar="ASSIGNMENT",
                       help="collect this assignment's suites at start (repeatable; others are collected when "
                            "first graded)")
    check = commands.add_parser("check-suite", help="grade the catalogue of known mistakes and correct variants: "
                                                    "the hidden suite's mutation score")
    check_suite.add_arguments(check)
    similarity.add_arguments(commands.add_parser("similarity", help="rank the pairs of submissions whose students' own "
                                                 "code is alike, side by side (an HTML page for review)"))
    lms.add_arguments(commands.add_parser("lms", help="grade-all's results as a Canvas or Moodle grade import (CSV)"))
    export = commands.add_parser("export", help="package the grader for a grading platform")
    targets = export.add_subparsers(dest="platform", required=True, parser_class=_Parser)
    for name in platforms.EXPORTERS:
        module = platforms.exporter(name)
        module.add_arguments(targets.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    # SIGTERM stops grading the way Ctrl-C does: the sandbox is closed and no grade is written
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stopped(exc: BaseException, consequence: str) -> int:
    """One line for a run stopped before its grade was complete; the exit status says why."""
    stopped = exc if isinstance(exc, JudgingInterrupted) else interruption(exc)
    print(f"python -m autograder: {stopped}; {consequence}", file=sys.stderr)
    return stopped.exit_code



def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "grade" and (address := os.environ.get(service.VARIABLE)):
        code = service.grade_through(address, list(sys.argv[1:] if argv is None else argv))
        if code is not None:
            return code
    if args.command == "check-suite":
        return check_suite.run_from_arguments(args)
    if args.command == "similarity":
        return similarity.run_from_arguments(args)
    if args.command == "lms":
        return lms.run(args)
    if args.command == "export":
        return platforms.exporter(args.platform).export(args)
    try:
        rubric = load_rubric(chosen_assignment(args.assignment))
    except RubricError as exc:
        print(f"python -m autograder: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    # on a cluster the workers grade, and each checks its own sandbox
    if not args.allow_unisolated and not getattr(args, "scheduler", None) and (refused := isolation_refused()):
        print(f"python -m autograder: error: this machine allows no sandbox ({refused}); "
              "--allow-unisolated grades without one", file=sys.stderr)
        return USAGE_ERROR
    if args.command == "grade" or (args.jobs == 1 and not args.scheduler):
        # this process grades: its zygote imports torch while this process imports the judge
        Zygote.shared()
    if args.command == "grade":
        return _grade(args, rubric)
    return _grade_all(args, rubric)


def _serve(args: argparse.Namespace) -> int:
    if args.socket is None:
        print(f"python -m autograder: error: serve needs --socket or ${service.VARIABLE}", file=sys.stderr)
        return USAGE_ERROR
    os.environ.pop(service.VARIABLE, None)  # the service grades by itself, never through itself
    try:
        for name in args.assignments:
            load_rubric(name)
        return service.serve(args.socket, args.assignments, lambda line: print(line, file=sys.stderr, flush=True),
                             main)
    except (RubricError, service.ServiceError) as exc:
        print(f"python -m autograder: error: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _grade(args: argparse.Namespace, rubric) -> int:
    from autograder.batch import grade_report
    from autograder.reports.results import summary, write_json_atomic, write_text_atomic

    if not os.path.lexists(args.submission):  # anything else there is graded: a link or a FIFO scores 0, saying so
        print(f"python -m autograder: error: {display_name(str(args.submission))}: no such file", file=sys.stderr)
        return USAGE_ERROR
    outputs = {"-o": args.output, **{fmt.flag: path for fmt, path in formats.requested(args)},
               **({"--html": args.html} if args.html else {})}
    if clash := formats.clash(outputs):
        print(f"python -m autograder: error: {clash}", file=sys.stderr)
        return USAGE_ERROR
    try:
        result, report = grade_report(args.submission, rubric, limits.from_flags(args))
        write_json_atomic(args.output, report)  # atomic: a signal during the write leaves no file
        formats.write(args, result)
        if args.html:
            from autograder.reports import html

            write_text_atomic(args.html, html.student_page(result))
    except (JudgingInterrupted, KeyboardInterrupt) as exc:
        return _stopped(exc, f"no grade written to {args.output}")
    print(summary(result))
    return 0


def _grade_all(args: argparse.Namespace, rubric) -> int:
    from autograder.batch import DuplicateSubmissions, UnknownStudents, grade_all, stored_results
    from autograder.reports.results import NotAResult

    if not args.folder.is_dir():
        print(f"python -m autograder: error: {display_name(str(args.folder))}: no such folder", file=sys.stderr)
        return USAGE_ERROR
    if args.output.exists() and not args.output.is_dir():
        print(f"python -m autograder: error: {args.output}: exists and is not a folder", file=sys.stderr)
        return USAGE_ERROR
    if args.html and args.html.exists() and not args.html.is_dir():
        print(f"python -m autograder: error: {args.html}: exists and is not a folder", file=sys.stderr)
        return USAGE_ERROR
    for fmt, path in formats.requested(args):
        if problem := formats.unwritable(path, created=args.output):
            print(f"python -m autograder: error: argument {fmt.flag}: {problem}", file=sys.stderr)
            return USAGE_ERROR
    if args.jobs < 1:
        print("python -m autograder: error: --jobs must be at least 1", file=sys.stderr)
        return USAGE_ERROR
    if args.scheduler and args.jobs != 1:
        print("python -m autograder: error: --jobs is for this machine; with --scheduler, workers grade "
              "(dask worker --nworkers N)", file=sys.stderr)
        return USAGE_ERROR
    try:
        if args.scheduler:
            from autograder import cluster

            try:
                entries = cluster.grade_all(args.folder, args.output, rubric, limits.from_flags(args),
                                            args.scheduler, duplicates=args.duplicates, only=args.only)
            except cluster.ClusterUnusable as exc:
                print(f"python -m autograder: error: {exc}", file=sys.stderr)
                return USAGE_ERROR
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
        for line in exc.lines:
            print(f"python -m autograder: error: {line}", file=sys.stderr)
        return USAGE_ERROR
    except UnknownStudents as exc:  # found before anything was graded
        print(f"python -m autograder: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except NotAResult as exc:  # a result --only kept, which no report can read: every result stays as it is
        print(f"python -m autograder: error: {display_name(str(args.output))}/{exc}; grade-all without --only "
              "grades that submission again", file=sys.stderr)
        return USAGE_ERROR
    except (JudgingInterrupted, KeyboardInterrupt) as exc:
        return _stopped(exc, f"nothing recorded for the submissions in progress; the results in {args.output} "
                             "are kept, and a rerun grades the rest")
    print((args.output / "grades.csv").read_text(encoding="utf-8"), end="")
    return 0
