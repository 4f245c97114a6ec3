"""A sandbox's scratch folder is removed whatever its submission did to the modes of what it wrote there.

Tier 2's scratch folder lies on the host, and Landlock does not cover chmod.  What a hostile submission can
leave: folders nested deeper than a recursive walk goes (shutil.rmtree fails on them even as root), every
permission taken away, the folder itself included, a link out of it and a FIFO.  The grader removes it as
root (the files are the sandbox uid's) and as an ordinary user (they are its own); a folder it truly cannot
remove is reported, never ignored.  The same builder runs inside real sandboxes in tests/test_hostile.py.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from autograder import REPO_ROOT as ROOT
from autograder.host import scratch
from tests.test_sandbox import _ordinary_user

# What a submission does to its own scratch folder, in a cell: the function of the container attack that
# also starts daemons (tests/test_hostile.py grades it whole, here and in containers)
ATTACK = Path(__file__).parent / "hostile_container" / "left_behind.py"
MAKE_UNREMOVABLE = ATTACK.read_text().split("# --- what the submission does")[0]
BUILD = MAKE_UNREMOVABLE + "import sys\nprint(make_unremovable(sys.argv[1], sys.argv[2]))\n"
REMOVE = "import sys\nfrom autograder.host import scratch\nprint(scratch.remove(sys.argv[1]))\n"


def _as(prefix: list[str], code: str, *args: str) -> str:
    done = subprocess.run([*prefix, sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          cwd="/", env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder every uid may write in, like /tmp (pytest's own folders are root's alone, and another pytest
    session may make them so again at any time)."""
    folder = Path(tempfile.mkdtemp(prefix="kit-shared-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        scratch.remove(folder)


@pytest.fixture
def shared():
    """A shared folder, and a folder in it, outside any scratch folder, that must stay untouched."""
    with shared_folder() as folder:
        outside = folder / "outside"
        outside.mkdir(mode=0o750)
        (outside / "kept").write_text("x")
        yield folder, outside


@pytest.mark.parametrize("remover", ["root", "ordinary user"])
def test_a_scratch_folder_with_every_mode_taken_away_is_removed(shared, remover):
    """Root removes what the sandbox's own uid left; an ordinary user removes what it left under its own uid."""
    folder, outside = shared
    if os.geteuid() != 0 and remover == "root":
        pytest.skip("needs root: the tests ran as an ordinary user, who is covered by the other case")
    submission_user, _ = _ordinary_user()
    top = folder / "autograder-test"
    _as(submission_user, "import os, sys; os.mkdir(sys.argv[1])", str(top))
    assert _as(submission_user, BUILD, str(top), str(outside)) == "made"
    assert top.exists() and top.stat().st_mode & 0o777 == 0
    assert _as([] if remover == "root" else submission_user, REMOVE, str(top)) == "None"
    assert not top.exists()
    assert outside.stat().st_mode & 0o777 == 0o750 and (outside / "kept").exists()


def test_a_folder_that_cannot_be_removed_is_said_in_one_line(shared):
    """Someone else's folder, which this uid may not change: the reason, never silence."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a folder an ordinary user cannot remove")
    user, _ = _ordinary_user()
    locked = shared[0] / "locked"
    locked.mkdir(mode=0o755)
    (locked / "file").write_text("x")
    why = _as(user, REMOVE, str(locked))
    assert why == f"its scratch folder {locked} could not be removed (Permission denied); remove it by hand"
    assert (locked / "file").exists()


def test_removing_a_folder_that_is_gone_is_no_problem(tmp_path):
    assert scratch.remove(tmp_path / "never-made") is None


def test_a_scratch_folder_left_behind_reaches_the_result(monkeypatch):
    """The removal happens when the sandbox ends, after the child's first message made the report: what it
    could not remove still reaches the report (and results.json) as a notice of kind `sandbox`."""
    from autograder.host.remote import RemoteSubmission
    from autograder.model.limits import Limits
    from autograder.model.load_report import NoticeKind

    submission = RemoteSubmission(["answer = 42"], Limits(), [])
    workdir = submission.sandbox.workdir
    assert submission.report.loaded
    said = f"its scratch folder {workdir} could not be removed (Permission denied); remove it by hand"
    removed = scratch.remove
    monkeypatch.setattr(scratch, "remove", lambda path: said if removed(path) is None else "unexpected")
    submission.close()
    assert not workdir.exists()
    assert [(n.kind, n.text) for n in submission.report.notices if "could not be removed" in n.text] == \
        [(NoticeKind.SANDBOX, said)]
