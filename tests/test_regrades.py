"""Regrades that show what changed (autograder/grading/regrades.py): a result a regrade replaces is kept in
OUT/history/<student>/ byte for byte, changes.csv names the students whose verdicts moved, the checks and
why, `grade-all --only` regrades exactly the students it names, and a run stopped mid-regrade loses no
result.  Classes are three students of the catalogue, graded once each, so that this file stays short."""
from __future__ import annotations

import csv
import dataclasses
import json
import shutil

import pytest

from autograder.grading import batch, regrades
from autograder.authoring import catalogue
from autograder.grading.batch import Entry, grade_all, record, result_path
from autograder.model.limits import Limits
from autograder.grading.rubric import load_rubric
from conftest import run_cli

ASSIGNMENT = "transformer_block"
STUDENTS = {"ref": "reference", "att": "att-no-scaling", "ln": "ln-unbiased-variance"}
TIGHT = '    assert False, "a tolerance too tight"\n'  # the mistake in the suite that the term's fix removes


def write_class(folder, students=STUDENTS):
    folder.mkdir(parents=True, exist_ok=True)
    book = catalogue.load(ASSIGNMENT)
    for student, name in students.items():
        (folder / f"{student}.py").write_text(book.python_source(book.entry(name)), encoding="utf-8")
    return folder


