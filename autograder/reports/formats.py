"""Result formats for other platforms, written next to results.json from the same GradeResult, so that their
scores agree with it by construction.

Each format is one module with `write(result, path)`; one that `grade-all` also writes, a single file for the
whole class, adds `write_batch(assignment, results, path)`, results being (student, GradeResult) pairs.
Adding a format is that module plus one entry in FORMATS: the command line's flags come from here.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Sequence

from autograder.reports import github_classroom, junit, prairielearn
from autograder.grading.result import GradeResult


@dataclass(frozen=True)
class Format:
    flag: str
    writer: ModuleType
    help: str
    batch: bool = False  # grade-all writes it too: one file for the whole class

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


FORMATS = (
    Format("--junit", junit, "also write JUnit XML to FILE: one testcase per hidden check, "
           "points as properties (grade-all: one testsuite per submission)", batch=True),
    Format("--prairielearn", prairielearn,
           "also write PrairieLearn's external-grader results.json to FILE"),
    Format("--github-classroom", github_classroom,
           "also write the result for GitHub Classroom's grading reporter to FILE: one line of base64, for "
           "echo \"result=$(cat FILE)\" >> \"$GITHUB_OUTPUT\""),
)


def unwritable(path: Path, created: Path | None = None) -> str | None:
    """Why `path` cannot be written, if it cannot: checked before anything is graded, so that a mistyped path
    stops the run instead of costing it.  `created` is a folder the command makes itself (grade-all's -o)."""
    if path.is_dir():
        return f"{path}: is a folder, not a file"
    folder = path.parent
    if created is not None and folder.resolve() == created.resolve():
        folder = created.parent  # -o is made where its parent is
        if not folder.is_dir():
            return None  # -o's own check says so
    if not folder.is_dir():
        return f"{path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{path}: folder {folder} is not writable"
    return None


def output_file(text: str) -> Path:
    """An argparse type: a file to write, whose folder must exist."""
    if problem := unwritable(Path(text)):
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def add_flags(parser: argparse.ArgumentParser, batch: bool = False) -> None:
    """Every format's flag on `grade` (batch=False), or those grade-all writes (batch=True), whose files may go
    in the -o folder it creates: `unwritable(path, created=output)` checks them."""
    for fmt in FORMATS:
        if fmt.batch or not batch:
            parser.add_argument(fmt.flag, metavar="FILE", type=Path if batch else output_file, dest=fmt.dest,
                                help=fmt.help)


def requested(args: argparse.Namespace) -> list[tuple[Format, Path]]:
    return [(fmt, getattr(args, fmt.dest)) for fmt in FORMATS if getattr(args, fmt.dest, None) is not None]


def clash(paths: dict[str, Path]) -> str | None:
    """Why two of the flags `paths` names (flag -> file) would write the same file, if they would: the later
    write would silently replace the earlier one."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        key = path.resolve()
        if key in seen:
            return f"{path}: given to both {seen[key]} and {flag}"
        seen[key] = flag
    return None


def write(args: argparse.Namespace, result: GradeResult) -> None:
    for fmt, path in requested(args):
        fmt.writer.write(result, path)


def write_batch(args: argparse.Namespace, assignment: str, results: Sequence[tuple[str, GradeResult]]) -> None:
    for fmt, path in requested(args):
        if fmt.batch:
            fmt.writer.write_batch(assignment, results, path)
