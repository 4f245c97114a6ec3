"""grade-all: both layouts, results written as they are made, a killed or stopped batch resumed without
regrading, results kept only for the same file and the same assignment, a progress bar on a terminal only,
and student ids that are text whatever bytes the file names hold."""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from autograder.grading.batch import STALE_ASSIGNMENT, by_hand_line
from autograder.grading.rubric import load_rubric
from autograder.authoring.samples import student_notebook, write_notebook
from conftest import UNBIASED_VARIANCE
from conftest import REPO, run_cli
from test_cli import JUDGING_SETTLES, slow_notebook, start_cli, wait_for


def test_nbgrader_layout_and_flat_folder_give_the_same_grades(tmp_path):
    flat, nested = tmp_path / "flat", tmp_path / "course" / "submitted"
    for student, mutations in {"ann": [], "ben": [UNBIASED_VARIANCE]}.items():
        write_notebook(student_notebook("transformer_block", mutations), flat / f"{student}.ipynb")
        write_notebook(student_notebook("transformer_block", mutations), nested / student / "transformer_block" / "transformer_block.ipynb")
    for source, out in [(flat, tmp_path / "out-flat"), (tmp_path / "course", tmp_path / "out-nested")]:
        done = run_cli("grade-all", source, "-o", out)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "out-flat" / "grades.csv").read_text() == (tmp_path / "out-nested" / "grades.csv").read_text()
    rows = (tmp_path / "out-flat" / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student,score,max_score,layer_norm") and rows[1].startswith("ann,100,100")


def test_killed_batch_resumes_without_regrading_or_losing_results(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    for i in range(3):
        write_notebook(student_notebook("transformer_block"), folder / f"s{i}.ipynb")
    batch = subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", str(folder), "-o", str(out)],
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = out / "s0.json"
    deadline = time.monotonic() + 120
    while not first.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(batch.pid, signal.SIGKILL)  # the grader and its children, mid-batch
    batch.wait()
    assert first.exists() and not (out / "s2.json").exists()
    kept = first.stat().st_mtime_ns
    json.loads(first.read_text())  # complete, not half-written

    done = run_cli("grade-all", folder, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "s0: already graded, kept" in done.stderr
    assert first.stat().st_mtime_ns == kept
    rows = (out / "grades.csv").read_text().splitlines()
    points = ",".join(f"{p.points:g}" for p in load_rubric("transformer_block").parts)
    assert rows[1:] == [f"s{i},100,100,{points}" for i in range(3)]


def test_changed_submission_is_regraded(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    path = write_notebook(student_notebook("transformer_block"), folder / "s.ipynb")
    assert run_cli("grade-all", folder, "-o", out).returncode == 0
    write_notebook(student_notebook("transformer_block", [UNBIASED_VARIANCE]), path)
    done = run_cli("grade-all", folder, "-o", out)
    assert "s: the submission changed since it was graded: regraded" in done.stderr
    assert not (out / "grades.csv").read_text().splitlines()[1].startswith("s,100,")


def unreadable_class(folder):
    """Files that are not notebooks: each is graded (0 points) in a moment, which is all these tests need."""
    folder.mkdir()
    for student in ("a", "b"):
        (folder / f"{student}.ipynb").write_text(f"{student} handed in no notebook")
    return folder


def test_a_result_is_kept_only_for_the_same_file_graded_against_the_same_assignment(tmp_path):
    folder, out = unreadable_class(tmp_path / "class"), tmp_path / "out"
    first = run_cli("grade-all", folder, "-o", out)
    assert first.returncode == 0, first.stderr
    # no terminal: one plain line per submission, no progress bar drawn into the log; then the written answers
    # that grades.csv leaves to the instructor
    *graded, by_hand = first.stderr.splitlines()
    assert [line.split(": ")[0] for line in graded] == ["a", "b"], first.stderr
    assert by_hand == by_hand_line(load_rubric("transformer_block")), first.stderr

    tampered = json.loads((out / "b.json").read_text())
    tampered["extra_data"]["assignment_fingerprint"] = "0" * 64
    (out / "b.json").write_text(json.dumps(tampered))
    rerun = run_cli("grade-all", folder, "-o", out)
    assert rerun.returncode == 0, rerun.stderr
    assert "a: already graded, kept" in rerun.stderr
    assert f"b: {STALE_ASSIGNMENT}: regraded" in rerun.stderr

    other_limits = run_cli("grade-all", folder, "-o", out, "--timeout", "100")  # a limit is part of the assignment
    assert other_limits.returncode == 0, other_limits.stderr
    assert "already graded" not in other_limits.stderr
    # each result stores what it was graded against, input by input: the log says which one changed
    assert all(f"{s}: the assignment changed since it was graded: the limit timeout changed (180 -> 100): regraded"
               in other_limits.stderr for s in "ab"), other_limits.stderr
    assert "already graded, kept" in run_cli("grade-all", folder, "-o", out, "--timeout", "100").stderr


def test_a_terminal_gets_a_progress_bar(tmp_path):
    folder, out = unreadable_class(tmp_path / "class"), tmp_path / "out"
    terminal, stderr = pty.openpty()  # a pseudo-terminal reporting no size, as under `script` or some CI runners
    batch = subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", str(folder), "-o", str(out),
                              "--jobs", "2"], cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=stderr)
    os.close(stderr)
    shown, deadline = b"", time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if select.select([terminal], [], [], 1)[0]:
                try:
                    chunk = os.read(terminal, 65536)
                except OSError:  # EIO: every process writing to the terminal has exited
                    break
                if not chunk:
                    break
                shown += chunk
    finally:
        os.close(terminal)
    assert batch.wait(timeout=60) == 0, shown
    text = shown.decode(errors="replace")
    assert "2/2" in text and "grading: 100%" in text, text  # tqdm's count and bar
    assert "a: 0 / 100" in text and "b: 0 / 100" in text  # the lines are still there, above the bar


@pytest.mark.parametrize("signum, jobs", [(signal.SIGINT, 1), (signal.SIGTERM, 2)],
                         ids=["SIGINT", "SIGTERM-jobs-2"])
def test_a_signal_stops_the_batch_and_records_nothing_for_the_submission_in_progress(tmp_path, signum, jobs):
    folder, out = tmp_path / "class", tmp_path / "out"
    write_notebook(student_notebook("transformer_block"), folder / "a.ipynb")
    slow_notebook(folder / "b.ipynb")  # judged for a minute or more
    batch = start_cli("grade-all", folder, "-o", out, "--jobs", str(jobs), "--request-timeout", "30")
    wait_for(lambda: (out / "a.json").exists(), batch)
    time.sleep(JUDGING_SETTLES)  # b's judge is running
    batch.send_signal(signum)
    _, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 128 + signum, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"python -m autograder: stopped by {signal.Signals(signum).name}")
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]  # no b.json, no grades.csv, no half-written file

    # the same limits (they are part of what a kept result must match); b now quick to grade
    write_notebook(student_notebook("transformer_block"), folder / "b.ipynb")
    rerun = run_cli("grade-all", folder, "-o", out, "--request-timeout", "30")
    assert rerun.returncode == 0, rerun.stderr
    assert "a: already graded, kept" in rerun.stderr and "b: " in rerun.stderr
    assert json.loads((out / "b.json").read_text())["extra_data"]["submission"] == "b.ipynb"
    assert [row.split(",")[0] for row in (out / "grades.csv").read_text().splitlines()[1:]] == ["a", "b"]


