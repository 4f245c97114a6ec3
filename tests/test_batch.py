"""grade-all: both layouts, results written as they are made, and a killed batch resumed without regrading."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from autograder.samples import UNBIASED_VARIANCE, student_notebook, write_notebook
from conftest import REPO, run_cli


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
