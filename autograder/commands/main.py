"""python -m autograder: the command line for course CI and instructors."""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

from autograder import platforms
from autograder.commands import UsageError
from autograder.model.interrupts import raise_terminated

USAGE_ERROR = 2  # a stopped run exits with JudgingInterrupted.exit_code: 130 (SIGINT), 143 (SIGTERM) or 1


# each verb: its name, and the module that provides its HELP, add_arguments(parser) and the function named that runs
# it (export's platforms are below).  A module is imported only when its verb is chosen (or for the full help): a
# cold `grade` starts its zygote sooner for not importing the authoring tools first.
VERBS = {
    "grade": ("autograder.commands.grade", "run"),
    "grade-all": ("autograder.commands.grade_all", "run"),
    "serve": ("autograder.commands.serve", "run"),
    "lms": ("autograder.commands.lms", "run"),
    "check-suite": ("autograder.authoring.check_suite.command", "run_from_arguments"),
    "similarity": ("autograder.authoring.similarity", "run_from_arguments"),
    "add-assignment": ("autograder.authoring.add_assignment", "run"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR)


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The command line; given the verb `chosen`, only that verb's module is imported (the others are listed by
    name alone, which is all an error about them shows)."""
    parser = _Parser(prog="python -m autograder", description=__doc__)
    verbs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (module_name, run) in VERBS.items():
        if chosen not in (None, name):
            verbs.add_parser(name)
            continue
        module = importlib.import_module(module_name)
        verb = verbs.add_parser(name, help=module.HELP)
        module.add_arguments(verb)
        verb.set_defaults(run=getattr(module, run))
    export = verbs.add_parser("export", help="package the grader for a grading platform")
    if chosen not in (None, "export"):
        return parser
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
        chosen = argv[0] if argv and argv[0] in (*VERBS, "export") else None
        args = build_parser(chosen).parse_args(argv)
        args.argv = argv  # what the warm service is sent
        return args.run(args)
    except UsageError as exc:  # the one place a usage error becomes its lines and exit status 2
        for line in exc.lines:
            print(f"python -m autograder: error: {line}", file=sys.stderr)
        return USAGE_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)