def test_a_file_name_that_is_not_utf8_gets_a_text_student_id(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    (folder / os.fsdecode(b"caf\xe9.ipynb")).write_bytes(b"not a notebook")  # unreadable: graded at once
    done = run_cli("grade-all", folder, "-o", out)
    assert done.returncode == 0, done.stderr
    raw = (out / "caf\\xe9.json").read_text(encoding="utf-8")
    results = json.loads(raw)
    assert results["score"] == 0 and "caf\\xe9.ipynb is not valid JSON" in results["output"]
    assert results["extra_data"]["submission"] == "caf\\xe9.ipynb" and "\\udc" not in raw  # no lone surrogate
    assert (out / "grades.csv").read_text(encoding="utf-8").splitlines()[1].startswith("caf\\xe9,0,100,")


def _reasons(out: Path) -> dict[str, tuple[float, str]]:
    return {p.stem: (r["score"], r["output"]) for p in out.glob("*.json") for r in [json.loads(p.read_text())]}


def test_no_entry_that_is_not_a_regular_file_steers_or_stops_the_batch(tmp_path):
    """Links (to a classmate, to the instructor's source notebook, to /dev/stdout, a linked student folder), a
    FIFO, a device and a folder named like a notebook, in both layouts, with stdout a pipe as in CI: each scores
    0 with its reason in its own row, alice keeps her 100, and the batch ends.  A file that grows while it is
    read is graded as it was read."""
    from conftest import NOT_REGULAR, NOT_REGULAR_NESTED, growing, write_not_regular_entries

    flat, course = write_not_regular_entries(tmp_path)
    for name, folder, expected in [("flat", flat, NOT_REGULAR), ("nested", course, NOT_REGULAR_NESTED)]:
        out = tmp_path / f"out-{name}"
        started = time.monotonic()
        with growing(flat / "growing.ipynb"):
            done = run_cli("grade-all", folder, "-o", out, "--jobs", "2", "--timeout", "20", timeout=300)
        seconds = time.monotonic() - started
        assert done.returncode == 0, done.stderr[-3000:]
        graded = _reasons(out)
        assert graded.pop("alice")[0] == 100
        if name == "flat":
            score, output = graded.pop("growing")
            assert score == 100 or (score == 0 and "growing.ipynb is larger than 20 MB" in output), output
        assert set(graded) == set(expected)
        for student, says in expected.items():
            assert graded[student][0] == 0 and says in graded[student][1], (student, graded[student][1][:500])
        rows = (out / "grades.csv").read_text().splitlines()
        assert len(rows) == 1 + len(expected) + 1 + (name == "flat")
        print(f"{name}: {len(rows) - 1} entries graded in {seconds:.1f} s")


def test_grade_all_says_what_grades_csv_leaves_to_the_instructor(tmp_path):
    """grades.csv holds the autograded points; the written answers, graded by hand, are named at the end."""
    from autograder.grading.batch import finish
    from autograder.grading.rubric import load_rubric

    rubric, said = load_rubric("transformer_block"), []
    finish(tmp_path, [], rubric, said.append)
    assert (tmp_path / "grades.csv").read_text().startswith("student,score,max_score,layer_norm,")
    answers = ", ".join(rubric.graded_by_hand)
    assert len(rubric.graded_by_hand) == len(rubric.parts) and said == [
        f"grades.csv holds the autograded points only (max 100): each notebook's {len(rubric.parts)} written answers "
        f"({rubric.points_by_hand:g} points: {answers}) are graded by hand, e.g. in nbgrader's formgrader"]
