"""The same submission gets the same results.json, byte for byte: across reruns, different PYTHONHASHSEED
values for the grader, and the grader process started with 1 vs 2 torch/OpenMP threads.

The kit pins thread counts on purpose (the sandbox gives the child OMP_NUM_THREADS=MKL_NUM_THREADS=1, the
child and the grader call torch.set_num_threads(1)), so that a grade never depends on the grading machine's
thread settings.  What the thread variation shows is exactly that: the grader's own thread settings (its
environment, which makes torch start with 1 or 2 threads) do not change results.  It does not show that
results would agree if the computations really ran on several threads.

Graded through the command line (`python -m autograder grade`), as course CI runs it: the reference, a
numeric bug in one part (unbiased variance), a bug that costs two parts (heads split without transpose), and
a submission whose values come from its own process's global RNG (input_grad_norm without
torch.manual_seed).  Three reruns here; `python -m autograder check-suite --reruns 20` runs twenty.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.authoring import check_suite

ASSIGNMENT = "transformer_block"
RERUNS = 3



def _torch_threads_at_start(env: dict[str, str]) -> int:
    """What torch.get_num_threads() is in a fresh interpreter with this environment: what a grader process
    started with it has before grading pins the count to 1."""
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout)


@pytest.fixture(scope="session")
def reruns(tmp_path_factory):
    """Three reruns of each entry, computed once per test run (this file runs on one worker), and the torch
    thread counts the grader processes started with (read from the environments they were really given)."""
    def compute(folder: Path) -> list:
        started_with: list[dict[str, str]] = []

        def recording_run(*args, **kwargs):
            started_with.append(kwargs.get("env") or dict(os.environ))
            return subprocess.run(*args, **kwargs)

        # check_suite starts each grader with subprocess.run; record the environment it passes
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(check_suite.reruns, "subprocess", SimpleNamespace(**{**vars(subprocess), "run": recording_run}))
            same, lines = check_suite.determinism(ASSIGNMENT, RERUNS, workers=2, folder=folder)
        distinct = {tuple(sorted(env.items())) for env in started_with}
        threads = sorted(_torch_threads_at_start(dict(env)) for env in distinct)
        return [same, "\n".join(lines), str(folder), len(started_with), threads]

    same, report, folder, graders, threads = compute(tmp_path_factory.mktemp("determinism"))
    return same, report, Path(folder), graders, threads


def test_conditions_vary_hash_seed_and_threads():
    conditions = check_suite.rerun_conditions(3)
    assert len({c["PYTHONHASHSEED"] for c in conditions}) == 3
    assert {c["OMP_NUM_THREADS"] for c in conditions} == {"1", "2"}


def test_the_grader_processes_really_started_with_1_and_2_torch_threads(reruns):
    # without this, the thread variation could silently stop reaching the grader and the test below would
    # still pass; one distinct environment per rerun (hash seeds differ), two thread counts among them
    _, _, _, graders, threads = reruns
    assert graders == RERUNS * len(check_suite.load_catalogue("transformer_block").determinism)
    assert len(threads) == RERUNS and set(threads) == {1, 2}, threads


@pytest.mark.parametrize("name", ["reference", "ln-unbiased-variance", "mha-heads-view-without-transpose"])
def test_results_json_identical_across_hash_seeds_and_grader_thread_settings(reruns, name):
    same, report, *_ = reruns
    assert same[name], report


def test_submission_using_the_unseeded_global_rng_is_graded_identically(reruns):
    same, report, *_ = reruns
    assert same["grad-no-seed"], report


def test_reruns_graded_what_they_should(reruns):
    _, _, folder, *_ = reruns
    runs = sorted(folder.glob("run*"))
    assert [run.name for run in runs] == [f"run{i:02d}" for i in range(RERUNS)], runs
    for run in runs:
        assert sorted(p.stem for p in run.glob("*.json")) == sorted(check_suite.load_catalogue("transformer_block").determinism), run
        scores = {p.stem: json.loads(p.read_text())["score"] for p in run.glob("*.json")}
        assert scores["reference"] == 100, scores
        assert all(0 < scores[name] < 100 for name in scores if name != "reference"), scores
        text = (run / "reference.json").read_text()
        assert not any(word in text for word in ("seconds", "elapsed", "duration", str(folder))), text[:500]
