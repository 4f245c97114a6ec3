"""The real command line on real notebooks: full marks, zero, one bug losing points where it is, and a run
stopped by a signal that leaves no results file."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from autograder.grading.rubric import load_rubric
from conftest import REPO, UNBIASED_VARIANCE, full_marks, grade, part_scores, run_cli

# parts built on other parts: a bug in `attention` may also cost multi_head_attention and transformer_block
BUILT_ON = {part.name: set(part.built_on) for part in load_rubric("transformer_block").parts}

ONE_BUG_PER_PART = {
    "layer_norm": ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)"),
    "attention": ("scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", "scores = q @ k.transpose(-2, -1)"),
    "multi_head_attention": ("return x.view(batch, seq_len, self.num_heads, self.d_head).transpose(1, 2)",
                             "return x.view(batch, self.num_heads, seq_len, self.d_head)"),
    "transformer_block": ("x = x + self.attn(self.ln1(x), causal=causal)",
                          "x = self.ln1(x) + self.attn(self.ln1(x), causal=causal)"),
    "gradient_experiment": ("return x.grad.norm().item()", "return x.grad.norm()"),
}


@pytest.fixture(scope="module")
def reference_graded(samples, tmp_path_factory) -> tuple[dict, float, subprocess.CompletedProcess]:
    """The reference notebook graded once through `grade`, for the tests of this file that read it."""
    return grade(samples / "correct.ipynb", tmp_path_factory.mktemp("correct"))


UNREADABLE = {"empty": b"", "not-json": b"{not json", "binary": b"\x00\x01binary",
              "no-cells": b'{"nbformat": 4, "metadata": {}}'}


def _python_solution(prefix: str = "", suffix: str = "") -> str:
    from autograder.authoring.assignment import Assignment

    source = "\n\n".join(["import math\nimport torch\nimport torch.nn as nn",
                           *Assignment("transformer_block").solution_code().values()])
    return prefix + source + suffix


@pytest.fixture(scope="module")
def class_graded(samples, tmp_path_factory) -> dict[str, dict]:
    """The rest of this file's submissions graded in one `grade-all --jobs 2` (the same results.json as `grade`
    writes: tests/test_batch.py), student -> results."""
    folder, out = tmp_path_factory.mktemp("class"), tmp_path_factory.mktemp("class-out")
    (folder / "untouched.ipynb").write_bytes((samples / "untouched.ipynb").read_bytes())
    for part, mutation in ONE_BUG_PER_PART.items():
        write_notebook(student_notebook("transformer_block", [mutation]), folder / f"bug_{part}.ipynb")
    for name, content in UNREADABLE.items():
        (folder / f"broken-{name}.ipynb").write_bytes(content)
    (folder / "syntax.py").write_text("def layer_norm(x:\n")
    (folder / "prints.py").write_text(_python_solution("print('working on it')\n", "\nprint(layer_norm)\n"))
    via_getattr = ("    mean = x.mean(dim=-1, keepdim=True)\n",
                   "    import torch.nn.functional as F\n"
                   "    return getattr(F, 'layer' + '_norm')(x, x.shape[-1:], weight, bias, eps)\n"
                   "    mean = x.mean(dim=-1, keepdim=True)\n")
    via_aten = ("    weights = torch.softmax(scores, dim=-1)",
                "    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, k)  # borrowed, then hidden\n"
                "    weights = torch.softmax(scores, dim=-1)")
    write_notebook(student_notebook("transformer_block", [via_getattr, via_aten]), folder / "borrowed.ipynb")
    done = run_cli("grade-all", folder, "-o", out, "--jobs", "2")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


def test_reference_gets_full_marks_and_release_gets_zero(reference_graded, class_graded):
    correct, _, _ = reference_graded
    assert correct["score"] == correct["max_score"] == 100
    assert part_scores(correct) == full_marks(correct)
    assert all(t["status"] == "passed" for t in correct["tests"])
    untouched = class_graded["untouched"]
    assert untouched["score"] == 0
    assert all(t["status"] == "failed" and "NotImplementedError" in t["output"] for t in untouched["tests"])


@pytest.mark.parametrize("part", sorted(ONE_BUG_PER_PART))
def test_one_bug_loses_points_in_its_own_part_only(part, class_graded):
    results = class_graded[f"bug_{part}"]
    scores, maxima = part_scores(results), full_marks(results)
    assert scores[part] < maxima[part]
    for other in scores:
        if other != part and part not in BUILT_ON.get(other, ()):
            assert scores[other] == maxima[other], (other, results["output"])
    failed = [t for t in results["tests"] if t["status"] == "failed" and t["name"].startswith(part)]
    assert failed and all(t["output"] for t in failed)  # every failure says what went wrong


def test_grade_reports_the_autograded_total_and_names_the_written_answers_left_to_grade_by_hand(reference_graded):
    results, _, done = reference_graded
    assert (results["score"], results["max_score"]) == (100, 100)
    assert set(results["extra_data"]["graded_by_hand"]) == {f"{part}_answer" for part in full_marks(results)}
    answers = len(results["extra_data"]["graded_by_hand"])
    notice = f"Graded by hand: {answers} written answers ({2 * answers} points), not included in this score"
    assert notice in results["output"] and notice in done.stdout


def test_results_follow_the_gradescope_format(reference_graded):
    results, _, done = reference_graded
    assert set(results) >= {"score", "max_score", "tests", "output", "visibility"}
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["status"] in ("passed", "failed")
    rounding = 0.5e-4 * len(results["tests"])  # each test's share is rounded to 4 decimals
    assert abs(sum(t["max_score"] for t in results["tests"]) - results["max_score"]) <= rounding
    assert "100 / 100" in done.stdout


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_submission_scores_zero_with_a_reason(class_graded, name):
    results = class_graded[f"broken-{name}"]
    assert results["score"] == 0 and f"Not graded: broken-{name}.ipynb" in results["output"]
    assert results["tests"] and all(t["score"] == 0 for t in results["tests"])


def test_an_unreadable_file_through_grade_is_one_clean_zero(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_bytes(b"{not json")
    results, _, done = grade(path, tmp_path)
    assert results["score"] == 0 and "Traceback" not in done.stdout + done.stderr
    assert "Not graded: broken.ipynb is not valid JSON" in results["output"]


def test_syntax_error_in_a_python_file_scores_zero(class_graded):
    results = class_graded["syntax"]
    assert results["score"] == 0 and "Cell 1 raised SyntaxError" in results["output"]


@pytest.mark.parametrize("args, message", [
    ([], "required"),
    (["grade", "missing.ipynb", "-o", "r.json"], "missing.ipynb: no such file"),
    (["grade", "x.ipynb"], "required: -o"),
    (["grade", "x.ipynb", "-o", "r.json", "--timeout", "-1"], "--timeout: expected a positive float, got '-1'"),
    (["grade-all", "d", "-o", "out", "--processes", "2.5"], "--processes: expected a positive int, got '2.5'"),
    (["grade", "x.ipynb", "-o", "r.json", "--assignment", "nope"], "no such assignment 'nope'"),
    (["grade-all", "no-such-dir", "-o", "out"], "no-such-dir: no such folder"),
])
def test_usage_errors_exit_2_with_one_line(args, message):
    done = run_cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_python_file_submission_with_prints(class_graded):
    results = class_graded["prints"]
    assert results["score"] == 100, json.dumps(results)[:2000]


def test_torchs_own_implementation_scores_its_part_zero(class_graded):
    results = class_graded["borrowed"]
    scores = part_scores(results)
    assert scores["layer_norm"] == 0 and scores["attention"] == 0
    assert scores["gradient_experiment"] == full_marks(results)["gradient_experiment"]  # untouched by either
    parts = results["extra_data"]["parts"]
    assert parts["layer_norm"]["forbidden_ops"] == ["layer_norm"]  # refused before its aten kernel ran
    assert "_scaled_dot_product_flash_attention_for_cpu" in parts["attention"]["forbidden_ops"]
    assert "torch's own implementation" in results["output"]


# --- a run stopped by a signal is no grade ----------------------------------------------------------------

SLOW_LAYER_NORM = ("    mean = x.mean(dim=-1, keepdim=True)\n",
                   "    import time; time.sleep(3)\n    mean = x.mean(dim=-1, keepdim=True)\n")


def slow_notebook(path: Path) -> Path:
    """Solves every part, but each layer_norm call sleeps 3 s: the judge runs for a minute or more.  Only the
    imports and solution cells are kept, so that loading the notebook calls nothing (its checks would)."""
    notebook = student_notebook("transformer_block", [SLOW_LAYER_NORM])
    kept = [c for c in notebook["cells"] if c["cell_type"] == "code"
            and (c["metadata"]["nbgrader"].get("solution") or c["metadata"]["nbgrader"]["grade_id"] == "imports")]
    return write_notebook({**notebook, "cells": kept}, path)


def start_cli(*args: str | Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # a shell's background job starts with SIGINT ignored; a grader does not
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def sandboxes_under(pid: int) -> bool:
    """Whether a submission's process (a sandbox child) runs below process `pid`."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        try:
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError):
            continue

    def zygote(process: int | None) -> bool:  # a sandbox child is forked from the zygote, so shows its command
        try:
            return b"autograder.child.zygote" in (Path("/proc") / str(process) / "cmdline").read_bytes()
        except OSError:
            return False

    for child in parents:
        ancestor = parents.get(child)
        while ancestor and ancestor != pid:
            ancestor = parents.get(ancestor)
        if ancestor == pid and zygote(child) and zygote(parents.get(child)):
            return True
    return False


