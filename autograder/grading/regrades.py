"""Regrades that show what changed: every stored result a regrade replaces is kept, and the run says whose
grade moved, which checks moved, and why.

History.  Before grade-all (or its cluster variant) replaces OUT/<student>.json, the old file is hard-linked
to OUT/history/<student>/<UTC time>-<the first 12 digits of its assignment fingerprint>.json (copied where the
file system has no hard links); only then is the new result written over it, atomically.  So at every instant
the old result is in place, in the history, or both: a run stopped between the two steps leaves it in both,
and the rerun, regrading it again, does not keep a second copy of the same bytes.  A history file is never
rewritten or removed by the kit.

changes.csv.  At the end of a run that completes, OUT/changes.csv lists every student whose result was
replaced since the last run that completed (OUT/.history-completed holds when it ended; so a regrade that a
stopped run made is reported by the rerun)
and whose score or any check's verdict moved: student, old score, new score, the checks whose verdict moved
("attention: test_sdpa_matches_torch failed->passed"), and why the student was regraded (the submission
changed; which hidden suite or helper module, the rubric, the engine or which limit changed, from the
per-input digests each result stores as extra_data.assignment_components; regraded on request, --only).  The
old result compared with is the one in force when the last completed run ended.  Regraded students whose
grade did not move are counted in the run's summary line ("regraded 24: 3 changed, 21 unchanged; see
OUT/changes.csv"), not listed.  A run that regraded nothing leaves changes.csv as it was (the report of the
last run that regraded someone) and prints no summary line.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from autograder.grading.fingerprint import changed_components
from autograder.grading.results_json import write_bytes_atomic
from autograder.grading.result import csv_cell, display_name

HISTORY = "history"
CHANGES = "changes.csv"
# beside HISTORY, so that no student's history folder can be called like it: the time the last completed run
# ended, as a history stamp
COMPLETED = ".history-completed"
CHANGES_HEADER = ["student", "old_score", "new_score", "moved_checks", "why"]
ON_REQUEST = "regraded on request (--only)"
_STAMP = re.compile(r"\d{8}T\d{6}\.\d{6}Z")


def stamp() -> str:
    """Now, in UTC, as history names start: fixed width, so that names sort as times do."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def history_folder(result: Path) -> Path:
    """OUT/history/<student>/ for the result OUT/<student>.json (whose name batch.result_path made safe; a
    student called . or .., from a file called ..py or ...py, gets %2e or %2e%2e)."""
    name = result.stem
    if name in (".", ".."):
        name = name.replace(".", "%2e")
    return result.parent / HISTORY / name


def _fingerprint_prefix(data: bytes) -> str:
    try:
        fingerprint = json.loads(data)["extra_data"]["assignment_fingerprint"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return "unknown"
    return fingerprint[:12] if isinstance(fingerprint, str) and re.fullmatch(r"[0-9a-f]{12,64}", fingerprint) \
        else "unknown"


def _kept(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and _STAMP.match(p.name))


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def keep_history(result: Path) -> Path | None:
    """Keeps the result at `result` in its history before it is replaced: the history file holding it, or None
    when there is none.  Call it before writing the new result; it returns once the old one is durably kept."""
    try:
        data = result.read_bytes()
    except FileNotFoundError:
        return None
    folder = history_folder(result)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept, since = _kept(folder), last_completed(result.parent)
    if kept and kept[-1].name > since and kept[-1].read_bytes() == data:
        return kept[-1]  # kept by a run stopped before it wrote the successor, since the last completed run
    base = f"{stamp()}-{_fingerprint_prefix(data)}"
    for n in range(1000):
        target = folder / (f"{base}.json" if n == 0 else f"{base}-{n}.json")
        try:
            os.link(result, target)  # the same file under a second name: nothing copied, nothing half-written
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some network or FAT file systems): a copy, made atomically
            if target.exists():
                continue
            write_bytes_atomic(target, data)
        _fsync_folder(folder)
        return target
    raise FileExistsError(f"{folder}: no free history name for {base}")


def last_completed(out_dir: Path) -> str:
    """The stamp at which the last completed run ended ("" when none recorded: every history entry is new)."""
    try:
        text = (out_dir / COMPLETED).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return ""
    return text if _STAMP.fullmatch(text) else ""


