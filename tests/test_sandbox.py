"""The sandbox's mechanisms, observed from inside the child, and the judge's distrust of what it returns.

Every mechanism is either active or named in a notice: never silently missing.
"""
from __future__ import annotations

import time

import pytest
import torch

from autograder.remote import RemoteSubmission
from autograder.sandbox import ROOT, Limits
from autograder.submission import StudentError, SubmissionBroken

PROBE = f'''
import os, socket, resource, json, sys

def probe():
    found = {{"uid": os.getuid(), "pid": os.getpid(), "cwd_entries": sorted(os.listdir(".")),
              "pgid_is_session": os.getpgid(0) == os.getsid(0)}}
    for name, path in [("solutions", {str(ROOT / "solutions" / "transformer_block.py")!r}),
                       ("suite", {str(ROOT / "autograder" / "assignments" / "transformer_block" / "rubric.toml")!r})]:
        try:
            open(path).read(1)
            found["read_" + name] = True
        except OSError:
            found["read_" + name] = False
    try:
        import solutions.transformer_block
        found["import_solutions"] = True
    except Exception:
        found["import_solutions"] = False
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        found["network"] = True
    except OSError:
        found["network"] = False
    found["rlimit_as"] = resource.getrlimit(resource.RLIMIT_AS)[0]
    found["rlimit_nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return found
'''


@pytest.fixture(scope="module")
def probed():
    submission = RemoteSubmission([PROBE], Limits(memory_mb=3000, open_files=128), [])
    try:
        yield submission.call("probe"), " ".join(submission.report.notices)
    finally:
        submission.close()


def active_or_noticed(active: bool, notices: str, word: str) -> None:
    assert active or word in notices, f"mechanism off without a notice mentioning {word!r}: {notices}"


def test_resource_limits_are_set(probed):
    found, notices = probed
    assert found["rlimit_as"] == 3000 << 20 and found["rlimit_nofile"] == 128


def test_own_empty_working_directory_and_session(probed):
    found, _ = probed
    assert found["cwd_entries"] == ["cells.json"] and found["pgid_is_session"]


def test_kit_files_are_out_of_reach(probed):
    found, notices = probed
    assert not found["import_solutions"]  # never on the child's path, whoever it runs as
    active_or_noticed(not found["read_solutions"] and not found["read_suite"], notices, "readable")


def test_unprivileged_user(probed):
    found, notices = probed
    active_or_noticed(found["uid"] != 0, notices, "runs as")


def test_no_network(probed):
    found, notices = probed
    active_or_noticed(not found["network"], notices, "network")


def test_pid_namespace(probed):
    found, notices = probed
    active_or_noticed(found["pid"] == 1, notices, "PID namespace")


# --- replies the judge must not believe ------------------------------------------------------------------

FORGER = '''
import json, os, struct, sys, time, torch
FD = json.loads(sys.argv[1])["sock_fd"]

def frame(header, payload=b""):
    head = json.dumps(header).encode()
    return struct.pack(">II", len(head), len(payload)) + head + payload

def garbage(x):
    os.write(FD, b"\\x00\\x00\\x00\\x05\\x00\\x00\\x00\\x00{{{{{")
    time.sleep(30)

def huge_header(x):
    os.write(FD, struct.pack(">II", 1 << 30, 0))
    time.sleep(30)

def wrong_id(x):
    os.write(FD, frame({"id": -5, "ok": True, "value": {"k": "float", "v": "1.0"}, "forbidden": []}))
    time.sleep(30)

def lying_shape(x):
    os.write(FD, frame({"id": 0, "ok": True, "forbidden": [],
                        "value": {"k": "tensor", "dtype": "float32", "shape": [1000, 1000], "nbytes": 8}}, b"\\0" * 8))
    time.sleep(30)

def too_big(x):
    return torch.zeros(40 << 20)   # 160 MB, over the reply limit

def slow(x):
    time.sleep(60)

def fine(x):
    return x * 2
'''


@pytest.fixture(scope="module")
def forger():
    submission = RemoteSubmission([FORGER], Limits(request_timeout=2, reply_mb=64, timeout=120), [])
    yield submission
    submission.close()


@pytest.mark.parametrize("function", ["garbage", "huge_header", "wrong_id", "lying_shape", "too_big", "slow"])
def test_bad_reply_fails_that_request_only(forger, function):
    started = time.monotonic()
    with pytest.raises((SubmissionBroken, StudentError)):
        forger.call(function, torch.ones(3))
    assert time.monotonic() - started < 10
    assert torch.equal(forger.call("fine", torch.ones(3)), torch.full((3,), 2.0))  # the next request is served
