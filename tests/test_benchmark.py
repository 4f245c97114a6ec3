"""The benchmark's pieces, without its timings: grading a class even of two takes minutes on a loaded machine,
so what is tested here is that the memory it reports is the process tree's and that its table reads right."""
import json
import os
import subprocess
import sys
import time

import pytest

from autograder.authoring import benchmark
from autograder.authoring.benchmark import MemorySampler, Sample, Way, format_notes, format_table

MB = 2**20


def test_pss_of_this_process_is_read_and_a_gone_process_counts_zero():
    assert benchmark.pss_bytes(os.getpid()) > 10 * MB  # an interpreter with pytest loaded
    assert benchmark.pss_bytes(2**22 + 7) == 0  # above Linux's largest pid_max


def test_the_sampler_counts_a_grandchild_started_after_it():
    # the grandchild writes 96 MB (written, so resident: zero pages would not count) and lives 1.5 s
    grandchild = "import time; data = b'x' * (96 << 20); print('ready', flush=True); time.sleep(1.5)"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    roots: list[int] = []
    with MemorySampler(lambda: roots) as sampler:
        process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        roots.append(process.pid)
        assert process.stdout.readline() == "ready\n"
        process.wait()
    assert len(sampler.samples) >= 3  # every half second when the machine is idle
    assert 0 < sampler.cpu_seconds < 1.5
    assert sampler.peak >= 96 * MB


def test_the_sampler_sees_the_results_a_way_wrote_after_its_last_periodic_sample():
    done = [0]
    with MemorySampler(lambda: [], progress=lambda: done[0], interval=60) as sampler:
        time.sleep(0.2)
        done[0] = 4  # the way ends between two samples: without a last one, steady_rate never sees the end
    assert [s.done for s in sampler.samples] == [0, 4]


def test_peaks_of_the_two_halves_of_a_class():
    sampler = MemorySampler(lambda: [])
    sampler.samples = [Sample(0.0, 5 * MB, 0), Sample(0.1, 9 * MB, 1), Sample(0.2, 7 * MB, 2),
                       Sample(0.3, 8 * MB, 3), Sample(0.4, 1 * MB, 4)]
    assert sampler.peak == 9 * MB
    assert sampler.peak_while(2) == (9 * MB, 8 * MB)
    assert sampler.steady_rate(4) == pytest.approx((0.1, 0.1))  # 1 done at 0.1 s, all 4 at 0.4 s
    assert sampler.steady_rate(5) is None  # the fifth never arrived


def test_table_gives_seconds_per_submission_and_speed_against_the_first_way():
    ways = [Way("nbgrader default", seconds=40.0, peak=300 * MB),
            Way("kit grade FILE", seconds=10.0, peak=150 * MB, commands=[3.0, 2.0, 2.5, 2.5]),
            Way("kit grade-all --jobs 2", seconds=5.0, peak=2048 * MB, halves=(2000 * MB, 2048 * MB),
                sampler_cpu=0.1, steady=(2.5, 0.5)),
            Way("kit with Dask", skipped="no --scheduler option")]
    assert format_table(ways, 4, [0.5, 0.7, 0.6], cores=2).split("\n") == [
        "way                     s/submission  x faster  x floor  peak memory (Pss)",
        "nbgrader default               10.00     x1.00   x33.33             300 MB",
        "kit grade FILE                  2.50     x4.00    x8.33             150 MB",
        "kit grade-all --jobs 2          1.25     x8.00    x4.17           2,048 MB",
        "kit with Dask           skipped: no --scheduler option"]
    notes = format_notes(ways, [0.5, 0.7, 0.6], 4, cores=2).split("\n")
    assert notes == [
        "kit grade-all --jobs 2: peak 2,000 MB while grading the first half of the class, 2,048 MB for the "
        "second half",
        "kit grade-all --jobs 2: first result after 2.5 s (start-up), then 0.50 s per submission (x20.00 against "
        "the first way)",
        "kit grade FILE: one command 3.00 s wall (the first); median 2.50 s, min 2.00 s",
        "memory sampling took at most 2.0% of one core's time during a way",
        "floor (the hidden suites' own computations on the reference, one warm process, 3 runs): min 0.50 s, "
        "median 0.60 s per submission on one core, 0.30 s on 2 (the table's 'x floor')"]


def test_the_class_alternates_the_reference_with_bugs_from_different_parts(tmp_path):
    notebooks = benchmark.write_class(tmp_path, 5)
    names = [p.name for p in notebooks]
    assert names[0] == "s000-reference.ipynb" and names[2] == "s002-reference.ipynb"
    assert names[4] == "s004-reference.ipynb"
    assert names[1] != names[3] and names[1].split("-")[1] != names[3].split("-")[1]  # ln-..., att-...
    assert all(json.loads(p.read_text())["cells"] for p in notebooks)
