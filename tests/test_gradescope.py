"""The Gradescope autograder zip (autograder/platforms/gradescope.py): what it holds and leaves out, what its
run_autograder writes in a Gradescope-style folder (a correct, a buggy, an untouched and an unreadable
notebook; submissions that cannot be graded; a grader that cannot start, crashes or runs out of time), and its
setup.sh run for real into a fresh virtual environment that then grades."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.parse
import zipfile
from pathlib import Path

import pytest
import torch

from autograder import PACKAGE_DIR
from autograder.authoring.samples import student_notebook, write_notebook
from autograder.commands.main import main
from autograder.model.limits import Limits
from autograder.host.source_cells import read_cells
from autograder.judging import resemblance
from autograder.grading.fingerprint import assignment_fingerprint
from autograder.grading.rubric import load_rubric
from autograder.platforms import gradescope_run
from conftest import ASSIGNMENT, REPO, UNBIASED_VARIANCE, processes_mentioning, run_cli

VISIBILITY = "after_due_date"  # not the default, so that the tests see it carried through
TOP_FIELDS = {"score", "max_score", "execution_time", "output", "output_format", "visibility", "stdout_visibility",
              "tests", "extra_data"}
TEST_FIELDS = {"name", "score", "max_score", "status", "output", "output_format", "visibility"}


@pytest.fixture(scope="module")
def kit_zip(tmp_path_factory) -> Path:
    """The zip, built through the real command line."""
    path = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    done = run_cli("export", "gradescope", "--assignment", ASSIGNMENT, "-o", path, "--visibility", VISIBILITY)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(path) in done.stdout
    return path


def unpack(archive: Path, folder: Path) -> None:
    """As unzip does it: every file with the mode the zip records."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            target = folder / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(opened.read(info))
            target.chmod((info.external_attr >> 16) & 0o777)


def gradescope_root(archive: Path, folder: Path) -> Path:
    """Gradescope's layout: the zip unpacked in source/, run_autograder copied beside it, an empty submission/."""
    unpack(archive, folder / "source")
    shutil.copy2(folder / "source" / "run_autograder", folder / "run_autograder")
    (folder / "submission").mkdir()
    return folder


def run_autograder(root: Path, prefix: tuple[str, ...] = (), **environment: str | None) -> tuple[dict, str]:
    """Runs root/run_autograder as Gradescope does (under `prefix`, a command that runs another); returns
    results.json and what it printed.  The grading interpreter is this one unless `environment` says otherwise
    (None removes a variable)."""
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, **environment}
    done = subprocess.run([*prefix, "bash", str(root / "run_autograder")], cwd=root, capture_output=True, text=True,
                          timeout=900, env={k: v for k, v in env.items() if v is not None})
    assert done.returncode == 0, done.stdout[-3000:]
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), done.stdout


def check_specification(results: dict, visibility: str = VISIBILITY) -> None:
    """Gradescope's results.json, field by field."""
    assert set(results) == TOP_FIELDS
    assert type(results["score"]) in (int, float) and 0 <= results["score"] <= results["max_score"]
    assert results["max_score"] == load_rubric(ASSIGNMENT).max_score
    assert type(results["execution_time"]) in (int, float) and results["execution_time"] >= 0
    assert isinstance(results["output"], str) and results["output"].startswith("```\n")
    assert results["output_format"] == "md"
    assert results["visibility"] == visibility
    assert results["stdout_visibility"] == "hidden"
    assert isinstance(results["extra_data"], dict)
    verdicts = {f"{part}: {t[0]}": t[3] for part, stored in results["extra_data"].get("parts", {}).items()
                for t in stored.get("tests", [])}
    for test in results["tests"]:
        assert set(test) == TEST_FIELDS
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert 0 <= test["score"] <= test["max_score"]
        # a check that carries no points (an own-parts check) passes or fails by its verdict alone
        passed = test["score"] == test["max_score"] and (test["max_score"] > 0 or verdicts.get(test["name"], False))
        assert test["status"] == ("passed" if passed else "failed")
        assert test["output_format"] == "text"
        assert test["visibility"] == visibility
    if results["tests"]:  # each test's score is rounded to 4 decimals
        assert abs(sum(t["score"] for t in results["tests"]) - results["score"]) < 0.01


def not_graded_output(results: dict) -> str:
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"] == f"```\nNot graded: {results['extra_data']['not_graded']}\n```"
    return results["extra_data"]["not_graded"]


