"""GitHub Actions: the workflow `export github-classroom` writes for students' repositories, read the way GitHub
reads it and its steps run here the way a runner runs them (this checkout's .venv standing in for the install
steps), its result decoded the way GitHub Classroom's reporter decodes it; and the kit's own CI workflow."""
from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from autograder.authoring.samples import student_notebook, write_notebook
from conftest import ASSIGNMENT, REPO, UNBIASED_VARIANCE, full_marks, part_scores, run_cli

CI_WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
VENV_BIN = Path(sys.executable).parent
TORCH_CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


# --- reading a workflow as GitHub does -------------------------------------------------------------------

def only_job(workflow: dict[str, Any]) -> dict[str, Any]:
    (job,) = workflow["jobs"].values()
    return job


def step_named(job: dict[str, Any], predicate) -> tuple[int, dict[str, Any]]:
    found = [(i, step) for i, step in enumerate(job["steps"]) if predicate(step)]
    assert len(found) == 1, [s.get("name") for _, s in found]
    return found[0]


def runs(fragment: str):
    return lambda step: fragment in step.get("run", "")


def uses(action: str):
    return lambda step: step.get("uses", "").startswith(action)


def evaluate(value: str, outputs: dict[str, dict[str, str]]) -> str:
    """The only expressions these workflows may put in a step's env or condition: a step's output, and a
    configuration variable (none is set here, and an unset one is empty on GitHub too)."""
    def one(match: re.Match) -> str:
        expression = match.group(1)
        if step := re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+)", expression):
            return outputs.get(step[1], {}).get(step[2], "")
        if re.fullmatch(r"vars\.\w+", expression):
            return ""
        raise AssertionError(f"an expression this test cannot evaluate: {expression}")
    return EXPRESSION.sub(one, value)


