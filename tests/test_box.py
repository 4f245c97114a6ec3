"""The child's way into its sandbox (autograder/child/box.py): one ordered list of steps per tier, reported in
the child's first message; a child that cannot take one of them, or is given no tier it knows, runs nothing;
and what the grader keeps between processes (the suites' stored references, autograder/judging/cache.py)
stays out of the submission's reach in both tiers, as root and as an ordinary user."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from autograder import REPO_ROOT as ROOT
from conftest import full_marks, part_scores
from tests.test_sandbox import _ordinary_user
from tests.test_tiers import DOCKER_LIKE, TIERS

SOLUTION = ROOT / "solutions" / "transformer_block.py"


@pytest.fixture(autouse=True, scope="module")
def interpreter_readable_by_every_uid():
    _ordinary_user()  # as tests/test_tiers.py: a root grader's sandbox uid must read the interpreter


def _run(prefix: list[str], script: str, *args: str, python: str = sys.executable, env: dict | None = None,
         cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([*prefix, python, "-c", script, *args], cwd=cwd or tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=300,
                          env=env or {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# --- the steps, as the child reports them --------------------------------------------------------------------

HELLO = """
import json, sys, time
from autograder import protocol
from autograder.host.sandbox import Sandbox
from autograder.model.limits import Limits
sandbox = Sandbox(["x = 1"], Limits(), [])
header, _ = protocol.recv(sandbox.sock, time.monotonic() + 60, max_payload=0)
print(json.dumps({"isolated": header["isolated"], "steps": header["steps"], "tier": sandbox.tier}))
sandbox.kill()
"""


@pytest.mark.parametrize("tier", TIERS)
def test_the_child_reports_the_steps_it_took_in_their_order(tier):
    from autograder.child import box

    hello = json.loads(_run(TIERS[tier], HELLO).stdout.strip().splitlines()[-1])
    number = box.NAMESPACES_TIER if tier == "namespaces" else box.LANDLOCK_TIER
    assert hello["isolated"] is True and hello["tier"] == number
    steps = hello["steps"]
    assert steps == ["choose_tier", *(step.__name__ for step in box.KERNEL[number] + box.INTERPRETER)]
    order = steps.index
    # the uid is final before the capability check, which reads /proc before Landlock takes /proc away;
    # Landlock is in place before the filter that refuses its calls; the audit hook is the very last
    assert order("change_uid") < order("no_new_privs") < order("check_capabilities") < order("install_seccomp")
    if tier == "landlock":
        assert order("check_capabilities") < order("restrict_landlock") < order("install_seccomp")
    assert order("parent_death_signal") > order("change_uid") and steps[-1] == "audit_provenance"


# --- a child that cannot isolate itself runs nothing -----------------------------------------------------------

REFUSED = """
import json, sys
import autograder.host.sandbox as sandbox
from autograder.grading.grade import grade_file
from autograder.grading.rubric import load_rubric
from autograder.model.limits import Limits
forced = json.loads(sys.argv[2])
sandbox.isolation_tier = lambda: (forced, ())  # the tier the grader sends its children, whatever the probe said
result = grade_file(__import__("pathlib").Path(sys.argv[1]), load_rubric("transformer_block"), Limits())
print(json.dumps({"score": result.score, "max": result.max_score, "failure": result.load.failure,
                  "loaded": result.load.loaded, "names": sorted(result.load.names)}))
"""


@pytest.mark.parametrize("forced,prefix,step", [
    (None, [], "choose_tier"),        # no tier: never "run anyway"
    (7, [], "choose_tier"),           # a tier the child does not know
    (1, DOCKER_LIKE, "unshare_namespaces"),  # a tier the kernel refuses (namespaces in a container)
], ids=["no tier", "unknown tier", "tier the kernel refuses"])
def test_a_child_that_cannot_isolate_runs_no_cell_and_scores_nothing(forced, prefix, step, tmp_path):
    marker = tmp_path / "ran"
    submission = tmp_path / "known_good.py"
    # the known-good solution, with a cell that would leave a mark wherever a cell can write
    submission.write_text(SOLUTION.read_text() + f"\n# %%\nopen({str(marker)!r}, 'w').write('ran')\n")
    found = json.loads(_run(prefix, REFUSED, str(submission), json.dumps(forced)).stdout.strip().splitlines()[-1])
    assert found["score"] == 0 and found["max"] > 0, found
    assert not found["loaded"] and found["names"] == [], found  # not a cell ran, not a name was defined
    assert f"could not be set up ({step}:" in found["failure"] and "was not run" in found["failure"], found
    assert not marker.exists()


# --- the suites' stored references --------------------------------------------------------------------------

RAID = """
import json, os