def rows(path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def history(out, student):
    return sorted(p for p in (out / "history" / student).iterdir() if p.suffix == ".json")


def test_a_suite_fixed_mid_term_regrades_everyone_keeps_the_old_grades_and_reports_what_moved(tmp_path):
    """The hidden suite is a copy of the assignment's, graded in this process (grade-all's subprocess would
    read the checkout's own): first with a check that fails everyone, then fixed."""
    shipped = load_rubric(ASSIGNMENT)
    copy = tmp_path / "assignments" / ASSIGNMENT
    shutil.copytree(shipped.folder, copy, ignore=shutil.ignore_patterns("catalogue", "__pycache__"))
    rubric = dataclasses.replace(shipped, folder=copy)
    suite = copy / "test_attention.py"
    fixed = suite.read_text(encoding="utf-8")
    head = "def test_sdpa_matches_torch(student):\n"
    docstring_end = fixed.index('"""\n', fixed.index(head) + len(head) + 8) + 4
    suite.write_text(fixed[:docstring_end] + TIGHT + fixed[docstring_end:], encoding="utf-8")

    folder, out, log = write_class(tmp_path / "class"), tmp_path / "out", []
    grade_all(folder, out, rubric, Limits(), log=log.append)
    assert not (out / "history").exists() and not (out / "changes.csv").exists()
    assert not any(line.startswith("regraded ") for line in log), log
    before = {s: result_path(out, s).read_bytes() for s in STUDENTS}
    first = {s: json.loads(data) for s, data in before.items()}
    assert all(first[s]["extra_data"]["assignment_components"]["modules"] for s in STUDENTS)

    suite.write_text(fixed, encoding="utf-8")  # the fix
    log.clear()
    grade_all(folder, out, rubric, Limits(), log=log.append)
    for student in STUDENTS:
        assert f"{student}: the assignment changed since it was graded: the hidden suite test_attention.py " \
               "changed: regraded" in log, log
        [kept] = history(out, student)
        assert kept.read_bytes() == before[student]  # byte for byte
        assert kept.name.endswith(f"-{first[student]['extra_data']['assignment_fingerprint'][:12]}.json")
    table = rows(out / "changes.csv")
    assert table[0] == regrades.CHANGES_HEADER
    changed = {row[0]: row for row in table[1:]}
    assert set(changed) == {"ref", "ln"}, table  # att-no-scaling failed that check before and after: unchanged
    for student in ("ref", "ln"):
        _, old, new, moved, why = changed[student]
        assert float(new) > float(old) == first[student]["score"]
        assert moved == "attention: test_sdpa_matches_torch failed->passed"
        assert why == "the hidden suite test_attention.py changed"
    assert log[-1] == f"regraded 3: 2 changed, 1 unchanged; see {out / 'changes.csv'}", log

    log.clear()  # nothing stale: nothing regraded, changes.csv left as the last regrade wrote it
    kept_report = (out / "changes.csv").read_bytes()
    grade_all(folder, out, rubric, Limits(), log=log.append)
    assert all(f"{s}: already graded, kept" in log for s in STUDENTS) and not log[-1].startswith("regraded")
    assert (out / "changes.csv").read_bytes() == kept_report
    assert all(len(history(out, s)) == 1 for s in STUDENTS)


def test_only_regrades_exactly_the_students_it_names(tmp_path):
    folder, out = write_class(tmp_path / "class"), tmp_path / "out"
    done = run_cli("grade-all", folder, "-o", out)
    assert done.returncode == 0, done.stderr
    files = {s: result_path(out, s) for s in STUDENTS}
    stored = {s: (p.read_bytes(), p.stat().st_mtime_ns) for s, p in files.items()}
    grades = (out / "grades.csv").read_text()

    unknown = run_cli("grade-all", folder, "-o", out, "--only", "ref", "nobody")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"python -m autograder: error: --only: no submission of nobody in {folder}"], unknown.stderr
    assert {s: (p.read_bytes(), p.stat().st_mtime_ns) for s, p in files.items()} == stored

    # ln fixes her layer norm; the instructor regrades ref alone, on request: ln's stale result stays as it is
    book = catalogue.load(ASSIGNMENT)
    (folder / "ln.py").write_text(book.python_source(book.entry("reference")), encoding="utf-8")
    only = run_cli("grade-all", folder, "-o", out, "--only", "ref")
    assert only.returncode == 0, only.stderr
    assert "ref: already graded: regraded on request (--only)" in only.stderr
    assert "ln: the submission changed since it was graded: kept as it is (not named by --only)" in only.stderr
    assert "att: already graded, kept" in only.stderr
    for student in ("att", "ln"):
        assert (files[student].read_bytes(), files[student].stat().st_mtime_ns) == stored[student]
        assert not (out / "history" / student).exists()
    assert files["ref"].stat().st_mtime_ns != stored["ref"][1]
    [kept] = history(out, "ref")
    assert kept.read_bytes() == stored["ref"][0]
    assert (out / "grades.csv").read_text() == grades  # the whole class; ref's grade did not move
    assert rows(out / "changes.csv") == [regrades.CHANGES_HEADER]  # regraded, unchanged: counted, not listed
    assert only.stderr.strip().splitlines()[-1] == f"regraded 1: 0 changed, 1 unchanged; see {out / 'changes.csv'}"

    rerun = run_cli("grade-all", folder, "-o", out)  # now ln's new submission is graded
    assert rerun.returncode == 0, rerun.stderr
    assert "ln: the submission changed since it was graded: regraded" in rerun.stderr
    [kept] = history(out, "ln")
    assert kept.read_bytes() == stored["ln"][0]
    assert len(history(out, "ref")) == 1
    [header, (student, old, new, moved, why)] = rows(out / "changes.csv")
    assert (student, new, why) == ("ln", "100", "the submission changed") and float(old) < 100
    moved = moved.split("; ")
    assert "layer_norm: test_layer_norm_biased_variance_large_d_model failed->passed" in moved, moved
    assert all(m.endswith(" failed->passed") for m in moved), moved  # and what is built on it, the block
    assert "regraded 1: 1 changed, 0 unchanged" in rerun.stderr

    # att's stored result is damaged; --only ref keeps it, and grades.csv cannot show it: one line, nothing lost
    files["att"].write_text(files["att"].read_text().replace('"exact_score"', '"exactly"', 1))
    damaged = files["att"].read_bytes()
    broken = run_cli("grade-all", folder, "-o", out, "--only", "ref")
    assert broken.returncode == 2 and files["att"].read_bytes() == damaged
    assert broken.stderr.strip().splitlines()[-1] == (
        f"python -m autograder: error: {out}/{files['att'].name}: part attention has no exact_score, tests or "
        "forbidden_ops; grade-all without --only grades that submission again"), broken.stderr
    assert run_cli("grade-all", folder, "-o", out).returncode == 0 and files["att"].read_bytes() != damaged


def _result(fingerprint: str, score: float, passed: bool, sha: str = "s" * 64) -> dict:
    return {"score": score, "extra_data": {
        "submission_sha256": sha, "assignment_fingerprint": fingerprint,
        "parts": {"attention": {"tests": [["test_a", score, 1, passed, None, None], ["test_b", 1, 1, True, None, None]]}}}}


