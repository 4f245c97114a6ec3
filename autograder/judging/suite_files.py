"""Which files decide an assignment's checks (light: the coordinator of a batch reads it without the judge)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


def suite_sources(suite_files: Sequence[Path]) -> set[Path]:
    """The suites and every Python file beside them: the helper modules a suite imports from its folder (and
    the folder's __init__.py) decide its checks as much as the suite does.  Not the subfolders (catalogue/),
    which grading never reads."""
    beside = (p for folder in {f.parent for f in suite_files} for p in folder.glob("*.py"))
    return {*suite_files, *beside}
