"""Gradescope's run_autograder keeps only a result its own grader wrote (autograder/platforms/gradescope_supervisor.py),
even from a zip built with --allow-unisolated on a machine that refuses the sandbox, where the submission runs
with no isolation at all:

- a submission that writes results.json and kills its grader and every ancestor it can ends with a 0 that says the
  grader did not finish;
- a double-forked setsid() daemon that keeps overwriting results.json is dead when run_autograder returns, and
  the file is still the grader's, seconds later;
- an honest submission keeps its grade, carrying the run's token, which nothing the submission can read holds;
- a grader that exits 0 with a result not carrying the token, or writes into results/ itself, scores 0.

Run as root, like Gradescope: the grader then runs under a uid of its own, which must be able to run this
interpreter (see `shared_python`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from conftest import ASSIGNMENT, UNBIASED_VARIANCE, run_cli
from test_gradescope import VISIBILITY, check_specification, gradescope_root, not_graded_output, run_autograder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="run_autograder separates the grader's uid only as root")

REFUSED = "refused by this test"
# appended to the unpacked kit's sandbox module: this machine allows the sandbox, Gradescope's may not
REFUSE_THE_SANDBOX = f"\n\ndef isolation_refused() -> str | None:\n    return {REFUSED!r}\n"
FORGED = {"score": 100, "max_score": 100, "output": "forged", "tests": [], "extra_data": {"run_token": "0" * 64}}


def others_may_enter(path: str | Path) -> bool:
    """Whether a uid in none of the owners' groups may reach `path`: every folder on the way searchable by others."""
    real = Path(os.path.realpath(path))
    return all(folder.stat().st_mode & 0o001 for folder in [real, *real.parents] if folder.is_dir())


@pytest.fixture(scope="module")
def shared_python():
    """This interpreter, as a uid of its own can run it (Gradescope's lives in /usr and /opt).  Where this one
    lies in a folder only root may enter (pyenv under /root), a virtual environment of the system's Python of
    the same minor version that sees this environment's packages."""
    if others_may_enter(sys.base_prefix) and others_may_enter(sys.prefix):
        yield sys.executable
        return
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    packages = sysconfig.get_paths()["purelib"]
    if not base.is_file() or not others_may_enter(packages):
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} another uid may run")
    folder = Path(tempfile.mkdtemp(prefix="autograder-test-python-"))
    try:
        folder.chmod(0o755)
        subprocess.run([base, "-m", "venv", "--without-pip", folder / "venv"], check=True, capture_output=True)
        python = folder / "venv" / "bin" / "python"
        own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        Path(own, "test-packages.pth").write_text(packages + "\n")
        yield str(python)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def unisolated_zip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gradescope-unisolated") / "autograder.zip"
    done = run_cli("export", "gradescope", "--assignment", ASSIGNMENT, "-o", path, "--visibility", VISIBILITY,
                   "--allow-unisolated")
    assert done.returncode == 0, done.stderr[-3000:]
    return path


