"""grade-all on a Dask cluster: a real scheduler and real workers, started with the `dask` command line on
localhost.  The same grades as a local batch, a worker killed mid-batch loses nothing, a stopped client
records nothing more, no scheduler and a worker with another copy of the assignment are refused."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest
from distributed import Client

from autograder.authoring.assignment import Assignment
from autograder.authoring.samples import student_notebook, write_notebook
from conftest import UNBIASED_VARIANCE
from conftest import REPO, run_cli
from test_cli import start_cli, wait_for

DASK = Path(sys.executable).with_name("dask")
TIMING = {"execution_time", "seconds"}  # may differ between two gradings of the same file


class Cluster:
    """Scheduler and workers as process groups of their own, so that each can be killed whole."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.groups: list[subprocess.Popen] = []
        self.address = ""

    def _start(self, name: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")
        process = subprocess.Popen([str(DASK), *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        log.close()
        self.groups.append(process)
        return process

    def start_scheduler(self) -> str:
        file = self.folder / "scheduler.json"
        process = self._start("scheduler", "scheduler", "--scheduler-file", str(file), "--host", "127.0.0.1",
                              "--port", "0", "--no-dashboard")
        deadline = time.monotonic() + 60
        while not self.address:
            assert process.poll() is None and time.monotonic() < deadline, (self.folder / "scheduler.log").read_text()
            try:
                self.address = json.loads(file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        return self.address

    def start_worker(self, name: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.Popen:
        return self._start(name, "worker", self.address, "--name", name, "--nthreads", "1", "--host", "127.0.0.1",
                           "--no-dashboard", cwd=cwd, env=env)

    def wait_for_workers(self, *names: str) -> None:
        with Client(self.address, timeout=30, set_as_default=False) as client:
            deadline = time.monotonic() + 120
            while not set(names) <= {w["name"] for w in client.scheduler_info()["workers"].values()}:
                assert time.monotonic() < deadline, f"workers {names} did not join"
                time.sleep(0.2)

    def stop(self) -> None:
        for process in self.groups:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.groups:
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        running.start_scheduler()
        running.start_worker("w1")
        running.start_worker("w2")
        running.wait_for_workers("w1", "w2")
        yield running
    finally:
        running.stop()


def write_class(folder: Path, students: dict[str, list]) -> None:
    for student, mutations in students.items():
        write_notebook(student_notebook("transformer_block", mutations), folder / f"{student}.ipynb")


def without_timing(results: dict) -> dict:
    return {k: without_timing(v) if isinstance(v, dict) else v for k, v in results.items() if k not in TIMING}


def differences(a: dict, b: dict, where: str = "") -> list[str]:
    found = []
    for key in sorted(set(a) | set(b)):
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            found += differences(a[key], b[key], f"{where}{key}.")
        elif a.get(key) != b.get(key):
            found.append(f"{where}{key}: {str(a.get(key))[:200]!r} != {str(b.get(key))[:200]!r}")
    return found


def graded_once(stderr: str, students: list[str]) -> bool:
    """Each student's grade was logged exactly once (a result is logged when it is recorded)."""
    logged = Counter(line.split(":", 1)[0] for line in stderr.splitlines() if " / " in line)
    return logged == Counter(students)


def test_the_cluster_gives_the_grades_a_local_batch_gives(cluster, tmp_path):
    folder = tmp_path / "class"
    write_class(folder, {"alice": [], "bob": [UNBIASED_VARIANCE]})
    write_notebook(student_notebook("transformer_block", solved=False), folder / "carol.ipynb")
    source = "\n\n".join(["import math\nimport torch\nimport torch.nn as nn", *Assignment("transformer_block").solution_code().values()])
    (folder / "dave.py").write_text(source + "\n")  # the suffix travels with the bytes
    local = run_cli("grade-all", folder, "-o", tmp_path / "local", "--jobs", "2")
    assert local.returncode == 0, local.stderr
    remote = run_cli("grade-all", folder, "-o", tmp_path / "remote", "--scheduler", cluster.address)
    assert remote.returncode == 0, remote.stderr
    assert graded_once(remote.stderr, ["alice", "bob", "carol", "dave"]), remote.stderr

    assert (tmp_path / "remote" / "grades.csv").read_text() == (tmp_path / "local" / "grades.csv").read_text()
    assert remote.stdout == local.stdout
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert sorted(p.name for p in (tmp_path / "remote").iterdir()) == names  # no temporary file left over
    for name in names:
        if name.endswith(".json"):
            mine, theirs = (json.loads((tmp_path / side / name).read_text()) for side in ("remote", "local"))
            mine, theirs = without_timing(mine), without_timing(theirs)
            assert mine == theirs, (name, differences(mine, theirs))

    rerun = run_cli("grade-all", folder, "-o", tmp_path / "remote", "--scheduler", cluster.address)
    assert rerun.returncode == 0, rerun.stderr
    assert all(f"{s}: already graded, kept" in rerun.stderr for s in ["alice", "bob", "carol", "dave"])
    assert " / " not in rerun.stderr


def test_entries_that_are_not_regular_files_score_on_the_cluster_as_in_a_local_batch(cluster, tmp_path):
    """The client reads every submission as a local batch does (autograder/host/intake.py) and sends a refusal
    as its reason: the worker never follows a link or waits on a FIFO, and the student is told why."""
    from conftest import NOT_REGULAR, write_not_regular_entries

    flat, _ = write_not_regular_entries(tmp_path)
    (flat / "growing.ipynb").unlink()
    remote = run_cli("grade-all", flat, "-o", tmp_path / "remote", "--scheduler", cluster.address)
    assert remote.returncode == 0, remote.stderr
    graded = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "remote").glob("*.json")}
    assert graded.pop("alice")["score"] == 100 and set(graded) == set(NOT_REGULAR)
    for student, says in NOT_REGULAR.items():
        assert graded[student]["score"] == 0 and says in graded[student]["output"], graded[student]["output"][:500]


def test_a_worker_killed_mid_batch_loses_nothing(cluster, tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    students = {"s0": [], "s1": [UNBIASED_VARIANCE], "s2": [], "s3": [UNBIASED_VARIANCE]}
    write_class(folder, students)
    victim = cluster.start_worker("victim")
    cluster.wait_for_workers("w1", "w2", "victim")
    batch = start_cli("grade-all", folder, "-o", out, "--scheduler", cluster.address)
    with Client(cluster.address, timeout=30, set_as_default=False) as observer:
        def victim_is_grading() -> bool:
            workers = observer.scheduler_info()["workers"]
            address = next((a for a, w in workers.items() if w["name"] == "victim"), None)
            return bool(address and observer.processing([address]).get(address))

        wait_for(victim_is_grading, batch)
    time.sleep(2)  # into its grading: the kill lands while a submission is judged there
    os.killpg(victim.pid, signal.SIGKILL)  # the nanny, the worker and (by parent-death signal) its sandbox
    victim.wait(timeout=30)
    _, stderr = batch.communicate(timeout=600)
    assert batch.returncode == 0, stderr
    assert graded_once(stderr, list(students)), stderr
    assert sorted(p.name for p in out.iterdir()) == ["grades.csv", *(f"{s}.json" for s in students)]
    rows = (out / "grades.csv").read_text().splitlines()[1:]
    assert [r.split(",")[:2] for r in rows][::2] == [["s0", "100"], ["s2", "100"]]
    assert all(r.split(",")[1] != "100" for r in rows[1::2])  # the unbiased variance loses points


def test_a_stopped_client_records_nothing_more(cluster, tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    write_class(folder, {"a": [], "b": [], "c": []})
    batch = start_cli("grade-all", folder, "-o", out, "--scheduler", cluster.address)
    wait_for(lambda: out.is_dir() and any(out.glob("*.json")), batch, seconds=300)
    batch.send_signal(signal.SIGINT)
    _, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 130, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("python -m autograder: stopped by SIGINT"), stderr
    assert "Traceback" not in stderr and "distributed" not in stderr, stderr
    recorded = sorted(p.name for p in out.iterdir())
    assert "grades.csv" not in recorded and len(recorded) < 3, recorded  # two workers, three submissions
    assert all(name.endswith(".json") for name in recorded), recorded  # nothing half-written


def test_no_scheduler_is_one_line_and_exit_2(tmp_path):
    write_class(tmp_path / "class", {"a": []})
    done = run_cli("grade-all", tmp_path / "class", "-o", tmp_path / "out", "--scheduler", "tcp://127.0.0.1:1",
                   timeout=60)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("python -m autograder: error: ") and "tcp://127.0.0.1:1" in line, line
    assert not (tmp_path / "out" / "a.json").exists()


def test_a_worker_with_another_copy_of_the_assignment_is_refused(tmp_path):
    # a worker machine whose checkout holds a different hidden suite: a real copy of the checkout, edited
    copy = tmp_path / "checkout"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".git", ".venv", ".hypothesis", "build", "*.egg-info",
                                                              "__pycache__"))
    with open(copy / "assignments" / "transformer_block" / "test_layer_norm.py", "a") as suite:
        suite.write("\n\ndef test_only_on_this_worker():\n    pass\n")
    stale = Cluster(tmp_path)
    try:
        stale.start_scheduler()
        stale.start_worker("stale", cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)})
        stale.wait_for_workers("stale")
        with Client(stale.address, timeout=30, set_as_default=False) as client:  # it runs the copy's kit
            assert all(path.startswith(str(copy)) for path in
                       client.run(lambda: __import__("importlib").import_module("autograder.grading.rubric").__file__).values())
        write_class(tmp_path / "class", {"a": []})
        done = run_cli("grade-all", tmp_path / "class", "-o", tmp_path / "out", "--scheduler", stale.address)
    finally:
        stale.stop()
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("python -m autograder: error: worker ") and "different copy" in line, done.stderr
    assert not (tmp_path / "out" / "a.json").exists()


def test_a_stopped_grading_reaches_the_client_as_an_ordinary_exception(tmp_path, monkeypatch):
    # a KeyboardInterrupt (JudgingInterrupted is one) escaping a task would shut the Dask worker down
    from autograder.grading import batch, cluster
    from autograder.grading.fingerprint import assignment_fingerprint
    from autograder.model.interrupts import JudgingInterrupted
    from autograder.grading.rubric import load_rubric
    from autograder.model.limits import Limits

    def interrupted(path, rubric, limits, **how):
        raise JudgingInterrupted("judging stopped while judging attention")

    monkeypatch.setattr(batch, "grade_report", interrupted)
    limits = Limits(isolate=False)
    fingerprint = assignment_fingerprint(load_rubric("transformer_block"), limits)
    with pytest.raises(cluster.GradingStopped, match="a: judging stopped while judging attention on worker "):
        cluster.grade_submission("a", "a.ipynb", b"{}", "transformer_block", limits, fingerprint)
    with pytest.raises(cluster.WorkerRefused, match="different copy"):
        cluster.grade_submission("a", "a.ipynb", b"{}", "transformer_block", limits, "0" * 64)
