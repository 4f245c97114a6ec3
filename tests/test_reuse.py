"""Stored grades and what they are keyed on: the assignment fingerprint changes with exactly its inputs, a
results.json reads back into a GradeResult that nbgrader renders identically, and the nbgrader plugin reuses
only a well-formed result keyed on the same cells and assignment.  No grading here: all of it is fast."""
from __future__ import annotations

import dataclasses
import functools
import json
import operator
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading import fingerprint
from autograder.model import code_version
from autograder.grading.fingerprint import file_cells_sha256
from autograder.grading.fingerprint import assignment_fingerprint, cells_sha256
from autograder.grading.result import GradeResult
from autograder.nbgrader.plugin import SandboxedGrading, write_verdicts
from autograder.protocol import UNISOLATED
from autograder.model.load_report import LoadReport, Notice, NoticeKind
from autograder.grading.results_json import NotAResult, from_gradescope, gradescope, summary
import autograder.grading.rubric as scoring
from autograder.grading.rubric import PartScore, load_rubric
from autograder.authoring.assignment import Assignment
from autograder.authoring.samples import student_notebook, write_notebook
from autograder.model.limits import Limits
from conftest import REPO

RUBRIC = load_rubric("transformer_block")


def test_fingerprint_follows_suites_rubric_kit_and_limits_and_nothing_else(tmp_path, monkeypatch):
    copy = tmp_path / "assignment"
    shutil.copytree(RUBRIC.folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    rubric = dataclasses.replace(RUBRIC, folder=copy)
    base = assignment_fingerprint(RUBRIC, Limits())
    assert assignment_fingerprint(rubric, Limits()) == base  # where the checkout lives does not matter
    assert assignment_fingerprint(rubric, Limits(timeout=180, memory_mb=2048)) == base  # 180 is 180.0
    assert assignment_fingerprint(rubric, Limits(timeout=100)) != base
    assert assignment_fingerprint(rubric, Limits(isolate=False)) != base
    suite = copy / RUBRIC.parts[0].suite
    original = suite.read_bytes()
    suite.write_bytes(original + b"\n# a tolerance changed\n")
    assert assignment_fingerprint(rubric, Limits()) != base  # no stale cache within a process either
    suite.write_bytes(original)
    assert assignment_fingerprint(rubric, Limits()) == base
    helper = copy / "states.py"  # a module the suites import from their folder
    original = helper.read_bytes()
    helper.write_bytes(original + b"\n# a reference's weights changed\n")
    assert assignment_fingerprint(rubric, Limits()) != base
    helper.write_bytes(original)
    mistakes = copy / "catalogue" / "mistakes.py"  # grading never reads the catalogue
    mistakes.write_bytes(mistakes.read_bytes() + b"\n# a mistake added\n")
    assert assignment_fingerprint(rubric, Limits()) == base
    (copy / "rubric.toml").write_text((copy / "rubric.toml").read_text() + "\n# points changed\n")
    assert assignment_fingerprint(rubric, Limits()) != base

    kit = tmp_path / "kit"
    shutil.copytree(code_version.PACKAGE_DIR, kit, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(code_version, "PACKAGE_DIR", kit)
    version = code_version.engine_digest.__wrapped__()  # uncached: the cache holds this process's own kit
    calls = kit / "judging" / "checks" / "calls.py"
    calls.write_text(calls.read_text() + "\n# a message reworded\n")
    assert code_version.engine_digest.__wrapped__() != version
    # code that cannot change a stored grade regrades nothing
    version = code_version.engine_digest.__wrapped__()
    for tool in ("authoring/benchmark.py", "reports/html.py", "commands/main.py", "platforms/gradescope.py",
                 "nbgrader/plugin.py", "grading/batch.py"):
        (kit / tool).write_text((kit / tool).read_text() + "\n# edited\n")
        assert code_version.engine_digest.__wrapped__() == version, tool


def test_the_engine_digest_covers_everything_grading_imports():
    """What a grade is computed and written by, in the grading process and in the child: every module of the kit
    those import is in code_version.ENGINE, so that no edit that can change a grade keeps a stale one."""
    probe = ("import sys, autograder.grading.grade, autograder.grading.results_json, autograder.child.serve, "
             "autograder.child.zygote; print('\\n'.join(m.__file__ for n, m in sorted(sys.modules.items()) "
             "if n.startswith('autograder') and getattr(m, '__file__', None)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    imported = [Path(f).relative_to(code_version.PACKAGE_DIR).as_posix() for f in done.stdout.split()]
    assert len(imported) > 30
    assert [m for m in imported if not m.startswith(code_version.ENGINE)] == []


def test_cells_hash_is_what_is_graded_not_the_file(tmp_path):
    notebook = student_notebook("transformer_block")
    first = file_cells_sha256(write_notebook(notebook, tmp_path / "a.ipynb"), RUBRIC)
    for cell in notebook["cells"]:
        cell["outputs"] = [] if cell["cell_type"] == "code" else cell.get("outputs", [])
        cell["execution_count"] = 7 if cell["cell_type"] == "code" else None
    # outputs and execution counts are not graded
    assert file_cells_sha256(write_notebook(notebook, tmp_path / "b.ipynb"), RUBRIC) == first
    assert first != file_cells_sha256(write_notebook(student_notebook("transformer_block", solved=False), tmp_path / "c.ipynb"), RUBRIC)
    assert cells_sha256(["a", "b"]) != cells_sha256(["ab"]) != cells_sha256(["a", "b", ""])
    (tmp_path / "d.ipynb").write_text("not a notebook")
    assert file_cells_sha256(tmp_path / "d.ipynb", RUBRIC) == ""  # nothing ran: nothing to reuse


def awkward_result() -> GradeResult:
    """Every case rendering depends on: thirds (rounded scores would print and sum differently), partial,
    full and no credit, a forbidden operation, long messages, a loading failure, many cell errors, notices,
    and text with control characters and lone surrogates in each of them."""
    parts = []
    for i, part in enumerate(RUBRIC.parts):
        share = part.points / 3
        passed = [True, i % 2 == 0, i == 4]
        tests = [scoring.TestScore(part.name, f"test_{k}[float{32 * (k + 1)}]", share if ok else 0.0, share, ok,
                           "" if ok else f"max abs error 0.{k}3 > tolerance\r\nhint: \x1b[31m{'x' * (5000 * k)}",
                           None, () if ok else (f"Hint: a hint\nover two lines {k}", "another"))
                 for k, ok in enumerate(passed)]
        forbidden = ("aten::layer_norm",) if part.name == "attention" else ()
        if forbidden:
            tests = [dataclasses.replace(t, score=0.0) for t in tests]
        parts.append(PartScore(part, sum(t.score for t in tests), tests, forbidden))
    load = LoadReport()
    load.cell_errors = [{"cell": c, "type": "NotImplementedError", "message": f"cell {c}\ud800\n" + "m" * 300,
                         "bases": ["Exception"]} for c in range(1, 26)]
    load.failure = "the submission's process died\twhile loading (cell 9)"
    load.notices = [Notice(NoticeKind.UNISOLATED, f"{UNISOLATED}: " + "n" * 600),
                    Notice(NoticeKind.SANDBOX, "no cgroup: processes are counted per user \udcff"),
                    Notice(NoticeKind.CHILD, f"{UNISOLATED}, says the child"), Notice(NoticeKind.LIMIT, "exceeded")]
    assert RUBRIC.graded_by_hand, "the release's written answers, which the summary names"
    return GradeResult("alice.ipynb", "ab" * 32, RUBRIC.assignment, parts, RUBRIC.max_score, load,
                       graded_by_hand=dict(RUBRIC.graded_by_hand))


def rendered(result: GradeResult) -> list:
    notebook = nbformat.read(str(Assignment("transformer_block").release_notebook), as_version=4)
    write_verdicts(notebook, result)
    return [cell.get("outputs") for cell in notebook.cells]


def stored(result: GradeResult, **key: str) -> dict:
    """results.json as a file holds it."""
    return json.loads(json.dumps(gradescope(result, **key), indent=1, sort_keys=True))


def test_a_stored_result_renders_exactly_as_the_fresh_one():
    fresh = awkward_result()
    data = stored(fresh, cells_sha256="c" * 64, assignment_fingerprint="f" * 64)
    again = from_gradescope(data, RUBRIC)
    assert rendered(again) == rendered(fresh)
    assert summary(again) == summary(fresh) and again.score == fresh.score
    assert again.graded_by_hand == fresh.graded_by_hand and f"Graded by hand: {len(RUBRIC.graded_by_hand)} written answers" in summary(again)
    assert stored(again, cells_sha256="c" * 64, assignment_fingerprint="f" * 64) == data
    # the awkward cases are really there: partial credit, and text Gradescope's fields clip
    assert any(o[0]["output_type"] == "execute_result" for o in rendered(fresh) if o)
    assert any(len(t["output"]) < len(m) for t, m in zip(data["tests"], (t.message for p in fresh.parts
                                                                            for t in p.tests)))


DROP = object()


@pytest.mark.parametrize("where, value", [
    ((), []),
    ((), {"score": 100, "tests": []}),
    (("extra_data", "format_version"), 1),
    (("extra_data", "assignment"), "another_assignment"),
    (("extra_data", "parts", "attention"), DROP),
    (("extra_data", "parts", "layer_norm", "exact_score"), "20"),
    (("extra_data", "parts", "layer_norm", "tests", 0), ["test_0", 1.0]),
    (("extra_data", "parts", "layer_norm", "tests", 0), None),
    (("extra_data", "cell_errors"), "none"),
    (("extra_data", "notices"), DROP),
    (("tests",), []),  # a message stored as "the test's output", and no output
    (("extra_data", "graded_by_hand"), DROP),
    (("extra_data", "graded_by_hand", "layer_norm_answer"), "2"),
], ids=["list", "foreign", "old-format", "other-assignment", "missing-part", "score-text", "short-test",
        "null-test", "cell-errors", "no-notices", "no-outputs", "no-by-hand", "by-hand-text"])
def test_a_malformed_or_foreign_result_is_refused(where, value):
    data = stored(awkward_result())
    if not where:
        data = value
    else:
        *outer, last = where
        holder = functools.reduce(operator.getitem, outer, data)
        if value is DROP:
            del holder[last]
        else:
            holder[last] = value
    with pytest.raises(NotAResult):
        from_gradescope(data, RUBRIC)


def test_the_plugin_reuses_only_a_sound_result_keyed_on_the_same_cells_and_assignment(tmp_path, caplog):
    path = write_notebook(student_notebook("transformer_block"), tmp_path / "graded" / "transformer_block.ipynb")
    key = {"cells_sha256": file_cells_sha256(path, RUBRIC),
           "assignment_fingerprint": assignment_fingerprint(RUBRIC, Limits())}
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir(), bad.mkdir()
    (good / "ann.json").write_text(json.dumps(stored(awkward_result(), **key)))
    (bad / "ann.json").write_text('{"extra_data": {"cells_sha256": "' + key["cells_sha256"] + '", ')  # cut short
    plugin = SandboxedGrading(reuse_results_from=[str(bad), str(good)])
    reused = plugin.reused(path, "ann", RUBRIC)
    assert reused is not None and rendered(reused) == rendered(awkward_result())
    assert f"ignored {bad / 'ann.json'}" in caplog.text  # the cut-short file, skipped with a warning

    def reuse_with(**changed: str) -> GradeResult | None:
        (good / "ann.json").write_text(json.dumps(stored(awkward_result(), **{**key, **changed})))
        return SandboxedGrading(reuse_results_from=[str(good)]).reused(path, "ann", RUBRIC)

    assert reuse_with(cells_sha256=cells_sha256(["print('other cells')"])) is None
    assert reuse_with(assignment_fingerprint="0" * 64) is None
    assert reuse_with(cells_sha256="") is None  # cells unknown (the file changed while it was graded)
    assert SandboxedGrading(reuse_results_from=[str(good)], timeout=100).reused(path, "ann", RUBRIC) is None
    assert SandboxedGrading().reused(path, "ann", RUBRIC) is None  # reuse is off unless configured


def test_grade_all_keeps_a_stored_result_only_when_every_report_can_read_it(tmp_path):
    from autograder.grading.batch import Entry, result_path, stale_reason
    from autograder.host.intake import submission_sha256

    submission = write_notebook(student_notebook("transformer_block"), tmp_path / "alice.ipynb")
    entry = Entry("alice", submission, tmp_path)
    result = dataclasses.replace(awkward_result(), sha256=submission_sha256(submission, tmp_path))
    data = stored(result, cells_sha256="c" * 64, assignment_fingerprint="f" * 64)
    path = result_path(tmp_path / "out", "alice")
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    components = fingerprint.fingerprint_components(RUBRIC, Limits())
    assert stale_reason(tmp_path / "out", entry, "f" * 64, components, RUBRIC) is None
    del data["extra_data"]["parts"]["attention"]  # same file, same fingerprint, but no report could show it
    path.write_text(json.dumps(data))
    assert stale_reason(tmp_path / "out", entry, "f" * 64, components, RUBRIC) == (
        f"its result is unreadable ({path.name}: its parts are not the rubric's)")