@pytest.fixture
def shared():
    """A folder the submission may write to, whatever its uid: what it did, for the test to read."""
    folder = Path(tempfile.mkdtemp(prefix="autograder-test-shared-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def refusing_root(archive: Path, folder: Path) -> Path:
    """Gradescope's layout, on a machine that refuses the sandbox."""
    root = gradescope_root(archive, folder)
    with open(root / "source" / "autograder" / "host" / "sandbox.py", "a", encoding="utf-8") as module:
        module.write(REFUSE_THE_SANDBOX)
    return root


def hand_in(root: Path, first_cell: str, mutations=()) -> None:
    """The reference solution (after `mutations`), with `first_cell` run before any other."""
    notebook = student_notebook(ASSIGNMENT, mutations)
    notebook["cells"].insert(0, {"cell_type": "code", "metadata": {}, "source": first_cell, "outputs": [],
                                 "execution_count": None})
    write_notebook(notebook, root / "submission" / f"{ASSIGNMENT}.ipynb")


def carries_a_token(results: dict) -> str:
    token = results["extra_data"]["run_token"]
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    return token


def check_results_folder(root: Path) -> None:
    """root's, and nobody else may write it."""
    folder = (root / "results").stat()
    assert (folder.st_uid, folder.st_mode & 0o777) == (0, 0o755)
    assert (root / "results" / "results.json").stat().st_uid == 0


# What the submission does, as Python source; {results}, {log} and {test} are filled in by each test.
FORGE = """
try:
    with open({results!r}, "w") as out:
        out.write(json.dumps({forged!r}))
    note("results.json: written")
except OSError as exc:
    note(f"results.json: {{exc.strerror}}")
"""
NOTE = """
import os
def note(line):
    with open({log!r}, "a") as out:
        out.write(f"{{os.getpid()}} {{line}}\\n")
"""
# Every ancestor that mentions autograder (run_autograder, its supervisor, the grader, the zygote), the farthest
# first, since the submission dies with its zygote, and the zygote with the grader.  Only ancestors, and none at
# or above the test: were the submission root, it would otherwise end every grader on this machine.
KILL_THE_ANCESTORS = """
import signal
def parent(pid):
    with open(f"/proc/{{pid}}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])
ancestors, pid = [], os.getppid()
while pid > 1 and pid != {test}:
    with open(f"/proc/{{pid}}/cmdline", "rb") as cmdline:
        if b"autograder" in cmdline.read():
            ancestors.append(pid)
    pid = parent(pid)
for pid in reversed(ancestors):
    note(f"killing {{pid}} (uid {{os.stat(f'/proc/{{pid}}').st_uid}})")
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:
        note(f"{{pid}}: {{exc.strerror}}")
os.kill(os.getppid(), signal.SIGKILL)
"""
# A daemon of its own session, reparented away from the grading, that overwrites results.json every half second
DAEMON = """
import time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note("daemon")
        time.sleep(2)
        while True:
""" + "\n".join("            " + line for line in FORGE.strip().splitlines()) + """
            time.sleep(0.5)
    os._exit(0)
os.wait()
"""
# What the submission can read: its environment and arguments, and every process's that it may open; and whether
# it can open the descriptors of the processes above it
SNOOP = """
import glob
seen = [repr(dict(os.environ))]
for path in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
    try:
        with open(path, "rb") as f:
            seen.append(f.read().decode(errors="replace"))
    except OSError:
        pass
with open({log!r} + ".seen", "w") as out:
    out.write("\\n".join(seen))
pid = os.getppid()
while pid > 1 and pid != {test}:
    try:
        note(f"descriptors of {{pid}}: {{len(os.listdir(f'/proc/{{pid}}/fd'))}}")
    except OSError as exc:
        note(f"descriptors of {{pid}}: {{exc.strerror}}")
    with open(f"/proc/{{pid}}/stat") as stat:
        pid = int(stat.read().rsplit(")", 1)[1].split()[1])
"""


def cell(root: Path, shared: Path, *parts: str) -> str:
    fill = {"results": str(root / "results" / "results.json"), "log": str(shared / "log"), "test": os.getpid(),
            "forged": FORGED}
    return "".join(part.format(**fill) for part in (NOTE, *parts))


def notes(shared: Path) -> str:
    return (shared / "log").read_text()


def test_a_submission_that_forges_results_and_kills_its_grader_scores_zero(unisolated_zip, shared_python, shared,
                                                                           tmp_path):
    root = refusing_root(unisolated_zip, tmp_path)
    hand_in(root, cell(root, shared, FORGE, KILL_THE_ANCESTORS))
    results, printed = run_autograder(root, AUTOGRADER_PYTHON=shared_python)
    check_specification(results)
    assert "the grader did not finish: it was killed by SIGKILL" in not_graded_output(results)
    carries_a_token(results)
    check_results_folder(root)
    said = notes(shared)
    assert "results.json: Permission denied" in said, said
    # run_autograder and its supervisor are root's: out of the submission's reach; the grader was not
    killed = re.findall(r"killing (\d+) \(uid (\d+)\)", said)
    assert [uid for _, uid in killed[:3]] == ["0", "0", killed[2][1]] and killed[2][1] != "0", said
    assert all(f"{pid}: Operation not permitted" in said for pid, _ in killed[:2]), said
    assert f"{killed[2][0]}: " not in said  # the grader died (the zygote and the submission with it)
    assert REFUSED in printed


def test_a_daemon_that_overwrites_results_is_dead_before_run_autograder_returns(unisolated_zip, shared_python,
                                                                                shared, tmp_path):
    root = refusing_root(unisolated_zip, tmp_path)
    hand_in(root, cell(root, shared, DAEMON), [UNBIASED_VARIANCE])
    results, _ = run_autograder(root, AUTOGRADER_PYTHON=shared_python)
    written = (root / "results" / "results.json").read_bytes()
    daemon = int(re.search(r"^(\d+) daemon$", notes(shared), re.M)[1])
    assert not Path(f"/proc/{daemon}").exists()
    time.sleep(3)  # were the daemon alive, it would have overwritten the file five times by now
    assert (root / "results" / "results.json").read_bytes() == written
    check_specification(results)
    assert 0 < results["score"] < results["max_score"] and results["tests"]  # the grader's: layer_norm is wrong
    assert "Notice: graded WITHOUT isolation" in results["output"]
    carries_a_token(results)
    check_results_folder(root)
    attempts = [line for line in notes(shared).splitlines() if "results.json" in line]
    assert attempts and all(line.endswith("results.json: Permission denied") for line in attempts), attempts


def test_an_honest_submission_keeps_its_grade_and_cannot_learn_the_token(unisolated_zip, shared_python, shared,
                                                                         tmp_path):
    root = refusing_root(unisolated_zip, tmp_path)
    hand_in(root, cell(root, shared, SNOOP))
    results, printed = run_autograder(root, AUTOGRADER_PYTHON=shared_python)
    check_specification(results)
    assert results["score"] == results["max_score"] == 100
    assert "Notice: graded WITHOUT isolation" in results["output"]
    token = carries_a_token(results)
    assert "runs as uid" in printed
    check_results_folder(root)
    # not in any environment, argument list, or descriptor of the grader's that the submission could open
    assert token not in (shared / "log.seen").read_text()
    descriptors = re.findall(r"descriptors of \d+: (.+)", notes(shared))
    # the zygote's (it holds nothing of the run's) aside: the grader's, the supervisor's, run_autograder's
    assert len(descriptors) == 4 and descriptors[1:] == ["Permission denied"] * 3, descriptors


FAKE_GRADER = f"""
import argparse, json, os
parser = argparse.ArgumentParser()
for option in ("--root", "--assignment", "--visibility", "--token-fd", "--results-fd"):
    parser.add_argument(option)
parser.add_argument("--allow-unisolated", action="store_true")
args, _ = parser.parse_known_args()
forged = json.dumps({FORGED!r})
with open(os.path.join(args.root, "results", "results.json"), "w") as out:
    out.write(forged)
os.write(int(args.results_fd), forged.encode())
"""


def test_a_result_without_the_runs_token_is_replaced_by_a_zero(unisolated_zip, tmp_path):
    root = gradescope_root(unisolated_zip, tmp_path)
    # a grader that exits 0 after writing a result of its own, with a token of its own, both ways
    (root / "source" / "autograder" / "platforms" / "gradescope_run.py").write_text(FAKE_GRADER)
    write_notebook(student_notebook(ASSIGNMENT), root / "submission" / f"{ASSIGNMENT}.ipynb")
    results, printed = run_autograder(root)
    check_specification(results)
    assert not_graded_output(results) == "results.json was not written by the grader"
    assert carries_a_token(results) != FORGED["extra_data"]["run_token"]
    assert "does not carry this run's token" in printed
