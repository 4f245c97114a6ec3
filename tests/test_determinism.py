"""The same submission gets the same results.json, byte for byte: across reruns, different PYTHONHASHSEED
values for the grader, and 1 vs 2 torch/OpenMP threads.

Graded through the command line (`python -m autograder grade`), as course CI runs it: the reference, a
numeric bug in one part (unbiased variance), a bug that costs two parts (heads split without transpose), and
a submission whose values come from its own process's global RNG (input_grad_norm without
torch.manual_seed).  Three reruns here; `python -m autograder check-suite --reruns 20` runs twenty.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_catalogue import shared_result

from autograder import check_suite

ASSIGNMENT = "transformer_block"


pytestmark = pytest.mark.xdist_group("determinism")


@pytest.fixture(scope="session")
def reruns(tmp_path_factory):
    """Three reruns of each entry, computed once per test run (shared by the xdist workers)."""
    def compute(folder: Path) -> list:
        same, lines = check_suite.determinism(ASSIGNMENT, 3, workers=2, folder=folder)
        return [same, "\n".join(lines), str(folder)]

    same, report, folder = shared_result(tmp_path_factory, "determinism", compute)
    return same, report, Path(folder)


def test_conditions_vary_hash_seed_and_threads():
    conditions = check_suite.rerun_conditions(3)
    assert len({c["PYTHONHASHSEED"] for c in conditions}) == 3
    assert {c["OMP_NUM_THREADS"] for c in conditions} == {"1", "2"}


@pytest.mark.parametrize("name", ["reference", "ln-unbiased-variance", "mha-heads-view-without-transpose"])
def test_results_json_identical_across_reruns(reruns, name):
    same, report, _ = reruns
    assert same[name], report


def test_submission_using_the_unseeded_global_rng_is_graded_identically(reruns):
    same, report, _ = reruns
    assert same["grad-no-seed"], report


def test_reruns_graded_what_they_should(reruns):
    _, _, folder = reruns
    for run in sorted(folder.glob("run*")):
        scores = {p.stem: json.loads(p.read_text())["score"] for p in run.glob("*.json")}
        assert scores["reference"] == 100, scores
        assert all(0 < scores[name] < 100 for name in scores if name != "reference"), scores
        text = (run / "reference.json").read_text()
        assert not any(word in text for word in ("seconds", "elapsed", "duration", str(folder))), text[:500]