def _attempt(tried, name, action):
    try:
        action()
        tried[name] = True
    except OSError:
        tried[name] = False

def raid(folder, entry):
    tried, target = {}, os.path.join(folder, entry)
    _attempt(tried, "list", lambda: os.listdir(folder))
    _attempt(tried, "read", lambda: open(target, "rb").read(1))
    _attempt(tried, "overwrite", lambda: open(target, "r+b").write(b"forged"))
    _attempt(tried, "truncate", lambda: os.truncate(target, 0))
    def replace():
        with open("forged.pt", "wb") as forged:
            forged.write(b"forged")
        os.replace("forged.pt", target)
    _attempt(tried, "replace", replace)
    _attempt(tried, "plant", lambda: open(os.path.join(folder, "references-planted.pt"), "wb").write(b"x"))
    _attempt(tried, "plant a link", lambda: os.symlink("/dev/zero", os.path.join(folder, "references-link.pt")))
    _attempt(tried, "hard link", lambda: os.link(target, "taken.pt"))
    _attempt(tried, "remove", lambda: os.unlink(target))
    _attempt(tried, "rename", lambda: os.rename(target, target + ".old"))
    return tried
"""

PROBE_REFERENCES = """
import json, sys
from autograder.host.remote import RemoteSubmission
from autograder.model.limits import Limits
s = RemoteSubmission([sys.argv[1]], Limits(), [])
print(json.dumps({"tried": s.call("raid", sys.argv[2], sys.argv[3]), "isolation": s.report.isolation}))
s.close()
"""


@pytest.fixture(scope="module")
def stored_references(tmp_path_factory) -> Path:
    """A cache folder holding the references a real grade of transformer_block stored."""
    folder = tmp_path_factory.mktemp("filled") / "cache"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(SOLUTION), "--assignment",
                           "transformer_block", "-o", str(folder.parent / "r.json")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PATH": os.environ["PATH"], "AUTOGRADER_CACHE": str(folder)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(folder.glob("references-*.pt")), "grading stored no references (this test would show nothing)"
    return folder


def _gradescope_like(base: Path) -> tuple[str, Path]:
    """A virtual environment with the cache folder inside it, where Gradescope's setup.sh puts it
    (autograder/platforms/gradescope_supervisor.py: sys.prefix/autograder-cache), beside the allow-listed
    bin/ and site-packages: (its python, its cache folder)."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = next((venv / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    (packages / "this-kit.pth").write_text(ours + "\n")
    return str(venv / "bin" / "python"), venv / "autograder-cache"


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", TIERS)
def test_the_stored_references_cannot_be_read_changed_or_planted(tier, user, stored_references):
    prefix, uid = _ordinary_user() if user == "ordinary user" else ([], None)
    base = Path(tempfile.mkdtemp(prefix="autograder-references-"))
    try:
        base.chmod(0o755)
        python, cache = _gradescope_like(base)
        shutil.copytree(stored_references, cache)
        if uid is not None:  # the grader's own folders, as Gradescope's grader user has them
            os.chown(base, uid, -1)
            for path in (cache, *cache.iterdir()):
                os.chown(path, uid, -1)
        before = {p.name: p.read_bytes() for p in cache.iterdir()}
        entry = sorted(before)[0]
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "AUTOGRADER_CACHE": str(cache)}
        report = json.loads(_run([*prefix, *TIERS[tier]], PROBE_REFERENCES, RAID, str(cache), entry, python=python,
                                 env=env).stdout.strip().splitlines()[-1])
        assert report["isolation"].startswith("tier 1" if tier == "namespaces" else "tier 2")
        assert not any(report["tried"].values()), report["tried"]
        assert {p.name: p.read_bytes() for p in cache.iterdir()} == before

        # the same raid in a graded notebook's own cell: nothing changes, and the grade stays full
        hostile = base / "hostile.py"
        hostile.write_text(SOLUTION.read_text() + "\n# %%\n" + RAID + f"\nraid({str(cache)!r}, {entry!r})\n")
        hostile.chmod(0o644)
        out = base / "results.json"
        done = subprocess.run([*prefix, *TIERS[tier], python, "-m", "autograder", "grade", str(hostile),
                               "--assignment", "transformer_block", "-o", str(out)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, env={**env, "LANG": "C.UTF-8"})
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads(out.read_text())
        assert part_scores(results) == full_marks(results)
        assert {p.name: p.read_bytes() for p in cache.iterdir() if p.name in before} == before
        assert not [p.name for p in cache.iterdir() if "planted" in p.name or "link" in p.name]
    finally:
        shutil.rmtree(base, ignore_errors=True)