def mark_completed(out_dir: Path) -> None:
    if not (out_dir / HISTORY).is_dir():
        return  # nothing was ever regraded: every history entry a later run makes is after this one
    tmp = out_dir / f"{COMPLETED}.tmp"
    tmp.write_text(stamp() + "\n", encoding="ascii")
    tmp.replace(out_dir / COMPLETED)


@dataclass
class Change:
    student: str
    old_score: float | None  # None: the old result could not be read
    new_score: float
    moved: list[str]
    why: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.moved) or self.old_score != self.new_score

    def row(self) -> list[str]:
        return [csv_cell(display_name(self.student)), "" if self.old_score is None else f"{self.old_score:g}",
                f"{self.new_score:g}", csv_cell("; ".join(self.moved)), csv_cell("; ".join(self.why))]


def _verdicts(data: Any) -> dict[str, str]:
    """"part: test" -> "passed" / "failed", from extra_data.parts.<part>.tests ([name, score, max_score, passed,
    message, evidence, hints] each); {} for anything else."""
    verdicts = {}
    try:
        for part, stored in data["extra_data"]["parts"].items():
            for test in stored["tests"]:
                verdicts[f"{part}: {test[0]}"] = "passed" if test[3] is True else "failed"
    except (KeyError, TypeError, AttributeError, IndexError):
        return {}
    return verdicts


def _score(data: Any) -> float | None:
    score = data.get("score") if isinstance(data, dict) else None
    return float(score) if type(score) in (int, float) else None


def why(old: Any, new: dict[str, Any], suites: frozenset[str]) -> list[str]:
    """Why `new` replaced `old`, from what each says it judged against what."""
    old_extra = old.get("extra_data") if isinstance(old, dict) else None
    if not isinstance(old_extra, dict):
        return ["its stored result was unreadable"]
    new_extra = new["extra_data"]
    reasons = []
    if old_extra.get("submission_sha256") != new_extra.get("submission_sha256"):
        reasons.append("the submission changed")
    if old_extra.get("assignment_fingerprint") != new_extra.get("assignment_fingerprint"):
        reasons += changed_components(old_extra.get("assignment_components"),
                                      new_extra.get("assignment_components") or {}, suites) \
            if isinstance(new_extra.get("assignment_components"), dict) else []
        if not reasons or reasons == ["the submission changed"]:
            reasons.append("the assignment changed (suites, rubric, kit or limits)")
    return reasons or [ON_REQUEST]


def compare(student: str, old_bytes: bytes, new: dict[str, Any], suites: frozenset[str]) -> Change:
    try:
        old = json.loads(old_bytes)
    except (ValueError, RecursionError):
        old = None
    before, after = _verdicts(old), _verdicts(new)
    moved = [f"{name} {before.get(name, 'absent')}->{after.get(name, 'absent')}"
             for name in [*before, *(n for n in after if n not in before)]
             if before.get(name) != after.get(name)]
    return Change(student, _score(old), float(new["score"]), moved, why(old, new, suites))


def changes(results: Iterable[tuple[str, Path]], since: str, suites: frozenset[str]) -> list[Change]:
    """A Change for each (student, result path) whose result was replaced after `since` (a stamp): the
    current result against the one kept first after it."""
    found = []
    for student, path in results:
        kept = [p for p in _kept(history_folder(path)) if p.name[:len(since)] > since or not since]
        if kept:
            found.append(compare(student, kept[0].read_bytes(), json.loads(path.read_text(encoding="utf-8")),
                                 suites))
    return found


def write_changes(out_dir: Path, found: list[Change]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CHANGES_HEADER)
    writer.writerows(change.row() for change in found if change.changed)
    target = out_dir / CHANGES
    tmp = target.with_name(f".{CHANGES}.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    tmp.replace(target)
    return target


def summary_line(found: list[Change], target: Path) -> str:
    moved = sum(change.changed for change in found)
    return (f"regraded {len(found)}: {moved} changed, {len(found) - moved} unchanged; "
            f"see {display_name(str(target))}")


def report(out_dir: Path, results: list[tuple[str, Path]], suites: frozenset[str]) -> str | None:
    """At the end of a completed run: writes changes.csv and returns the summary line when results were
    replaced since the last completed run (None, and changes.csv left alone, when none were); then records
    this run as completed."""
    found = changes(results, last_completed(out_dir), suites)
    line = summary_line(found, write_changes(out_dir, found)) if found else None
    mark_completed(out_dir)
    return line
