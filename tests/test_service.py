"""The warm grading service: `grade` through `serve` gives the grade the command line gives by itself, a
stopped client stops its grading and nothing else, a missing or outdated service means grading here, and the
socket is private."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from conftest import REPO, run_cli
from test_cli import JUDGING_SETTLES, sandboxes_under, slow_notebook, wait_for

ONE_BUG = ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)")


class Service:
    def __init__(self, folder: Path, cwd: Path = REPO) -> None:
        folder.mkdir(mode=0o700, exist_ok=True)
        self.socket = folder / "grading.sock"
        self.log = folder / "service.log"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "autograder", "serve", "--socket", str(self.socket),
                                             "--assignment", "transformer_block"], cwd=cwd, stdout=log, stderr=log)
        wait_for(lambda: "ready" in self.text(), self.process)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def grade(self, *args: str | Path, cwd: Path = REPO, **kwargs) -> subprocess.Popen:
        env = {**os.environ, "AUTOGRADER_SERVICE": str(self.socket)}
        return subprocess.Popen([sys.executable, "-m", "autograder", "grade", *map(str, args)], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(timeout=60) == 0, self.text()
        assert not self.socket.exists()  # removed on the way out


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    running = Service(tmp_path_factory.mktemp("service"))
    yield running
    running.stop()


def comparable(results: dict) -> dict:
    """results.json without what differs from one run to the next (timings)."""
    extra = {k: v for k, v in results["extra_data"].items() if k not in ("seconds", "load")}
    return {**{k: v for k, v in results.items() if k != "execution_time"}, "extra_data": extra}


@pytest.mark.parametrize("mistakes", [[], [ONE_BUG]], ids=["correct", "one-bug"])
def test_a_served_grade_is_the_grade_the_command_line_gives_alone(service, tmp_path, mistakes):
    notebook = write_notebook(student_notebook("transformer_block", mistakes), tmp_path / "s.ipynb")
    alone = run_cli("grade", notebook, "-o", tmp_path / "alone.json", "--junit", tmp_path / "alone.xml")
    served = service.grade(notebook, "-o", "served.json", "--junit", "served.xml", cwd=tmp_path)  # relative paths
    out, err = served.communicate(timeout=300)
    assert served.returncode == alone.returncode == 0, err
    assert (out, err) == (alone.stdout, alone.stderr)
    assert service.text().count(f"grade {notebook} -o served.json") == 1  # graded by the service, once
    assert comparable(json.loads((tmp_path / "served.json").read_text())) == \
        comparable(json.loads((tmp_path / "alone.json").read_text()))
    assert (tmp_path / "served.xml").exists()


def test_entries_that_are_not_regular_files_score_alike_served_and_alone(service, tmp_path):
    """`grade` of a link, a FIFO, a device or a folder named like a notebook: graded (0, the reason in the
    output), never followed, opened or waited on; the service and the command line alone agree."""
    from conftest import NOT_REGULAR, write_not_regular_entries

    flat, _ = write_not_regular_entries(tmp_path)
    for student, says in NOT_REGULAR.items():
        served = service.grade(flat / f"{student}.ipynb", "-o", tmp_path / f"{student}.json")
        out, err = served.communicate(timeout=120)
        assert served.returncode == 0, err
        result = json.loads((tmp_path / f"{student}.json").read_text())
        assert result["score"] == 0 and says in result["output"], result["output"][:500]
    for student in ("fifo", "stdout"):  # the command line by itself, stdout a pipe
        alone = run_cli("grade", flat / f"{student}.ipynb", "-o", tmp_path / f"alone-{student}.json", timeout=120)
        assert alone.returncode == 0, alone.stderr
        assert comparable(json.loads((tmp_path / f"alone-{student}.json").read_text())) == \
            comparable(json.loads((tmp_path / f"{student}.json").read_text()))


def test_bad_arguments_get_the_command_lines_own_error(service, tmp_path):
    served = service.grade(tmp_path / "missing.ipynb", "-o", tmp_path / "r.json")
    _, err = served.communicate(timeout=60)
    assert served.returncode == 2 and err == f"python -m autograder: error: {tmp_path / 'missing.ipynb'}: no such file\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_client_stops_its_grading_and_the_service_goes_on(service, tmp_path, signum):
    out = tmp_path / "results.json"
    client = service.grade(slow_notebook(tmp_path / "slow.ipynb"), "-o", out, "--request-timeout", "30",
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(lambda: sandboxes_under(service.process.pid), client)
    time.sleep(JUDGING_SETTLES)
    client.send_signal(signum)
    _, err = client.communicate(timeout=60)
    assert client.returncode == 128 + signum, err
    [line] = err.strip().splitlines()
    assert line.startswith(f"python -m autograder: stopped by {signal.Signals(signum).name} while judging ")
    assert "no grade written" in line and not out.exists()
    wait_for(lambda: not sandboxes_under(service.process.pid), service.process, 30)  # its sandbox is gone
    again = service.grade(write_notebook(student_notebook("transformer_block"), tmp_path / "s.ipynb"), "-o", out)
    assert again.wait(timeout=300) == 0 and json.loads(out.read_text())["score"] == 100


def test_without_a_service_the_command_grades_by_itself(tmp_path):
    notebook = write_notebook(student_notebook("transformer_block", [ONE_BUG]), tmp_path / "s.ipynb")
    env = {**os.environ, "AUTOGRADER_SERVICE": str(tmp_path / "nothing.sock")}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(notebook), "-o", str(tmp_path / "r.json")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"python -m autograder: no grading service at {tmp_path / 'nothing.sock'} (")
    assert done.stderr.endswith("); grading here\n")
    assert json.loads((tmp_path / "r.json").read_text())["score"] < 100


def test_a_service_whose_engine_changed_refuses_and_the_command_grades_by_itself(tmp_path):
    kit = tmp_path / "kit"  # a checkout of its own, whose engine this test may edit
    for name in ("autograder", "assignments", "release"):
        shutil.copytree(REPO / name, kit / name, ignore=shutil.ignore_patterns("__pycache__", "catalogue"))
    running = Service(tmp_path / "service", cwd=kit)
    try:
        command_line = kit / "autograder" / "commands" / "main.py"
        command_line.write_text(command_line.read_text() + "\n# edited\n")
        notebook = write_notebook(student_notebook("transformer_block"), tmp_path / "s.ipynb")
        client = running.grade(notebook, "-o", tmp_path / "r.json", cwd=kit)
        _, err = client.communicate(timeout=300)
        assert client.returncode == 0, err
        assert "engine changed since the service started; restart it); grading here" in err
        assert json.loads((tmp_path / "r.json").read_text())["score"] == 100
        assert "refused a request: the engine changed" in running.text()
    finally:
        running.stop()


def test_the_socket_is_private_and_has_one_service(service, tmp_path):
    assert oct(service.socket.stat().st_mode & 0o777) == "0o600"
    second = run_cli("serve", "--socket", service.socket)
    assert second.returncode == 2
    assert second.stderr == f"python -m autograder: error: {service.socket}: a grading service already listens there\n"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    refused = run_cli("serve", "--socket", shared / "grading.sock")
    assert refused.returncode == 2 and "must be this user's own and private (chmod 700)" in refused.stderr
    assert not (shared / "grading.sock").exists()


@pytest.mark.parametrize("answer, line", [
    (None, "stopped answering (EOFError); whether it wrote a grade is unknown"),
    ({"code": "0", "stdout": "", "stderr": ""}, "malformed answer from the grading service at"),
], ids=["hangs-up", "malformed"])
def test_a_service_that_hangs_up_or_answers_nonsense_is_one_line_and_exit_1(tmp_path, answer, line):
    import socket
    import threading

    from autograder import protocol

    path = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def fake() -> None:
        conn, _ = listener.accept()
        with conn:
            protocol.recv(conn)
            if answer is not None:
                protocol.send(conn, answer)

    threading.Thread(target=fake, daemon=True).start()
    try:
        env = {**os.environ, "AUTOGRADER_SERVICE": str(path)}
        done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "s.ipynb"), "-o",
                               str(tmp_path / "r.json")], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=60)
    finally:
        listener.close()
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and line in done.stderr, done.stderr
    assert not (tmp_path / "r.json").exists()
