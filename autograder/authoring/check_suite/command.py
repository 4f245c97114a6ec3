"""check-suite's command line: its flags, one run per assignment, the exit status."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from autograder.authoring.assignment import assignment_names
from autograder.authoring.catalogue import CatalogueError
from autograder.authoring.check_suite.grading import DEFAULT_WORKERS, CheckSuiteError, load_catalogue, run_catalogue
from autograder.authoring.check_suite.reports import (combined_share, format_margins, format_weakest, margins, summarise,
                                                      weakest_catches)
from autograder.authoring.check_suite.reruns import determinism, determinism_entries


def run(assignment: str, *, show_margins: bool = False, reruns: int = 0, workers: int = DEFAULT_WORKERS,
        json_out: Path | None = None, tables: list[dict[str, Any]] | None = None) -> int:
    try:
        if reruns:  # before the long part, so that a run that cannot do what it was asked stops at once
            determinism_entries(load_catalogue(assignment))
        started = time.monotonic()
        results = run_catalogue(assignment, workers=workers)
        seconds = time.monotonic() - started
        text, ok = summarise(assignment, results, seconds, workers, tables)
    except (CheckSuiteError, CatalogueError) as exc:
        print(f"python -m autograder check-suite: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    if show_margins:
        print("\nmargins (ratio = max |error| / allowed error of a comparison; < 1 passes):")
        print(format_margins(margins(assignment, results)))
        print("\nper part (a bug is caught by its largest ratio; the weakest such bug is the first to escape if "
              "tolerances grew):")
        print(format_weakest(weakest_catches(assignment, results)))
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if reruns:
        same, lines = determinism(assignment, reruns, workers=workers)
        print("\n" + "\n".join(lines))
        ok = ok and all(same.values())
    return 0 if ok else 1


HELP = "grade the catalogue of known mistakes and correct variants: the hidden suite's mutation score"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignment", nargs="?", help="assignment to check (default: every assignment)")
    parser.add_argument("--margins", action="store_true", help="print the tolerance margins per hidden test")
    parser.add_argument("--reruns", type=int, default=0, metavar="N",
                        help="also grade the assignment's determinism entries N times each through the CLI and "
                             "compare their results.json byte for byte")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="grading processes (default 2)")
    parser.add_argument("--json", type=Path, help="write every entry's grading result to this file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.check_suite", description="Grade an assignment's catalogue of known mistakes and correct variants: the hidden suite's mutation score.")
    add_arguments(parser)
    return run_from_arguments(parser.parse_args(argv))


def run_from_arguments(args: argparse.Namespace) -> int:
    names = [args.assignment] if args.assignment else assignment_names()
    if args.json and len(names) > 1:
        print("python -m autograder check-suite: error: --json needs one assignment", file=sys.stderr)
        return 2
    tables: list[dict[str, Any]] = []
    codes = [run(name, show_margins=args.margins, reruns=args.reruns, workers=max(args.workers, 1),
                 json_out=args.json, tables=tables) for name in names]
    if len(tables) > 1:
        print(f"\nfollow-through over all {len(tables)} catalogues: {100 * combined_share(tables):.1f} % of the "
              "points one-bug submissions lose fall outside the bug's own part")
    return max(codes, default=0)