def condition_holds(condition: str | None, outputs: dict[str, dict[str, str]]) -> bool:
    if condition is None:
        return True
    comparison = re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+) == '([^']*)'", condition.strip())
    assert comparison, f"a condition this test cannot evaluate: {condition}"
    return outputs.get(comparison[1], {}).get(comparison[2], "") == comparison[3]


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT's two forms: name=value, and name<<DELIMITER ... DELIMITER."""
    outputs, lines = {}, iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            outputs[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def run_steps(job: dict[str, Any], workspace: Path, scratch: Path, skip=lambda step: False
              ) -> tuple[dict[str, dict[str, str]], list[str], list[str]]:
    """Runs the job's `run:` steps in order with the shell GitHub uses for `shell: bash`; actions (`uses:`),
    install steps (id `install`) and those `skip` names do not run.  Returns every step's outputs by id and
    the names of the steps run and not run."""
    assert job["defaults"]["run"]["shell"] == "bash"  # bash --noprofile --norc -eo pipefail, below
    outputs: dict[str, dict[str, str]] = {}
    ran, skipped = [], []
    for i, step in enumerate(job["steps"]):
        label = step.get("name") or step.get("uses")
        if "uses" in step or step.get("id") == "install" or skip(step) or not condition_holds(step.get("if"), outputs):
            skipped.append(label)
            continue
        assert "${{" not in step["run"], f"{label}: an expression spliced into a script"
        script, output = scratch / f"step{i}.sh", scratch / f"output{i}"
        script.write_text(step["run"], encoding="utf-8")
        output.touch()
        env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_ASSIGNMENT"}  # the workflow must say it
        env.update({"PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
                    "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(scratch), "CI": "true",
                    "GITHUB_ACTIONS": "true"})
        env.update({name: evaluate(str(value), outputs) for name, value in step.get("env", {}).items()})
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{label}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if "id" in step:
            outputs[step["id"]] = read_outputs(output)
        ran.append(label)
    return outputs, ran, skipped


def command_line(script: str, marker: str) -> list[str]:
    """The words of the one command of `script` that contains `marker`, its continuation lines joined as bash
    joins them."""
    (line,) = [line for line in script.replace("\\\n", " ").splitlines() if marker in line]
    return shlex.split(line)


def reporter_input(step: dict[str, Any], outputs: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """What the grading reporter reads: for each id in its comma-separated `runners` input, the environment
    variable <ID>_RESULTS, base64-decoded, as JSON."""
    env = {name: evaluate(str(value), outputs) for name, value in step["env"].items()}
    runners = [r.strip() for r in step["with"]["runners"].split(",") if r.strip()]
    return [json.loads(base64.b64decode(env[f"{runner.upper()}_RESULTS"]).decode("utf-8")) for runner in runners]


def reporter_points(results: list[dict[str, Any]]) -> tuple[float, float]:
    """(points, maximum) as the reporter totals them for GitHub Classroom: every test's score, of each result
    that has a max_score."""
    counted = [r for r in results if r.get("max_score")]
    return sum(t["score"] for r in counted for t in r["tests"]), sum(r["max_score"] for r in counted)


# --- the exported workflow -------------------------------------------------------------------------------

def export(folder: Path, *flags: str) -> dict[str, Any]:
    done = run_cli("export", "github-classroom", "-o", folder, *flags)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load((folder / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8"))


def test_exported_workflow_installs_the_private_grader_and_reports_the_grade_steps_output(tmp_path):
    workflow = export(tmp_path, "--assignment", ASSIGNMENT)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        ".github/workflows/classroom.yml"]  # nothing of the kit, let alone a hidden suite
    assert set(workflow["on"]) == {"push", "workflow_dispatch"}
    job = only_job(workflow)
    assert job["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", s["uses"]) for s in job["steps"] if "uses" in s)

    python_at, python = step_named(job, uses("actions/setup-python@"))
    assert str(python["with"]["python-version"]) == "3.11"
    grader_at, grader = step_named(job, lambda s: s.get("with", {}).get("repository"))
    assert grader["uses"].startswith("actions/checkout@")
    assert grader["with"]["token"] == "${{ secrets.AUTOGRADER_TOKEN }}"
    assert grader["with"]["repository"] == "${{ vars.AUTOGRADER_REPOSITORY }}"
    assert grader["with"]["persist-credentials"] is False  # the token is not left in the checkout
    install_at, install = step_named(job, lambda s: s.get("id") == "install")
    lines = install["run"].splitlines()
    torch_lines = [i for i, line in enumerate(lines) if "torch" in line]
    assert torch_lines and all(TORCH_CPU_INDEX in lines[i] and "torch==2.13.0" in lines[i] for i in torch_lines)
    kit = next(i for i, line in enumerate(lines) if f"-e {grader['with']['path']}" in line)
    assert kit > max(torch_lines) and "-c " in lines[kit]  # the lock then finds torch already installed
    assert max(grader_at, python_at) < install_at

    grade_at, grade = step_named(job, runs("python -m autograder grade"))
    assert grade["id"] == "grade" and grade_at > install_at
    command = command_line(grade["run"], "autograder grade")
    assert command == ["python", "-m", "autograder", "grade", f"{ASSIGNMENT}.ipynb", "-o", "results.json",
                       "--assignment", ASSIGNMENT, "--github-classroom", "result.b64"]
    assert 'echo "result=$(cat result.b64)" >> "$GITHUB_OUTPUT"' in grade["run"]
    report_at, report = step_named(job, uses(REPORTER))
    assert report_at == len(job["steps"]) - 1 > grade_at
    assert report["with"]["runners"] == "grade"
    assert report["env"] == {"GRADE_RESULTS": "${{ steps.grade.outputs.result }}"}


def test_notebook_elsewhere_in_the_repository_is_one_shell_word(tmp_path):
    workflow = export(tmp_path, "--assignment", ASSIGNMENT, "--notebook", "my work/it's.ipynb")
    _, grade = step_named(only_job(workflow), runs("python -m autograder grade"))
    assert command_line(grade["run"], "autograder grade")[4] == "my work/it's.ipynb"
    assert grade["name"] == "Grade my work/it's.ipynb"


@pytest.mark.parametrize("flags, message", [
    (["-o", "{tmp}/no/such/folder"], "no/such/folder: no such folder"),
    (["--assignment", "nope", "-o", "{tmp}"], "no such assignment 'nope'"),
    (["--assignment", ASSIGNMENT, "--notebook", "../x.ipynb", "-o", "{tmp}"], "a path inside the repository"),
    (["--assignment", ASSIGNMENT, "--notebook=-x.ipynb", "-o", "{tmp}"], "starting with '-'"),
    (["--assignment", ASSIGNMENT], "required: -o"),
])
def test_usage_errors_exit_2_with_one_line_and_write_nothing(tmp_path, flags, message):
    done = run_cli("export", "github-classroom", *(f.format(tmp=tmp_path) for f in flags))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not any(tmp_path.iterdir())


def test_several_assignments_and_none_named_is_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_ASSIGNMENT"}
    done = subprocess.run([sys.executable, "-m", "autograder", "export", "github-classroom", "-o", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--assignment" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def student_repository(path: Path, notebook: dict[str, Any]) -> Path:
    """A student's repository as the runner checks it out: the template's workflow and the student's notebook."""
    path.mkdir()
    git = ["git", "-c", "user.name=student", "-c", "user.email=student@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=path, check=True)
    write_notebook(notebook, path / f"{ASSIGNMENT}.ipynb")
    export(path, "--assignment", ASSIGNMENT)
    subprocess.run([*git, "add", "-A"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "my solution"], cwd=path, check=True)
    return path


@pytest.mark.parametrize("mutations", [[], [UNBIASED_VARIANCE]], ids=["correct", "one_bug"])
def test_workflow_steps_run_here_and_the_reporter_reads_the_kits_own_grade(tmp_path, mutations):
    workspace = student_repository(tmp_path / "student", student_notebook(ASSIGNMENT, mutations))
    scratch = tmp_path / "runner"
    scratch.mkdir()
    job = only_job(yaml.safe_load((workspace / ".github/workflows/classroom.yml").read_text(encoding="utf-8")))
    started = time.monotonic()
    outputs, ran, skipped = run_steps(job, workspace, scratch)
    assert ran == [f"Grade {ASSIGNMENT}.ipynb"]  # no sysctl: where namespaces are refused, tier 2 grades
    assert skipped == ["Check out the submission", "Check out the grader", "Set up Python 3.11",
                       "Install the grader", "Report to GitHub Classroom"]
    assert time.monotonic() - started < 120

    kit = json.loads((workspace / "results.json").read_text(encoding="utf-8"))  # what the grade step wrote
    assert kit["extra_data"]["assignment"] == ASSIGNMENT and kit["extra_data"]["isolation"].startswith("tier ")
    _, report = step_named(job, uses(REPORTER))
    (result,) = reporter_input(report, outputs)
    points, maximum = reporter_points([result])
    assert points == pytest.approx(kit["score"], abs=1e-3) and maximum == pytest.approx(kit["max_score"])
    scores, maxima = part_scores(kit), full_marks(kit)
    assert len(result["tests"]) == len(scores)  # one test per rubric part
    assert sorted(t["score"] for t in result["tests"]) == pytest.approx(sorted(scores.values()), abs=1e-3)
    passed = [t for t in result["tests"] if t["status"] == "pass"]
    assert len(passed) == sum(scores[p] == maxima[p] for p in scores)
    if mutations:
        assert scores["layer_norm"] < maxima["layer_norm"] and points < maximum
        assert result["status"] == "fail"  # the reporter then marks the run failed
    else:
        assert points == maximum == 100 and result["status"] == "pass"


# --- the kit's own CI ------------------------------------------------------------------------------------

def ci_job() -> dict[str, Any]:
    return only_job(yaml.safe_load(CI_WORKFLOW.read_text(encoding="utf-8")))


def test_ci_runs_the_tests_then_every_assignments_mutation_score():
    workflow = yaml.safe_load(CI_WORKFLOW.read_text(encoding="utf-8"))
    assert {"push", "pull_request"} <= set(workflow["on"])
    job = only_job(workflow)
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", s["uses"]) for s in job["steps"] if "uses" in s)
    _, python = step_named(job, uses("actions/setup-python@"))
    assert str(python["with"]["python-version"]) == "3.11"
    install_at, install = step_named(job, lambda s: s.get("id") == "install")
    assert all(TORCH_CPU_INDEX in line for line in install["run"].splitlines() if "torch" in line)
    assert ".venv/bin/python -m pip install" in install["run"]  # the venv `make setup` keeps
    tests_at, tests = step_named(job, lambda s: s.get("run", "").strip() == ".ci/run")
    check_at, check = step_named(job, runs("-m autograder check-suite"))
    assert install_at < tests_at < check_at and "if" not in check and "if" not in tests
    # no assignment named: every assignment, and exit 1 when one is not caught at 100 %
    assert shlex.split(check["run"]) == [".venv/bin/python", "-m", "autograder", "check-suite"]


def test_ci_grades_a_submissions_folder_into_its_artifacts(tmp_path):
    job = ci_job()
    _, grading = step_named(job, runs("grade-all submissions"))
    command = command_line(grading["run"], "grade-all")
    assert command[command.index("-o") + 1] == "graded"
    assert command[command.index("--junit") + 1] == "graded/junit.xml"
    _, upload = step_named(job, uses("actions/upload-artifact@"))
    assert upload["with"]["path"].split() == ["graded/grades.csv", "graded/junit.xml"]
    assert upload["with"]["if-no-files-found"] == "error"

    long_steps = lambda step: step.get("run", "").strip() == ".ci/run" or "check-suite" in step.get("run", "")
    workspace, scratch = tmp_path / "checkout", tmp_path / "runner"
    scratch.mkdir()
    workspace.mkdir()
    (workspace / ".venv").symlink_to(VENV_BIN.parent)  # stands in for the install step
    outputs, ran, _ = run_steps(job, workspace, scratch, skip=long_steps)
    assert ran == ["Let the sandbox create user namespaces", "Look for submissions"]  # no folder: no grading
    assert not condition_holds(upload.get("if"), outputs)

    (workspace / "submissions").mkdir()
    (workspace / "submissions" / "mallory.ipynb").write_text("{not json")  # scores 0 at once
    outputs, ran, _ = run_steps(job, workspace, scratch, skip=long_steps)
    assert ran[-1] == "Grade submissions/" and condition_holds(upload.get("if"), outputs)
    for path in upload["with"]["path"].split():
        assert (workspace / path).is_file(), path
    assert (workspace / "graded" / "grades.csv").read_text().splitlines()[1].startswith("mallory,0,100,")
