"""The grader's cache folder: what a grading process can rebuild from torch and the checkout (the resemblance
corpus, the suites' references), kept so that the next process need not.  Best effort throughout: a folder that
cannot be read or written costs only the time to rebuild, and an entry is replaced whole or not at all.

The folder is AUTOGRADER_CACHE (a Gradescope image's, filled once by its setup.sh), or the user's cache folder.
Only the grader writes it: the sandboxed child can neither see nor write the grader's home."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def folder() -> Path:
    if os.environ.get("AUTOGRADER_CACHE"):
        return Path(os.environ["AUTOGRADER_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autograder"


def read(name: str) -> bytes | None:
    """The entry `name`, or None when there is none or it cannot be read."""
    try:
        return (folder() / name).read_bytes()
    except OSError:
        return None


def write(name: str, data: bytes) -> None:
    """Replaces the entry `name` atomically: a reader sees the old entry or the new one, never half of one."""
    path = folder() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
