"""One way to find and read a submission (autograder/host/intake.py, autograder.grading.batch.discover): only a regular
file inside the folder it was found in is read, no symbolic link is followed on the way to it, nothing else is
opened, and every read is bounded.  The front ends grading these layouts end to end: tests/test_batch.py."""
from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from autograder.grading.batch import discover
from autograder.host import intake
from autograder.host.intake import UnreadableSubmission, read_submission, submission_sha256

NOTEBOOK = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'


def _refused(path: Path, within: Path) -> str:
    with pytest.raises(UnreadableSubmission) as info:
        read_submission(path, within)
    return str(info.value)


def test_a_regular_file_is_read_whole_and_hashed_as_read(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(NOTEBOOK)
    assert read_submission(tmp_path / "alice.ipynb") == NOTEBOOK
    assert submission_sha256(tmp_path / "alice.ipynb") == __import__("hashlib").sha256(NOTEBOOK).hexdigest()


def test_a_link_anywhere_below_the_folder_is_refused_by_what_it_is(tmp_path):
    submitted = tmp_path / "submitted"
    (submitted / "alice" / "hw").mkdir(parents=True)
    (submitted / "alice" / "hw" / "hw.ipynb").write_bytes(NOTEBOOK)
    (submitted / "mallory" / "hw").mkdir(parents=True)
    (submitted / "mallory" / "hw" / "hw.ipynb").symlink_to(submitted / "alice" / "hw" / "hw.ipynb")
    (submitted / "eve").mkdir()
    (submitted / "eve" / "hw").symlink_to(submitted / "alice" / "hw")
    (submitted / "trudy").symlink_to(submitted / "alice")
    assert _refused(submitted / "mallory/hw/hw.ipynb", submitted) == "mallory/hw/hw.ipynb is a symbolic link, not a notebook"
    assert _refused(submitted / "eve/hw/hw.ipynb", submitted) == "eve/hw is a symbolic link, not a folder"
    assert _refused(submitted / "trudy/hw/hw.ipynb", submitted) == "trudy is a symbolic link, not a folder"
    assert submission_sha256(submitted / "trudy/hw/hw.ipynb", submitted) == ""
    assert read_submission(submitted / "alice/hw/hw.ipynb", submitted) == NOTEBOOK


def test_nothing_but_a_regular_file_is_opened(tmp_path):
    os.mkfifo(tmp_path / "fifo.ipynb")
    (tmp_path / "folder.ipynb").mkdir()
    (tmp_path / "stdout.ipynb").symlink_to("/dev/stdout")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "socket.py"))
    started = time.monotonic()
    assert _refused(tmp_path / "fifo.ipynb", tmp_path) == "fifo.ipynb is a FIFO (named pipe), not a notebook"
    assert _refused(tmp_path / "folder.ipynb", tmp_path) == "folder.ipynb is a folder, not a notebook"
    assert _refused(tmp_path / "stdout.ipynb", tmp_path) == "stdout.ipynb is a symbolic link, not a notebook"
    assert _refused(tmp_path / "socket.py", tmp_path) == "socket.py is a socket, not a Python file"
    assert time.monotonic() - started < 1  # the FIFO was never opened: nobody writes to it
    listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root (CI runs as root)")
def test_a_device_is_refused_without_opening_it(tmp_path):
    os.mknod(tmp_path / "zero.ipynb", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero: endless
    assert _refused(tmp_path / "zero.ipynb", tmp_path) == "zero.ipynb is a character device, not a notebook"


def test_reading_is_bounded_even_while_the_file_grows(tmp_path, monkeypatch):
    monkeypatch.setattr(intake, "MAX_SUBMISSION_BYTES", 1 << 20)
    path = tmp_path / "growing.py"
    path.write_bytes(b"x = 1\n")
    stop = threading.Event()

    def grow() -> None:
        with path.open("ab") as handle:
            while not stop.is_set():
                handle.write(b"#" * 65536)
                handle.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        time.sleep(0.05)
        for _ in range(3):
            try:
                data = read_submission(path)
                assert len(data) <= 1 << 20
            except UnreadableSubmission as exc:
                assert str(exc) == "growing.py is larger than 1 MB"
    finally:
        stop.set()
        writer.join()


def test_a_path_outside_its_folder_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    assert "is not inside" in _refused(tmp_path / "a.py", tmp_path / "elsewhere")


def test_every_name_where_a_submission_should_be_is_an_entry_of_its_own(tmp_path):
    """discover lists links, FIFOs and folders named like submissions too, each as its student's own entry, so
    that each scores 0 with its reason instead of vanishing or stopping the batch."""
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "alice.ipynb").write_bytes(NOTEBOOK)
    (flat / "mallory.ipynb").symlink_to(flat / "alice.ipynb")
    os.mkfifo(flat / "fifo.ipynb")
    (flat / "folder.ipynb").mkdir()
    (flat / "notes.txt").write_text("not a submission")
    assert [(e.student, e.path.name, e.root) for e in discover(flat, "hw")] == [
        ("alice", "alice.ipynb", flat), ("fifo", "fifo.ipynb", flat), ("folder", "folder.ipynb", flat),
        ("mallory", "mallory.ipynb", flat)]
    course = tmp_path / "course"
    submitted = course / "submitted"
    (submitted / "alice" / "hw").mkdir(parents=True)
    (submitted / "alice" / "hw" / "hw.ipynb").write_bytes(NOTEBOOK)
    (submitted / "bob" / "hw").mkdir(parents=True)
    (submitted / "bob" / "hw" / "renamed.ipynb").write_bytes(NOTEBOOK)
    (submitted / "eve").mkdir()
    (submitted / "eve" / "hw").symlink_to(submitted / "alice" / "hw")
    (submitted / "trudy").symlink_to(submitted / "alice")
    (submitted / "walter" / "other").mkdir(parents=True)  # another assignment only: not an entry
    found = {e.student: e.path.relative_to(submitted).as_posix() for e in discover(course, "hw")}
    assert found == {"alice": "alice/hw/hw.ipynb", "bob": "bob/hw/renamed.ipynb", "eve": "eve/hw/hw.ipynb",
                     "trudy": "trudy/hw/hw.ipynb"}
    assert all(e.root == submitted for e in discover(course, "hw"))