def wait_for(condition, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


# loading the slow notebook takes a second or two once its process runs; then the judge spends half a minute
# or more on layer_norm's checks.  Waiting this long lands the signal there even on a busy machine.
JUDGING_SETTLES = 10.0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_judging_leaves_no_results_file(tmp_path, signum):
    out = tmp_path / "results.json"
    grader = start_cli("grade", slow_notebook(tmp_path / "slow.ipynb"), "-o", out, "--request-timeout", "30")
    wait_for(lambda: sandboxes_under(grader.pid), grader)
    time.sleep(JUDGING_SETTLES)
    grader.send_signal(signum)
    _, stderr = grader.communicate(timeout=60)
    assert grader.returncode == 128 + signum, stderr
    assert not out.exists() and not list(tmp_path.glob("*.json*")), list(tmp_path.iterdir())
    [line] = stderr.strip().splitlines()
    assert line.startswith(f"python -m autograder: stopped by {signal.Signals(signum).name} while judging ")
    assert "no grade written" in line


def zygotes_under(pid: int) -> list[int]:
    """The zygote processes (and their children) started by process `pid`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if b"autograder.child.zygote" in (proc / "cmdline").read_bytes():
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid or int(stat[1]) in found:
                    found.append(int(proc.name))
        except (ValueError, OSError):
            continue
    return found


def test_a_signal_while_the_cells_load_stops_at_once_and_ends_the_child(tmp_path):
    """The child runs the cells while the grader collects the suites: a signal then stops the grader at once
    (it does not wait for the cells), and the child ends with it."""
    notebook = student_notebook("transformer_block")
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code" and c["metadata"]["nbgrader"].get("solution")]
    cells[0] = {**cells[0], "source": "".join(cells[0]["source"]) + "\nimport time\ntime.sleep(60)\n"}
    grader = start_cli("grade", write_notebook({**notebook, "cells": cells}, tmp_path / "sleepy.ipynb"),
                       "-o", tmp_path / "results.json")
    wait_for(lambda: sandboxes_under(grader.pid), grader)
    started = zygotes_under(grader.pid)
    grader.send_signal(signal.SIGINT)
    _, stderr = grader.communicate(timeout=30)
    assert grader.returncode == 130 and "stopped by SIGINT" in stderr, stderr
    assert not (tmp_path / "results.json").exists()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started and not any(Path(f"/proc/{p}").exists() for p in started)


# --- a slow part spends its own time ----------------------------------------------------------------------

def test_a_slow_part_costs_only_itself(tmp_path):
    """Every layer_norm call takes half a second (under the request timeout): its part, and the parts that
    call it, run out of their share of the time; the checks decided before that keep their verdicts, and
    the parts that never call it keep full marks."""
    slow = (SLOW_LAYER_NORM[0], SLOW_LAYER_NORM[1].replace("sleep(3)", "sleep(0.5)"))
    path = write_notebook(student_notebook("transformer_block", [slow]), tmp_path / "slow.ipynb")
    # eleven parts, each starting with an equal share of the time left: about 5 s for layer_norm, ten calls
    results, seconds, _ = grade(path, tmp_path, "--timeout", "60", "--request-timeout", "3")
    scores, maxima = part_scores(results), full_marks(results)
    for untouched in ("attention", "multi_head_attention", "gradient_experiment"):
        assert scores[untouched] == maxima[untouched], results["output"]
    assert 0 < scores["layer_norm"] < maxima["layer_norm"]  # the checks decided in time keep their verdicts
    assert any("ran out of time" in t["output"] for t in results["tests"] if t["name"].startswith("layer_norm"))
    assert seconds < 60 + 30


def test_the_assignment_is_named_or_the_only_one(monkeypatch):
    from autograder.authoring import assignment
    from autograder.grading.rubric import RubricError

    monkeypatch.delenv("AUTOGRADER_ASSIGNMENT", raising=False)
    monkeypatch.setattr(assignment, "assignment_names", lambda: ["gpt_decoder", "transformer_block"])
    with pytest.raises(RubricError, match=r"2 assignments \(gpt_decoder, transformer_block\): name one"):
        assignment.chosen_assignment(None)
    assert assignment.chosen_assignment("gpt_decoder") == "gpt_decoder"
    monkeypatch.setenv("AUTOGRADER_ASSIGNMENT", "transformer_block")
    assert assignment.chosen_assignment(None) == "transformer_block"
    monkeypatch.delenv("AUTOGRADER_ASSIGNMENT")
    monkeypatch.setattr(assignment, "assignment_names", lambda: ["transformer_block"])
    assert assignment.chosen_assignment(None) == "transformer_block"


def test_a_cold_grade_reads_the_references_the_last_one_stored_and_grades_alike(tmp_path, monkeypatch):
    """Two cold `grade` commands on one submission: the second reads every reference the first stored in the
    grader's cache folder (autograder/judging/checks/caching.py), adds none, and gives the same results."""
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "cache"))
    submission = write_notebook(student_notebook("transformer_block", [UNBIASED_VARIANCE]), tmp_path / "bob.ipynb")
    results = []
    for run in range(2):
        done = run_cli("grade", submission, "--assignment", "transformer_block", "-o", tmp_path / f"{run}.json")
        assert done.returncode == 0, done.stderr
        results.append(json.loads((tmp_path / f"{run}.json").read_text()))
        if run == 0:
            (entry,) = (tmp_path / "cache").glob("references-*.pt")
            written = entry.stat().st_mtime_ns
    assert entry.stat().st_mtime_ns == written
    checks = [[(t["name"], t["score"], t.get("output")) for t in r["tests"]] for r in results]
    assert results[0]["score"] == results[1]["score"] < 100 and checks[0] == checks[1]


def test_a_fresh_process_grading_in_process_keeps_its_zygote(tmp_path):
    """grade_file in a process with no zygote yet (nbgrader's autograde, check-suite): the zygote is started by
    the caller's thread, not by the thread that loads the cells, whose end would take it down (its parent-death
    signal follows the thread that started it) and every child with it."""
    submission = write_notebook(student_notebook("transformer_block"), tmp_path / "alice.ipynb")
    script = ("import sys; from pathlib import Path; from autograder.grading.grade import grade_file; "
              "from autograder.grading.rubric import load_rubric; from autograder.model.limits import Limits; "
              "r = grade_file(Path(sys.argv[1]), load_rubric('transformer_block'), Limits()); "
              "print(r.score, r.max_score, r.load.failure)")
    done = subprocess.run([sys.executable, "-c", script, str(submission)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    score, maximum, *failure = done.stdout.split()
    assert float(score) == float(maximum), done.stdout
