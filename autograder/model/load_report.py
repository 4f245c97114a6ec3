"""What loading a submission into its sandbox showed: the host fills it in from the child's validated replies,
and the grade carries it (autograder.grading.result.GradeResult.load)."""
from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class NoticeKind(StrEnum):
    """Where a notice came from, decided by the trusted side that recorded it, never read from its words."""

    UNISOLATED = "unisolated"  # graded without isolation, as the grader allowed: every report tells the student
    CHILD = "child"            # what the child reported while isolating itself, before any student line ran
    SANDBOX = "sandbox"        # what the host saw of the sandbox around the child (its cgroup, its end)
    LIMIT = "limit"            # a bound on the whole submission it crossed (autograder.grading.grade)


class Notice(NamedTuple):
    kind: NoticeKind
    text: str


class LoadReport:
    def __init__(self) -> None:
        self.cell_errors: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.notices: list[Notice] = []
        self.loaded = False
        self.failure = ""  # why the submission never finished loading, if it did not
        self.isolation = ""  # which tier of the sandbox graded it (autograder.child.isolation.TIER_NAMES)
        self.memory = ""  # what held its memory to the limit there (autograder.host.memory.bound)

    def notices_of(self, kind: NoticeKind) -> list[str]:
        """The texts of the notices of one kind, in their order."""
        return [n.text for n in self.notices if n.kind is kind]
