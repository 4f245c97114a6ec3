"""What the trusted side accepts from an ordinary notebook's child (autograder.host.notebook_run), and which of
a submission's files go beside it: fast, no sandbox started but in the last test."""
from __future__ import annotations

import json
import os

import pytest

from autograder.host import notebook_run
from autograder.host.notebook_run import Malformed, checked_cell, checked_output, gather_files
from autograder.model.limits import Limits

GOOD = [{"output_type": "stream", "name": "stdout", "text": "hi\n"},
        {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {}, "execution_count": 1},
        {"output_type": "display_data", "data": {"text/html": "<b>x</b>", "application/json": {"a": [1]}},
         "metadata": {}},
        {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": ["line 1", "line 2"]}]


def test_every_kind_of_output_a_kernel_sends_is_kept_as_it_is():
    assert [checked_output(o) for o in GOOD] == GOOD
    run = checked_cell({"cell": 3, "count": 7, "timed_out": False}, json.dumps(GOOD).encode(), 3)
    assert run.outputs == GOOD and run.execution_count == 7 and not run.timed_out


@pytest.mark.parametrize("output", [
    "text", ["list"], {"output_type": "exec"}, {"output_type": "stream", "name": "stdin", "text": "x"},
    {"output_type": "stream", "name": "stdout", "text": 5},
    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": "not a list"},
    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": [1]},
    {"output_type": "execute_result", "data": [], "metadata": {}, "execution_count": 1},
    {"output_type": "execute_result", "data": {}, "metadata": {}, "execution_count": "1"},
    {"output_type": "display_data", "data": {str(i): "" for i in range(101)}, "metadata": {}},
])
def test_an_output_no_kernel_sends_is_refused(output):
    with pytest.raises(Malformed):
        checked_output(output)


@pytest.mark.parametrize("header, payload", [
    ({"cell": 2, "count": 1, "timed_out": False}, b"[]"),           # another cell than expected
    ({"cell": True, "count": 1, "timed_out": False}, b"[]"),        # a bool is not a cell number
    ({"cell": 1, "count": -1, "timed_out": False}, b"[]"),
    ({"cell": 1, "count": 1, "timed_out": "no"}, b"[]"),
    ({"cell": 1, "count": 1, "timed_out": False}, b"{}"),           # not a list
    ({"cell": 1, "count": 1, "timed_out": False}, b"[" * 100 + b"]" * 100),  # nested past the bound
    ({"cell": 1, "count": 1, "timed_out": False}, b"\xff"),         # not UTF-8
    ({"cell": 1, "count": 1, "timed_out": False}, json.dumps([GOOD[0]] * 1001).encode()),
])
def test_a_cell_message_out_of_shape_is_refused(header, payload):
    with pytest.raises(Malformed):
        checked_cell(header, payload, 1)


def test_only_regular_files_below_the_folders_go_beside_the_notebook_and_later_folders_win(tmp_path):
    submitted, source, into = tmp_path / "submitted", tmp_path / "source", tmp_path / "into"
    (submitted / "data").mkdir(parents=True)
    source.mkdir()
    into.mkdir()
    (submitted / "data" / "x.csv").write_text("student's")
    (submitted / "shared.txt").write_text("student's")
    (source / "shared.txt").write_text("instructor's")
    (submitted / "answer.ipynb").write_text("{}")
    secret = tmp_path / "gradebook.db"
    secret.write_text("secret")
    (submitted / "link.txt").symlink_to(secret)
    (submitted / "linked_dir").symlink_to(tmp_path)
    os.mkfifo(submitted / "pipe")
    left_out = gather_files([submitted, source], into)
    files = sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file())
    assert files == ["data/x.csv", "shared.txt"]
    assert (into / "shared.txt").read_text() == "instructor's"
    assert sorted(line.split(":")[0] for line in left_out) == ["link.txt", "pipe"]


def test_files_past_the_bound_are_left_out_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(notebook_run, "MAX_FILES_BYTES", 10)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a").write_text("12345")
    (tmp_path / "in" / "b").write_text("1234567")
    (tmp_path / "out").mkdir()
    assert [line.split(":")[0] for line in gather_files([tmp_path / "in"], tmp_path / "out")] == ["b"]


def test_a_child_that_dies_or_lies_ends_the_run_with_the_reason_and_no_outputs_after_it():
    run = notebook_run.run_notebook(["print('first')", "import os; os._exit(3)", "print('never')"],
                                    Limits(cell_timeout=20))
    assert [cell.outputs[0]["text"] for cell in run.cells] == ["first\n"]
    assert "exited with status 3 while running cell 2" in run.died and not run.stuck
    # a cell that writes a message of its own on the child's socket, claiming its cell's outputs
    run = notebook_run.run_notebook([FORGER, "print('after')"], Limits(cell_timeout=20))
    assert run.cells == [] and "malformed message from the notebook's process after cell 1" in run.died
    assert run.isolation.startswith("tier")


FORGER = """import json, os, stat, struct
for fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            head = json.dumps({"cell": 1, "count": 1, "timed_out": False}).encode()
            body = json.dumps([{"output_type": "forged", "text": "full marks"}]).encode()
            os.write(fd, struct.pack(">II", len(head), len(body)) + head + body)
    except OSError:
        pass
"""
