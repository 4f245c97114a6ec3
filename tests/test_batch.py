"""grade-all: both layouts, results written as they are made, a killed or stopped batch resumed without
regrading, and student ids that are text whatever bytes the file names hold."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from autograder.samples import UNBIASED_VARIANCE, student_notebook, write_notebook
from conftest import REPO, run_cli
from test_cli import JUDGING_SETTLES, slow_notebook, start_cli, wait_for


def test_nbgrader_layout_and_flat_folder_give_the_same_grades(tmp_path):
    flat, nested = tmp_path / "flat", tmp_path / "course" / "submitted"
    for student, mutations in {"ann": [], "ben": [UNBIASED_VARIANCE]}.items():
        write_notebook(student_notebook(mutations), flat / f"{student}.ipynb")
        write_notebook(student_notebook(mutations), nested / student / "transformer_block" / "transformer_block.ipynb")
    for source, out in [(flat, tmp_path / "out-flat"), (tmp_path / "course", tmp_path / "out-nested")]:
        done = run_cli("grade-all", source, "-o", out)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "out-flat" / "grades.csv").read_text() == (tmp_path / "out-nested" / "grades.csv").read_text()
    rows = (tmp_path / "out-flat" / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student,score,max_score,layer_norm") and rows[1].startswith("ann,100,100")


def test_killed_batch_resumes_without_regrading_or_losing_results(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    for i in range(3):
        write_notebook(student_notebook(), folder / f"s{i}.ipynb")
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
    assert rows[1:] == [f"s{i},100,100,20,25,25,20,10" for i in range(3)]


def test_changed_submission_is_regraded(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    path = write_notebook(student_notebook(), folder / "s.ipynb")
    assert run_cli("grade-all", folder, "-o", out).returncode == 0
    write_notebook(student_notebook([UNBIASED_VARIANCE]), path)
    done = run_cli("grade-all", folder, "-o", out)
    assert "already graded" not in done.stderr
    assert not (out / "grades.csv").read_text().splitlines()[1].startswith("s,100,")


@pytest.mark.parametrize("signum, jobs", [(signal.SIGINT, 1), (signal.SIGTERM, 2)],
                         ids=["SIGINT", "SIGTERM-jobs-2"])
def test_a_signal_stops_the_batch_and_records_nothing_for_the_submission_in_progress(tmp_path, signum, jobs):
    folder, out = tmp_path / "class", tmp_path / "out"
    write_notebook(student_notebook(), folder / "a.ipynb")
    slow_notebook(folder / "b.ipynb")  # judged for a minute or more
    batch = start_cli("grade-all", folder, "-o", out, "--jobs", str(jobs), "--request-timeout", "30")
    wait_for(lambda: (out / "a.json").exists(), batch)
    time.sleep(JUDGING_SETTLES)  # b's judge is running
    batch.send_signal(signum)
    _, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 128 + signum, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"python -m autograder: stopped by {signal.Signals(signum).name}")
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]  # no b.json, no grades.csv, no half-written file

    rerun = run_cli("grade-all", folder, "-o", out, "--request-timeout", "1")  # b's slow checks time out: quick
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
