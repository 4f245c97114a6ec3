"""The kit's own code as a hash: which version of it computed a grade (or a stored reference), and which one a
long-running process started with."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from autograder import PACKAGE_DIR


def add(digest: "hashlib._Hash", label: str, data: bytes) -> None:
    """Feeds one labelled input to `digest`: label and length first, so that no two different sets of inputs
    feed the same bytes to the hash."""
    digest.update(f"{label}\0{len(data)}\0".encode("utf-8", "backslashreplace"))
    digest.update(data)


# The kit's code a stored grade is computed and written by: the sandboxed child, the model both sides share, the
# host side that runs and talks to it, the judge and its toolkit, the rubric's reader and scorer, one file's
# pipeline, the result's model and results.json.  The folder of a class (batch, cluster, regrades), the
# authoring tools, the platforms' packaging, the commands, nbgrader's front end and the other report formats
# cannot change a stored grade, so editing them regrades nothing (tests/test_reuse.py checks both, and that
# everything grading imports is in here).
ENGINE = ("__init__.py", "protocol.py", "child/", "model/", "host/", "judging/", "grading/__init__.py",
          "grading/rubric.py", "grading/fingerprint.py", "grading/grade.py", "grading/result.py",
          "grading/results_json.py")


def _digest_of(paths: list[Path]) -> bytes:
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.relative_to(PACKAGE_DIR).as_posix()):
        add(digest, path.relative_to(PACKAGE_DIR).as_posix(), path.read_bytes())
    return digest.digest()


def _package_files() -> list[Path]:
    return [p for p in PACKAGE_DIR.rglob("*.py") if p.is_file() and not p.name.startswith(".")]


@functools.cache
def engine_digest() -> bytes:
    """The version of the code a grade depends on (ENGINE), by relative path.  Cached per process, which also
    runs the code it read when it first imported the engine."""
    return _digest_of([p for p in _package_files() if p.relative_to(PACKAGE_DIR).as_posix().startswith(ENGINE)])


def package_digest() -> bytes:
    """Every .py of the installed kit: what a long-running process (the warm service) compares with the code
    it started with, front ends included."""
    return _digest_of(_package_files())
