"""What a grade depends on, as hashes: a stored grade may stand in for a new one only when both match.

A grade is a function of two things.  The cells that ran (`cells_sha256`: the cells as `read_cells` returns
them, so what nbgrader restores or the reader neutralises counts, and a notebook's outputs do not), and the
assignment it was judged against (`assignment_fingerprint`: the hidden suites and their helper modules, the
rubric, the kit's engine source and the limits).  Change any of these and the old grade says nothing about the
new one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from autograder.grading.rubric import Rubric
from autograder.host.intake import UnreadableSubmission
from autograder.host.source_cells import read_cells
from autograder.judging.suite_files import suite_sources
from autograder.model.code_version import add, engine_digest
from autograder.model.limits import Limits


def _limits_json(limits: Limits) -> bytes:
    # 180 and 180.0 are the same limit, whether it came from a flag, nbgrader's traits or the defaults
    values = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
              for k, v in dataclasses.asdict(limits).items()}
    return json.dumps(values, sort_keys=True).encode("ascii")


def _release_text_json(rubric: Rubric) -> bytes:
    return json.dumps(sorted(["\n".join(key), standin] for key, standin in rubric.release_text.standin_of.items())
                      ).encode("utf-8")


def assignment_fingerprint(rubric: Rubric, limits: Limits) -> str:
    """The hidden suites and their helper modules, the rubric (its file, and the release cells it skips while
    unchanged), the kit's engine and the limits, as one sha256.  Suites, helpers and rubric are read on every
    call (a few kB), so an edited suite or helper changes it at once."""
    digest = hashlib.sha256()
    add(digest, "kit", engine_digest())
    add(digest, "rubric", (rubric.folder / "rubric.toml").read_bytes())
    # the release's source of the cells grading skips while unchanged: it decides which cells run
    add(digest, "skipped cells", json.dumps(sorted(rubric.skip_when_unchanged.items())).encode("ascii"))
    # the release's cells known by their text: they decide which cells of an unmarked notebook run
    add(digest, "release cells", _release_text_json(rubric))
    # by name within the assignment, so that the same checkout hashes alike wherever it is
    for path in sorted(suite_sources(rubric.suite_files()), key=lambda p: p.relative_to(rubric.folder).as_posix()):
        add(digest, f"module {path.relative_to(rubric.folder).as_posix()}", path.read_bytes())
    add(digest, "limits", _limits_json(limits))
    return digest.hexdigest()


def fingerprint_components(rubric: Rubric, limits: Limits) -> dict[str, Any]:
    """What `assignment_fingerprint` hashes, one digest per input (the limits as their values), so that a stored
    result can say which of them changed since it was graded (`changed_components`): {"kit": sha256 of the
    engine, "rubric": sha256 of rubric.toml and the skipped cells, "modules": {path in the assignment: sha256},
    "limits": {field: value}}.  Stored in results.json's extra_data as "assignment_components"."""
    rubric_digest = hashlib.sha256()
    add(rubric_digest, "rubric", (rubric.folder / "rubric.toml").read_bytes())
    add(rubric_digest, "skipped cells", json.dumps(sorted(rubric.skip_when_unchanged.items())).encode("ascii"))
    add(rubric_digest, "release cells", _release_text_json(rubric))
    modules = {path.relative_to(rubric.folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
               for path in suite_sources(rubric.suite_files())}
    return {"kit": engine_digest().hex(), "rubric": rubric_digest.hexdigest(),
            "modules": dict(sorted(modules.items())), "limits": json.loads(_limits_json(limits))}


def changed_components(old: Any, new: dict[str, Any], suites: frozenset[str] = frozenset()) -> list[str]:
    """What differs between two `fingerprint_components`, in words ("the hidden suite test_attention.py
    changed", "the rubric changed", "the engine changed", "the limit timeout changed (180 -> 100)"); [] when
    `old` is not such a record (a result from before they were stored) or nothing differs.  `suites` names
    the suite files among the modules (the rest are their helper modules)."""
    if not isinstance(old, dict) or not all(isinstance(old.get(k), dict) for k in ("modules", "limits")):
        return []
    changes = []
    old_modules, new_modules = old["modules"], new["modules"]
    for name in sorted(set(old_modules) | set(new_modules)):
        kind = "hidden suite" if name in suites else "helper module"
        if name not in old_modules:
            changes.append(f"the {kind} {name} was added")
        elif name not in new_modules:
            changes.append(f"the {kind} {name} was removed")
        elif old_modules[name] != new_modules[name]:
            changes.append(f"the {kind} {name} changed")
    if old.get("rubric") != new["rubric"]:
        changes.append("the rubric changed")
    if old.get("kit") != new["kit"]:
        changes.append("the engine changed")
    old_limits, new_limits = old["limits"], new["limits"]
    for name in sorted(set(old_limits) | set(new_limits)):
        if old_limits.get(name) != new_limits.get(name):
            changes.append(f"the limit {name} changed ({_shown(old_limits.get(name))} -> "
                           f"{_shown(new_limits.get(name))})")
    return changes


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return "unset" if value is None else str(value)


def cells_sha256(cells: list[str]) -> str:
    """The hash of what is actually graded: the cells as `autograder.host.source_cells.read_cells` returns them (file_cells_sha256 of a file)."""
    # ASCII JSON: a list's boundaries are unambiguous and a lone surrogate cannot make encoding fail
    return hashlib.sha256(json.dumps(cells, ensure_ascii=True).encode("ascii")).hexdigest()


def file_cells_sha256(path: Path, rubric: Rubric) -> str:
    """`cells_sha256` of a submission file, read as grading against `rubric` reads it (its unchanged
    instructor cells become stand-ins); "" for a file that cannot be read as a submission (nothing was run,
    so there is nothing a stored grade could stand in for)."""
    try:
        return cells_sha256(read_cells(path, rubric.skip_when_unchanged, release=rubric.release_text))
    except UnreadableSubmission:
        return ""
