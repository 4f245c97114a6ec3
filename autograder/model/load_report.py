"""What loading a submission into its sandbox showed: the host fills it in from the child's validated replies,
and the grade carries it (autograder.grading.result.GradeResult.load)."""
from __future__ import annotations

from typing import Any


class LoadReport:
    def __init__(self) -> None:
        self.cell_errors: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.notices: list[str] = []
        self.loaded = False
        self.failure = ""  # why the submission never finished loading, if it did not
        self.isolation = ""  # which tier of the sandbox graded it (autograder.child.isolation.TIER_NAMES)
