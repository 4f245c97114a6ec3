"""python -m autograder: the command line for course CI and instructors."""
from __future__ import annotations

import argparse
import signal
import sys

from autograder import platforms
from autograder.authoring import check_suite, similarity
from autograder.commands import UsageError, grade, grade_all, lms, serve
from autograder.model.interrupts import raise_terminated

USAGE_ERROR = 2  # a stopped run exits with JudgingInterrupted.exit_code: 130 (SIGINT), 143 (SIGTERM) or 1


# each verb: its name, its help, what adds its arguments, what runs it (export's platforms are below)
VERBS = (
    ("grade", grade.HELP, grade.add_arguments, grade.run),
    ("grade-all", grade_all.HELP, grade_all.add_arguments, grade_all.run),
    ("serve", serve.HELP, serve.add_arguments, serve.run),
    ("lms", lms.HELP, lms.add_arguments, lms.run),
    ("check-suite", "grade the catalogue of known mistakes and correct variants: the hidden suite's mutation score",
     check_suite.add_arguments, check_suite.run_from_arguments),
    ("similarity", "rank the pairs of submissions whose students' own code is alike, side by side (an HTML page "
                   "for review)", similarity.add_arguments, similarity.run_from_arguments),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m autograder", description=__doc__)
    verbs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text, add_arguments, run in VERBS:
        verb = verbs.add_parser(name, help=help_text)
        add_arguments(verb)
        verb.set_defaults(run=run)
    export = verbs.add_parser("export", help="package the grader for a grading platform")
    targets = export.add_subparsers(dest="platform", required=True, parser_class=_Parser)
    for name in platforms.EXPORTERS:
        module = platforms.exporter(name)
        target = targets.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(target)
        target.set_defaults(run=module.export)
    return parser


def main(argv: list[str] | None = None) -> int:
    # SIGTERM stops grading the way Ctrl-C does: the sandbox is closed and no grade is written
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(argv)
        args.argv = argv  # what the warm service is sent
        return args.run(args)
    except UsageError as exc:  # the one place a usage error becomes its lines and exit status 2
        for line in exc.lines:
            print(f"python -m autograder: error: {line}", file=sys.stderr)
        return USAGE_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)
