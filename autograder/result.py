"""What grading one submission produced: the one result model every writer (results.json, grades.csv,
nbgrader's cells) is fed.  Plain data, no torch: a process that only coordinates or writes grades never
imports the judge."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from autograder.judging.resemblance import Resemblance
from autograder.judging.rubric import PartScore


class LoadReport:
    def __init__(self) -> None:
        self.cell_errors: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.notices: list[str] = []
        self.loaded = False
        self.failure = ""  # why the submission never finished loading, if it did not
        self.isolation = ""  # which tier of the sandbox graded it (autograder.child.isolation.TIER_NAMES)


@dataclass
class GradeResult:
    submission: str
    sha256: str
    assignment: str
    parts: list[PartScore]
    max_score: float
    load: LoadReport = field(default_factory=LoadReport)
    unreadable: str = ""
    cells_sha256: str = ""  # what was graded (autograder.judging.fingerprint.cells_sha256); "" when nothing could be read
    printed: str = ""
    resembles: list[Resemblance] = field(default_factory=list)  # torch's own code the source holds, for review
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.parts), 4)


def as_text(name: str) -> str:
    """A file name (or text holding one) as valid UTF-8: bytes that are not UTF-8, which Python carries as
    lone surrogates, become backslash escapes such as \\xe9, so that JSON, CSV and stdout never fail on it."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