# --- the zip ----------------------------------------------------------------------------------------------

def test_the_zip_holds_the_scripts_the_engine_and_the_assignments_hidden_suites_only(kit_zip):
    rubric = load_rubric(ASSIGNMENT)
    with zipfile.ZipFile(kit_zip) as opened:
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in opened.infolist()}
        setup, run = opened.read("setup.sh").decode(), opened.read("run_autograder").decode()
    names = set(modes)
    assert {n.split("/")[0] for n in names} == {"setup.sh", "run_autograder", "pyproject.toml", "requirements.lock",
                                                "autograder", "assignments", "release", "autograder-cache"}
    # the suites' references, computed with the reference solution, and nothing else of a cache
    assert [n for n in names if n.startswith("autograder-cache/")] == [f"autograder-cache/{shipped_references(kit_zip)}"]
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert {m for n, m in modes.items() if n not in ("setup.sh", "run_autograder")} == {0o644}
    engine = {"autograder/" + p.relative_to(PACKAGE_DIR).as_posix() for p in PACKAGE_DIR.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    assert {n for n in names if n.startswith("autograder/")} == engine
    folder = f"assignments/{ASSIGNMENT}/"
    assert {n for n in names if n.startswith("assignments/")} == {
        "assignments/__init__.py", folder + "__init__.py", folder + "rubric.toml", folder + "states.py",
        *(folder + part.suite for part in rubric.parts)}
    # the rubric skips unchanged plot cells, which it finds in the release
    assert rubric.skip_when_unchanged
    assert {n for n in names if n.startswith("release/")} == {f"release/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"}
    assert not any(re.search(r"^assignments/.*/catalogue/|solutions|^source/|^tests/|gpt_decoder|__pycache__|\.pyc$", n)
                   for n in names)
    # the scripts are filled in: the assignment, the visibility, the lock's torch
    for script in (setup, run):
        assert script.startswith("#!/usr/bin/env bash\n") and not re.search(r"@[A-Z_]+@", script)
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert f"\nASSIGNMENT={ASSIGNMENT}\n" in run and f"\nVISIBILITY={VISIBILITY}\n" in run
    assert "\nALLOW_UNISOLATED=0 " in run
    assert re.search(r"^torch==(\S+)$", (REPO / "requirements.lock").read_text(), re.M)[1] == "2.13.0"
    assert "\nTORCH_VERSION=2.13.0 " in setup and "https://download.pytorch.org/whl/cpu" in setup


def test_the_same_checkout_makes_the_same_zip_and_the_defaults(kit_zip, tmp_path, capsys):
    again = tmp_path / "again.zip"
    assert main(["export", "gradescope", "--assignment", ASSIGNMENT, "-o", str(again), "--visibility",
                 VISIBILITY]) == 0
    assert again.read_bytes() == kit_zip.read_bytes()
    assert again.stat().st_mode & 0o077 == 0  # it holds the hidden suites
    plain = tmp_path / "plain.zip"
    assert main(["export", "gradescope", "-o", str(plain), "--allow-unisolated"]) == 0  # $AUTOGRADER_ASSIGNMENT
    run = zipfile.ZipFile(plain).read("run_autograder").decode()
    assert "\nVISIBILITY=visible\n" in run and "\nALLOW_UNISOLATED=1 " in run


@pytest.mark.parametrize("args, message", [
    (["-o", "/nonexistent/folder/autograder.zip"], "/nonexistent/folder: no such folder"),
    (["--assignment", "no_such_assignment", "-o", "{tmp}/a.zip"], "no such assignment 'no_such_assignment'"),
    (["--assignment", "../transformer_block", "-o", "{tmp}/a.zip"], "is not an assignment's name"),
    (["-o", "{tmp}"], "is a folder"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    assert main(["export", "gradescope", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_visibility_or_no_assignment_chosen_is_exit_2(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as stopped:
        main(["export", "gradescope", "-o", str(tmp_path / "a.zip"), "--visibility", "sometimes"])
    assert stopped.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    monkeypatch.delenv("AUTOGRADER_ASSIGNMENT")  # the checkout has two assignments
    assert main(["export", "gradescope", "-o", str(tmp_path / "a.zip")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "name one with --assignment" in err
    assert list(tmp_path.iterdir()) == []


# --- run_autograder, grading ------------------------------------------------------------------------------

def shipped_references(archive: Path) -> str:
    """The name of the one references entry the zip ships, which must hold references."""
    with zipfile.ZipFile(archive) as opened:
        (name,) = [n for n in opened.namelist() if n.startswith("autograder-cache/references-")]
        assert len(torch.load(io.BytesIO(opened.read(name)), weights_only=True)) > 10
    return name.split("/", 1)[1]


def test_a_correct_notebook_gets_full_marks_from_the_unpacked_zip(kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    write_notebook(student_notebook(ASSIGNMENT), root / "submission" / f"{ASSIGNMENT}.ipynb")
    write_notebook(student_notebook(ASSIGNMENT, solved=False), root / "submission" / "scratch.ipynb")
    # the grader's cache folder as setup.sh leaves it: the zip's references, read by a container that starts
    # afresh, which then computes none (it would store what it computed)
    cache = tmp_path / "cache"
    cache.mkdir()
    shipped = cache / shipped_references(kit_zip)
    shutil.copy2(root / "source" / "autograder-cache" / shipped.name, shipped)
    written = shipped.stat().st_mtime_ns
    results, printed = run_autograder(root, AUTOGRADER_CACHE=str(cache))
    assert sorted(cache.glob("references-*")) == [shipped] and shipped.stat().st_mtime_ns == written
    check_specification(results)
    assert results["score"] == results["max_score"] == 100
    assert results["tests"] and all(t["status"] == "passed" for t in results["tests"])
    assert f"{ASSIGNMENT}.ipynb" in printed and "scratch" not in printed  # the assignment's name comes first
    assert re.fullmatch(r"[0-9a-f]{64}", results["extra_data"]["run_token"])  # the run's: the grader wrote it
    # the same engine, rubric and suites as this checkout, graded with the default limits
    assert results["extra_data"]["assignment_fingerprint"] == assignment_fingerprint(load_rubric(ASSIGNMENT),
                                                                                     Limits())


def test_a_buggy_notebook_loses_its_part_graded_by_the_kit_in_the_zip(kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    # retitle a part in the unpacked rubric only: the output shows whose rubric graded
    rubric_file = root / "source" / "assignments" / ASSIGNMENT / "rubric.toml"
    title = load_rubric(ASSIGNMENT).parts[0].title
    rubric_file.write_text(rubric_file.read_text().replace(f'title = "{title}"', f'title = "{title} (unpacked)"'))
    write_notebook(student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE]), root / "submission" / "my attempt.ipynb")
    results, _ = run_autograder(root)
    check_specification(results)
    assert f"{title} (unpacked):" in results["output"]
    parts = results["extra_data"]["parts"]
    assert parts["layer_norm"]["score"] < parts["layer_norm"]["max_score"]
    manifest = tomllib.loads((REPO / "assignments" / ASSIGNMENT / "rubric.toml").read_text())
    may_lose = {"layer_norm"} | {p["name"] for p in manifest["parts"] if "layer_norm" in p.get("built_on", ())}
    assert all(p["score"] == p["max_score"] for name, p in parts.items() if name not in may_lose)
    assert results["extra_data"]["submission"] == "my attempt.ipynb"  # the only notebook handed in


def test_an_untouched_release_scores_zero(kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    write_notebook(student_notebook(ASSIGNMENT, solved=False), root / "submission" / f"{ASSIGNMENT}.ipynb")
    results, _ = run_autograder(root)
    check_specification(results)
    assert results["score"] == 0
    assert results["tests"] and all(t["status"] == "failed" and "NotImplementedError" in t["output"]
                                    for t in results["tests"])


def test_an_unreadable_notebook_scores_zero_with_the_reason(kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    (root / "submission" / f"{ASSIGNMENT}.ipynb").write_text('{"cells": [', encoding="utf-8")
    results, _ = run_autograder(root)
    check_specification(results)
    assert results["score"] == 0 and all(t["status"] == "failed" for t in results["tests"])
    assert "is not valid JSON" in results["output"] and "Not graded" in results["output"]


# --- run_autograder, what cannot be graded ----------------------------------------------------------------

def _nothing(folder: Path) -> None:
    pass


def _no_notebook(folder: Path) -> None:
    (folder / "notes.txt").write_text("my answers are in my head\n")


def _two_notebooks(folder: Path) -> None:
    for name in ("part1.ipynb", "part2.ipynb"):
        write_notebook(student_notebook(ASSIGNMENT), folder / name)
    write_notebook(student_notebook(ASSIGNMENT), folder / ".ipynb_checkpoints" / "part1-checkpoint.ipynb")


def _link_to_a_hidden_suite(folder: Path) -> None:
    (folder / f"{ASSIGNMENT}.ipynb").symlink_to(folder.parent / "source" / "assignments" / ASSIGNMENT / "rubric.toml")


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / f"{ASSIGNMENT}.ipynb")  # opening it would wait for a writer forever


@pytest.mark.parametrize("hand_in, says", [
    (_nothing, "no notebook (.ipynb) was handed in: it is empty"),
    (_no_notebook, "no notebook (.ipynb) was handed in: it holds notes.txt"),
    (_two_notebooks, "2 notebooks were handed in (part1.ipynb, part2.ipynb) and none is named"),
], ids=["empty", "no-notebook", "two-notebooks"])
def test_what_cannot_be_graded_is_a_zero_saying_what_was_found(hand_in, says, kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    hand_in(root / "submission")
    results, _ = run_autograder(root)
    check_specification(results)
    assert says in not_graded_output(results)


@pytest.mark.parametrize("hand_in, says", [
    (_link_to_a_hidden_suite, f"{ASSIGNMENT}.ipynb is a symbolic link, not a notebook"),
    (_fifo, f"{ASSIGNMENT}.ipynb is a FIFO (named pipe), not a notebook"),
], ids=["symlink", "fifo"])
def test_a_notebook_that_is_not_a_regular_file_scores_zero_saying_what_it_is(hand_in, says, kit_zip, tmp_path):
    """Read as every front end reads a submission (autograder/host/intake.py): every check fails with the
    reason, which the output names."""
    root = gradescope_root(kit_zip, tmp_path)
    hand_in(root / "submission")
    results, _ = run_autograder(root)
    check_specification(results)
    assert results["score"] == 0 and results["tests"] and says in results["output"], results["output"]


def test_a_grader_that_cannot_start_crashes_or_runs_out_of_time_still_writes_results(kit_zip, tmp_path):
    root = gradescope_root(kit_zip, tmp_path)
    write_notebook(student_notebook(ASSIGNMENT), root / "submission" / f"{ASSIGNMENT}.ipynb")
    results, printed = run_autograder(root, AUTOGRADER_PYTHON=str(tmp_path / "no-python"))
    check_specification(results)
    assert "could not start" in not_graded_output(results) and "no-python" in printed
    crashing = tmp_path / "crashing-python"
    crashing.write_text("#!/bin/sh\necho 'Traceback: the grader fell over' >&2\nexit 3\n")
    crashing.chmod(0o755)
    results, printed = run_autograder(root, AUTOGRADER_PYTHON=str(crashing))
    check_specification(results)
    assert "exit status 3" in not_graded_output(results) and "the grader fell over" in printed
    (root / "results" / "results.json").write_text('{"score": 100}')  # a stale result must not stand
    slow = student_notebook(ASSIGNMENT)  # a grade that takes longer than the 3 s allowed, however fast the machine
    slow["cells"].append({"cell_type": "code", "execution_count": None, "id": "slow", "metadata": {}, "outputs": [],
                          "source": "import time\ntime.sleep(30)\n"})
    write_notebook(slow, root / "submission" / f"{ASSIGNMENT}.ipynb")
    started = time.monotonic()
    results, _ = run_autograder(root, AUTOGRADER_RUN_TIMEOUT="3")
    check_specification(results)
    assert "did not finish within 3 seconds" in not_graded_output(results)
    assert time.monotonic() - started < 20
    time.sleep(1)
    assert processes_mentioning(str(root)) == []  # the grader, its zygote and its children all ended


def test_a_machine_that_refuses_the_sandbox_grades_only_when_the_zip_allows_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gradescope_run, "isolation_refused", lambda: "unshare: Operation not permitted")
    (tmp_path / "submission").mkdir()
    write_notebook(student_notebook(ASSIGNMENT, solved=False), tmp_path / "submission" / f"{ASSIGNMENT}.ipynb")
    refused = gradescope_run.run(tmp_path, ASSIGNMENT, "hidden", allow_unisolated=False)
    check_specification(refused, "hidden")
    assert "allows no sandbox" in not_graded_output(refused)
    assert "unshare: Operation not permitted" in capsys.readouterr().out  # the reason is the instructor's to read
    allowed = gradescope_run.run(tmp_path, ASSIGNMENT, "hidden", allow_unisolated=True)
    check_specification(allowed, "hidden")
    assert "Notice: graded WITHOUT isolation" in allowed["output"] and len(allowed["tests"]) > 1


# --- setup.sh ---------------------------------------------------------------------------------------------

@pytest.fixture
def torch_index(tmp_path) -> str:
    """A package index holding the CPU-only torch==2.13.0 that this machine's pip finds, as PyTorch's CPU
    index would on Gradescope (this machine reaches no index but the package registries)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                           "--ignore-installed", "--report", "-", "torch==2.13.0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    url = json.loads(done.stdout)["install"][0]["download_info"]["url"]
    wheel = urllib.parse.unquote(url.rsplit("/", 1)[1])
    assert "+cpu-" in wheel, f"this machine's pip offers no CPU build of torch==2.13.0, only {wheel}"
    page = tmp_path / "torch-index" / "torch" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<!DOCTYPE html><html><body><a href="{url}">{wheel}</a></body></html>\n')
    return page.parent.parent.as_uri()


def test_setup_installs_cpu_torch_and_the_kit_then_run_autograder_grades_with_it(kit_zip, tmp_path, torch_index):
    root = gradescope_root(kit_zip, tmp_path / "autograder")
    venv = tmp_path / "venv"
    env = {**os.environ, "AUTOGRADER_SKIP_APT": "1", "AUTOGRADER_BASE_PYTHON": os.path.realpath(sys.executable),
           "AUTOGRADER_VENV": str(venv), "AUTOGRADER_TORCH_INDEX": torch_index}
    try:
        # from /, as Gradescope's image build runs it
        done = subprocess.run(["bash", str(root / "source" / "setup.sh")], cwd="/", env=env,
                              capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
        probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import torch; print(torch.__version__, torch.version.cuda)"],
                               capture_output=True, text=True, timeout=120)
        assert probe.stdout.split() == ["2.13.0+cpu", "None"], probe.stderr
        assert (root / "source" / "installed-python").read_text().strip() == str(venv / "bin" / "python")
        # the hidden material is root's alone; the engine stays readable to the sandbox's own uid, on a way
        # every uid may search but not list
        assert (root / "source").stat().st_mode & 0o077 == 0o011
        assert (root / "source" / "assignments" / ASSIGNMENT / "rubric.toml").stat().st_mode & 0o077 == 0
        assert (root / "source" / "autograder" / "commands" / "main.py").stat().st_mode & 0o004
        assert "setup.sh: sandbox: available" in done.stdout
        # the zip's references installed for the grader alone, and found by this image
        installed = venv / "autograder-cache" / shipped_references(kit_zip)
        assert installed.stat().st_mode & 0o777 == 0o600
        assert int(re.search(r"setup.sh: references of the suites stored: (\d+)", done.stdout)[1]) > 10
        # torch's implementations fingerprinted once, for every submission's container; to see that the grader
        # reads them, a made-up entry holding the student's own layer norm is added, which it must then report
        assert re.search(r"setup.sh: fingerprints of \d{2,} torch functions", done.stdout), done.stdout
        (cached,) = (venv / "autograder-cache").glob("resemblance-*.json")
        stored = json.loads(cached.read_text())
        solution = read_cells(write_notebook(student_notebook(ASSIGNMENT), tmp_path / "solved.ipynb"))
        own = next(cell for cell in solution if "def layer_norm(" in cell)
        stored["corpus"]["torch.made_up_layer_norm"] = sorted(resemblance.fingerprints(own))
        cached.write_text(json.dumps(stored))
        write_notebook(student_notebook(ASSIGNMENT), root / "submission" / f"{ASSIGNMENT}.ipynb")
        # pytest's folders and a Python below /root are root's alone; on Gradescope both live in /opt and /usr
        base = Path(sys.base_prefix)
        for folder in {*venv.parents, *root.parents, base, *base.parents} - {*Path(tempfile.gettempdir()).parents}:
            folder.chmod(folder.stat().st_mode | 0o001)
        # graded as in Gradescope's default Docker: tier 2, where the sandbox's uid reads the engine itself
        results, _ = run_autograder(root, (sys.executable, str(PACKAGE_DIR.parent / "tests" / "docker_like.py")),
                                    AUTOGRADER_PYTHON=None)  # the interpreter setup.sh installed
        check_specification(results)
        assert results["score"] == 100 and results["extra_data"]["isolation"].startswith("tier 2")
        assert ["torch.made_up_layer_norm", 1.0] in results["extra_data"]["resembles"], results["output"]
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # 1.4 GB