def test_a_run_stopped_between_keeping_and_writing_loses_nothing_and_keeps_it_once(tmp_path, monkeypatch):
    out = tmp_path / "out"
    entry = Entry("=alice", tmp_path / "=alice.py", tmp_path)
    record(out, entry, _result("a" * 64, 0, False))
    old = result_path(out, entry.student).read_bytes()
    assert not (out / "history").exists()  # a first result replaces nothing

    def crash(path, data):
        raise KeyboardInterrupt  # a signal after the old result was kept, before the new one was written

    monkeypatch.setattr(batch, "write_json_atomic", crash)
    with pytest.raises(KeyboardInterrupt):
        record(out, entry, _result("b" * 64, 1, True))
    assert result_path(out, entry.student).read_bytes() == old  # still in place
    [kept] = history(out, "=alice")
    assert kept.read_bytes() == old and kept.name.endswith(f"-{'a' * 12}.json")

    monkeypatch.undo()
    record(out, entry, _result("b" * 64, 1, True))  # the rerun regrades: the same old result is not kept twice
    assert history(out, "=alice") == [kept] and kept.read_bytes() == old
    assert json.loads(result_path(out, entry.student).read_text())["score"] == 1

    assert regrades.report(out, [(entry.student, result_path(out, entry.student))], frozenset()) == \
        f"regraded 1: 1 changed, 0 unchanged; see {out / 'changes.csv'}"
    [header, row] = rows(out / "changes.csv")
    # a name a spreadsheet would read as a formula is neutralised, as in grades.csv
    assert row == ["'=alice", "0", "1", "attention: test_a failed->passed",
                   "the assignment changed (suites, rubric, kit or limits)"]
    # the next completed run regraded nothing: no summary, changes.csv as it was
    assert regrades.report(out, [(entry.student, result_path(out, entry.student))], frozenset()) is None
    assert rows(out / "changes.csv") == [header, row]


def test_why_names_the_input_that_changed():
    rubric = load_rubric(ASSIGNMENT)
    from autograder.grading.fingerprint import fingerprint_components

    old = _result("a" * 64, 1, True)
    new = _result("b" * 64, 1, True, sha="t" * 64)
    old["extra_data"]["assignment_components"] = fingerprint_components(rubric, Limits())
    new["extra_data"]["assignment_components"] = fingerprint_components(rubric, Limits(timeout=100))
    assert regrades.why(old, new, batch.suite_names(rubric)) == ["the submission changed",
                                                                 "the limit timeout changed (180 -> 100)"]
    components = old["extra_data"]["assignment_components"]
    tweaked = json.loads(json.dumps(components))
    tweaked["modules"]["states.py"] = "0" * 64
    tweaked["kit"], tweaked["rubric"] = "1" * 64, "2" * 64
    assert regrades.why({"extra_data": {**old["extra_data"], "assignment_components": tweaked,
                                        "submission_sha256": "t" * 64}}, new, batch.suite_names(rubric)) == [
        "the helper module states.py changed", "the rubric changed", "the engine changed",
        "the limit timeout changed (180 -> 100)"]
    assert regrades.why(new, new, frozenset()) == [regrades.ON_REQUEST]
    assert regrades.why(None, new, frozenset()) == ["its stored result was unreadable"]


def test_every_student_name_gets_a_history_folder_of_its_own(tmp_path):
    out = tmp_path / "out"
    for student in (".", "..", ".history-completed", "history", "a\\x1b"):  # from ..py, ...py, and so on
        entry = Entry(student, tmp_path / f"{student}.py", tmp_path)
        record(out, entry, _result("a" * 64, 0, False))
        record(out, entry, _result("b" * 64, 1, True))
    kept = sorted(p.relative_to(out / "history").parent.as_posix() for p in (out / "history").rglob("*.json"))
    assert kept == sorted(["%2e", "%2e%2e", ".history-completed", "history", "a\\x1b"])
    students = [(s, result_path(out, s)) for s in (".", "..", ".history-completed", "history", "a\\x1b")]
    assert regrades.report(out, students, frozenset()).startswith("regraded 5: 5 changed")
    assert (out / ".history-completed").is_file()
    assert [row[0] for row in rows(out / "changes.csv")[1:]] == [".", "..", ".history-completed", "history", "a\\x1b"]
