"""Issue 20, isolation where courses actually grade: the kit grades inside a default-security Docker container
and a default Podman container (their own seccomp profile and capabilities, not privileged, `--network none`,
no memory limit), once as root and once as uid 1000 (tests/containers.py builds and runs them).

One container per engine and user runs tests/container_driver.py, which
  - probes the kernel primitives the sandbox is built from (the table `test_primitive_table` prints and writes
    to build/containers/primitives.md),
  - grades the reference with --allow-unisolated (the harness itself works),
  - grades the reference and the one-bug notebook (unbiased variance) with `grade`, as a course would,
  - grades a class of hostile submissions (tests/hostile_container/) with one `grade-all`, then waits, lists
    the container's processes and reads the results again.

In the default Docker container as root (Gradescope's), /autograder/source is not a copy of the checkout but the
Gradescope zip (`export gradescope`) unpacked: the steps above grade with its engine, rubric and suites, and two
more steps run the zip's own run_autograder as Gradescope does (as root, from /, GRADESCOPE_ROOT=/autograder,
AUTOGRADER_PYTHON the venv's interpreter) on /autograder/submission/transformer_block.ipynb: the one-bug
notebook, then a release whose extra cell writes a full score over /autograder/results/results.json and SIGKILLs
every process it can reach.  The class is mounted at /autograder/class, so that /autograder/submission holds
Gradescope's one notebook.  The zip's setup.sh is not run: offline (pip pointed at a folder of wheels) it takes
from 75 s to over 2 minutes on this machine, most of it installing torch.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import containers
from autograder.authoring.samples import student_notebook, write_notebook
from conftest import ASSIGNMENT, REPO, UNBIASED_VARIANCE, run_cli
from container_driver import MARKER, PROBES
from containers import ENGINES, PYTHON, SOURCE, USERS

ENVIRONMENTS = [(engine, user) for engine in ENGINES for user in USERS]
IDS = [f"{engine}-{user}" for engine, user in ENVIRONMENTS]
SUBMISSIONS = "/autograder/class"
OUT = "/tmp/out"
HOSTILE_OUT = f"{OUT}/hostile"
ORDINARY_OUT = f"{OUT}/ordinary.json"  # what a prying ordinary nbgrader notebook reached (tests/ordinary_probe.py)
HOSTILE_DIR = Path(__file__).parent / "hostile_container"
ATTACKS = sorted(p.stem for p in HOSTILE_DIR.glob("*.py"))
NEXT = "zz-next"  # the reference, graded after every attack in the hostile batch (sorted last)
# the grader's scratch folders still there once the batch is over (TMPDIR is the container's /tmp)
LEFTOVERS = "import glob, json, tempfile; print(json.dumps(glob.glob(tempfile.gettempdir() + '/autograder-*')))"
MEMORY_MB = 1536
PROCESSES = 64  # the kit's default --processes
HOSTILE_LIMITS = ["--timeout", "90", "--cell-timeout", "10", "--request-timeout", "10",
                  "--memory-mb", str(MEMORY_MB), "--processes", str(PROCESSES)]
SETTLE = 4  # seconds after the batch: the daemon would rewrite a result twice a second meanwhile
UNISOLATED = "graded WITHOUT isolation"
GRADESCOPE_ENV = ("docker", "root")  # where Gradescope grades: its default Docker container, as root
GRADESCOPE = "/autograder"  # GRADESCOPE_ROOT: source/ (the unpacked zip), submission/, results/
GRADESCOPE_RESULTS = f"{GRADESCOPE}/results/results.json"
HARNESS = "/harness"
# Writes a full score over Gradescope's results.json, then SIGKILLs every process it can reach: those /proc lists,
# or where /proc cannot be read (tier 2) every PID below 2^15, and then kill(-1).
GRADESCOPE_ATTACK = f"""import json, os, signal
FORGED = json.dumps({{"score": 100, "max_score": 100, "output": "FORGED", "tests": [], "extra_data": {{}}}})
wrote = 0
for target in ("{GRADESCOPE_RESULTS}", "/proc/1/root{GRADESCOPE_RESULTS}"):
    try:
        with open(target, "w") as handle:
            handle.write(FORGED)
        wrote += 1
    except OSError:
        pass
try:
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
except OSError:
    pids = range(1, 1 << 15)
killed = 0
for pid in pids:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
    everyone = "sent"
except OSError as exc:
    everyone = exc.strerror
raise RuntimeError("WROTE %d KILLED %d kill(-1) %s" % (wrote, killed, everyone))
"""


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def write_class(folder: Path) -> dict[str, bytes]:
    """The samples and the hostile class, readable by uid 1000; returns each hostile file's bytes."""
    write_notebook(student_notebook(ASSIGNMENT), folder / "correct.ipynb")
    write_notebook(student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE]), folder / "one_bug.ipynb")
    hostile = {"stub": student_notebook(ASSIGNMENT, solved=False)}
    for attack in ATTACKS:
        cell = (HOSTILE_DIR / f"{attack}.py").read_text().replace("__OUT__", HOSTILE_OUT)
        notebook = student_notebook(ASSIGNMENT, solved=False)
        notebook["cells"].append(code_cell(cell))
        hostile[attack] = notebook
    hostile[NEXT] = student_notebook(ASSIGNMENT)  # graded last: what the attacks left of the batch's grader
    written = {name: write_notebook(nb, folder / "hostile" / f"{name}.ipynb").read_bytes()
               for name, nb in hostile.items()}
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return written


def write_gradescope_submissions(folder: Path) -> dict[str, str]:
    """The notebooks the Gradescope steps hand in (each becomes /autograder/submission/transformer_block.ipynb);
    returns each step's notebook's sha256."""
    hostile = student_notebook(ASSIGNMENT, solved=False)
    hostile["cells"].append(code_cell(GRADESCOPE_ATTACK))
    notebooks = {"gradescope_one_bug": student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE]),
                 "gradescope_hostile": hostile}
    return {name: hashlib.sha256(write_notebook(nb, folder / f"{name}.ipynb").read_bytes()).hexdigest()
            for name, nb in notebooks.items()}


def gradescope_kit(archive: Path, folder: Path) -> Path:
    """The zip unpacked as Gradescope unpacks it in /autograder/source: each file with the mode the zip gives it."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            target = folder / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(opened.read(info))
            target.chmod((info.external_attr >> 16) & 0o777)
    for where, _, _ in os.walk(folder):
        os.chmod(where, 0o755)
    return folder


def plan(env: tuple[str, str]) -> dict:
    def grade(name: str, notebook: str, *flags: str) -> dict:
        out = f"{OUT}/{name}/results.json"
        return {"name": name, "results": [out], "cwd": SOURCE, "timeout": 300,
                "argv": [PYTHON, "-m", "autograder", "grade", f"{SUBMISSIONS}/{notebook}", "--assignment",
                         ASSIGNMENT, "-o", out, *flags]}

    def gradescope(name: str) -> dict:
        # run_autograder as Gradescope starts it: as root, from /, with the one notebook handed in
        return {"name": name, "cwd": "/", "timeout": 300, "results": [GRADESCOPE_RESULTS],
                "env": {"GRADESCOPE_ROOT": GRADESCOPE, "AUTOGRADER_PYTHON": PYTHON},
                "copy": [[f"{HARNESS}/{name}.ipynb", f"{GRADESCOPE}/submission/{ASSIGNMENT}.ipynb"]],
                "argv": [f"{SOURCE}/run_autograder"]}
    steps = [grade("unisolated", "correct.ipynb", "--allow-unisolated"),
             grade("reference", "correct.ipynb"),
             grade("one_bug", "one_bug.ipynb"),
             {"name": "ordinary", "cwd": "/", "timeout": 120, "results": [ORDINARY_OUT],
              "argv": [PYTHON, f"{HARNESS}/ordinary_probe.py", ORDINARY_OUT, SOURCE]},
             {"name": "hostile", "cwd": SOURCE, "timeout": 400, "results": [f"{HOSTILE_OUT}/*"],
              "argv": [PYTHON, "-m", "autograder", "grade-all", f"{SUBMISSIONS}/hostile", "--assignment",
                       ASSIGNMENT, "-o", HOSTILE_OUT, *HOSTILE_LIMITS]},
             {"name": "leftovers", "cwd": "/", "timeout": 60, "argv": [PYTHON, "-c", LEFTOVERS]}]
    collect = [f"{OUT}/**/*.json", f"{OUT}/**/*.csv"]
    if env == GRADESCOPE_ENV:
        steps += [gradescope("gradescope_one_bug"), gradescope("gradescope_hostile")]
        collect.append(f"{GRADESCOPE}/results/*")
    return {"probe": True, "settle": SETTLE, "collect": collect, "steps": steps}


class Runs(dict):
    hostile_sha256: dict[str, str]
    gradescope_sha256: dict[str, str]


@pytest.fixture(scope="module")
def host_one_bug(tmp_path_factory) -> float:
    """The one-bug notebook's score graded on this machine, outside any container."""
    folder = tmp_path_factory.mktemp("host-one-bug")
    write_notebook(student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE]), folder / "one_bug.ipynb")
    done = run_cli("grade", folder / "one_bug.ipynb", "-o", folder / "results.json", "--assignment", ASSIGNMENT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((folder / "results.json").read_text())["score"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    for engine in ENGINES:  # the rootfs, dockerd and both images, before any container starts
        containers.ensure_image(engine)
    root = tmp_path_factory.mktemp("containers")
    source = containers.checkout_copy(root / "source")
    archive = root / "autograder.zip"
    done = run_cli("export", "gradescope", "--assignment", ASSIGNMENT, "-o", archive)
    assert done.returncode == 0, done.stderr[-3000:]
    kit = gradescope_kit(archive, root / "gradescope-source")
    submissions = root / "submissions"
    hostile = write_class(submissions)
    harness = root / "harness"
    harness.mkdir()
    shutil.copy(Path(__file__).parent / "container_driver.py", harness)
    shutil.copy(Path(__file__).parent / "ordinary_probe.py", harness)
    gradescope = write_gradescope_submissions(harness)
    for env in ENVIRONMENTS:
        (harness / f"plan-{'-'.join(env)}.json").write_text(json.dumps(plan(env)))
    for path in [harness, *harness.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    def run(env: tuple[str, str]) -> dict:
        engine, user = env
        mounts = [(kit if env == GRADESCOPE_ENV else source, SOURCE), (submissions, SUBMISSIONS), (harness, HARNESS)]
        started = time.monotonic()
        done = containers.run_in_container(engine, user, [PYTHON, f"{HARNESS}/container_driver.py",
                                                          f"{HARNESS}/plan-{'-'.join(env)}.json"],
                                           mounts, scratch=root / "scratch", timeout=900, workdir=SOURCE)
        lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
        assert lines, f"{engine} as {user}: exit {done.returncode}, no report; {done.stderr[-3000:]}"
        report = json.loads(lines[-1][len(MARKER):])
        report["wall_seconds"] = round(time.monotonic() - started, 1)
        return report

    # two containers at a time: most of a hostile batch is waiting out a limit
    with ThreadPoolExecutor(2) as pool:
        reports = dict(zip(ENVIRONMENTS, pool.map(run, ENVIRONMENTS)))
    found = Runs(reports)
    found.hostile_sha256 = {name: hashlib.sha256(data).hexdigest() for name, data in hostile.items()}
    found.gradescope_sha256 = gradescope
    _write_notes(found)
    return found


def _cell(result: dict) -> str:
    return "; ".join(f"{e.get('type')}: {e.get('message')}" for e in result["extra_data"]["cell_errors"])


def _hostile_result(runs: Runs, env, name: str) -> dict:
    step = runs[env]["steps"]["hostile"]
    assert step["returncode"] == 0, f"grade-all exited {step['returncode']}: {step['stderr'][-3000:]}"
    path = f"{HOSTILE_OUT}/{name}.json"
    assert path in step["files"], (sorted(step["files"]), step["stderr"][-2000:])
    return step["files"][path]


def _table(runs: Runs) -> str:
    def cell(result: dict) -> str:
        if result["ok"]:
            return "allowed" if result["value"] in (0, None) or isinstance(result["value"], str) else \
                f"allowed ({result['value']})"
        return result["errno"]
    header = "| primitive | " + " | ".join(IDS) + " |"
    lines = [header, "|---" * (len(IDS) + 1) + "|"]
    for name in PROBES:
        lines.append(f"| `{name}` | " + " | ".join(cell(runs[env]["probes"][name]) for env in ENVIRONMENTS) + " |")
    for name, key in (("CapEff", "cap_eff"), ("Seccomp mode", "seccomp"), ("interfaces", "interfaces")):
        lines.append(f"| {name} | " + " | ".join(str(runs[env]["facts"][key]) for env in ENVIRONMENTS) + " |")
    verdicts = []
    for env in ENVIRONMENTS:
        step = runs[env]["steps"]["reference"]
        refused = re.search(r"allows no sandbox \((.*)\)", step["stderr"])
        verdicts.append(f"refused: {refused.group(1)}" if refused else f"exit {step['returncode']}")
    lines.append("| the kit's `grade` | " + " | ".join(verdicts) + " |")
    return "\n".join(lines)


def _timings(runs: Runs) -> str:
    names = list(dict.fromkeys(name for env in ENVIRONMENTS for name in runs[env]["steps"]))
    lines = ["| environment | container (wall s) | " + " | ".join(names) + " |", "|---" * (2 + len(names)) + "|"]
    for env, label in zip(ENVIRONMENTS, IDS):
        steps = runs[env]["steps"]
        lines.append(f"| {label} | {runs[env]['wall_seconds']} | "
                     + " | ".join(f"{steps[n]['seconds']} (exit {steps[n]['returncode']})" if n in steps else "-"
                                  for n in names) + " |")
    try:
        lines.append("\nset-up: " + containers.TIMINGS.read_text().replace("\n", " "))
    except OSError:
        pass
    return "\n".join(lines)


def _write_notes(runs: Runs) -> None:
    notes = f"{_table(runs)}\n\n{_timings(runs)}\n"
    (containers.BUILD / "primitives.md").write_text(notes)
    (containers.BUILD / "last-run.json").write_text(json.dumps({"-".join(env): r for env, r in runs.items()},
                                                                indent=1))


# --- the harness ------------------------------------------------------------------------------------------

def test_make_containers_installs_what_the_harness_checks():
    line = next(line for line in (REPO / "Makefile").read_text().splitlines()
                if line.startswith("CONTAINER_PACKAGES"))
    assert sorted(line.split(":=")[1].split()) == sorted(containers.PACKAGES)


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_the_container_is_a_default_one(runs, env):
    engine, user = env
    facts = runs[env]["facts"]
    assert facts["uid"] == (0 if user == "root" else 1000)
    assert facts["pid"] == 1  # the driver is the container's init: no --init
    assert facts["interfaces"] == ["lo"]  # --network none
    assert facts["seccomp"] == "2"  # the engine's default profile, a filter
    assert facts["no_new_privs"] == "0"
    capabilities = int(facts["cap_eff"], 16)
    if user == "root":
        assert capabilities and not capabilities & (1 << 21)  # the default set: no CAP_SYS_ADMIN, not privileged
    else:
        assert capabilities == 0


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_every_probe_answers(runs, env):
    probes = runs[env]["probes"]
    assert list(probes) == list(PROBES)
    for name, result in probes.items():
        assert result["ok"] or not result["errno"].startswith(("raised", "died")), (name, result)
    # what tier 2 of the isolation needs, granted by both engines' defaults
    assert probes["prctl(PR_SET_NO_NEW_PRIVS)"]["ok"]
    assert probes["seccomp filter (after no_new_privs)"]["ok"]
    if env[1] == "root":
        assert probes["setresuid(2^30+pid)"]["ok"]


def test_primitive_table(runs):
    """Environment x primitive x errno, for the issue's closing note (also in build/containers/primitives.md)."""
    table = _table(runs)
    print("\n" + table + "\n\n" + _timings(runs))
    assert all(IDS[i] in table.splitlines()[0] for i in range(len(IDS)))


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_unisolated_grading_works_in_the_container(runs, env):
    """The harness's own smoke test: the engine, the venv and the suites all work in the container."""
    step = runs[env]["steps"]["unisolated"]
    assert step["returncode"] == 0, step["stderr"][-3000:]
    result = step["files"][f"{OUT}/unisolated/results.json"]
    assert result["score"] == 100, result["output"]
    assert any(kind == "unisolated" for kind, _ in result["extra_data"]["notices"])


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_a_prying_ordinary_notebook_reaches_nothing_but_its_own_files(runs, env):
    """An ordinary nbgrader notebook (autograder.nbgrader.ordinary) in the sandbox: the gradebook, the instructor's
    source and a classmate's submission stay out of reach, its own data file does not."""
    step = runs[env]["steps"]["ordinary"]
    assert step["returncode"] == 0, step["stderr"][-3000:]
    report = step["files"][ORDINARY_OUT]
    assert report["isolation"].startswith("tier"), report
    assert report["printed"] == ["['3', '4', '5']\n", "REACHED 0\n"], report
    assert not report["planted"] and not report["died"]


# --- grading as a course does -------------------------------------------------------------------------------

@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_reference_scores_full_marks(runs, env):
    step = runs[env]["steps"]["reference"]
    assert step["returncode"] == 0, step["stderr"][-3000:]
    result = step["files"][f"{OUT}/reference/results.json"]
    assert result["score"] == 100, result["output"]
    assert not any(kind == "unisolated" or UNISOLATED in text for kind, text in result["extra_data"]["notices"])


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_one_bug_scores_as_on_the_host(runs, host_one_bug, env):
    step = runs[env]["steps"]["one_bug"]
    assert step["returncode"] == 0, step["stderr"][-3000:]
    result = step["files"][f"{OUT}/one_bug/results.json"]
    assert result["score"] == host_one_bug, result["output"]
    assert not any(kind == "unisolated" or UNISOLATED in text for kind, text in result["extra_data"]["notices"])


# --- hostile submissions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_the_honest_stub_scores_zero(runs, env):
    stub = _hostile_result(runs, env, "stub")
    assert stub["score"] == 0 and stub["tests"], stub["output"]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_the_next_student_after_every_attack_scores_full_marks_and_no_scratch_folder_is_left(runs, env):
    """After every attack of the batch (left_behind: its scratch folder with every mode taken away; scheduler: the
    grader's processes' limits and priorities), the reference scores 100 and the grader removed every scratch
    folder; test_no_process_outlives_grading checks the processes."""
    after = _hostile_result(runs, env, NEXT)
    assert after["score"] == 100, after["output"][:2000]
    assert after["extra_data"]["memory"].startswith("one process, its address space"), after["extra_data"]
    leftovers = runs[env]["steps"]["leftovers"]
    assert leftovers["returncode"] == 0 and json.loads(leftovers["stdout"]) == [], leftovers
    attacker = _hostile_result(runs, env, "left_behind")
    assert "LEFT " in _cell(attacker) and "scratch made" in _cell(attacker), _cell(attacker)
    assert not any("could not be removed" in text for _, text in attacker["extra_data"]["notices"])


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_attack_is_contained(runs, env, attack):
    """The grader survived and wrote the attacker's result itself: the stub's score, with every check, of
    the file it was given, and nothing forged in it even after the batch (a daemon had time to rewrite it)."""
    result = _hostile_result(runs, env, attack)
    assert result["extra_data"]["submission_sha256"] == runs.hostile_sha256[attack]
    assert result["tests"] and result["score"] == _hostile_result(runs, env, "stub")["score"], result["output"]
    assert not any(kind == "unisolated" or UNISOLATED in text for kind, text in result["extra_data"]["notices"])
    final = runs[env]["files"]
    assert "FORGED" not in json.dumps(final), [path for path, data in final.items() if "FORGED" in json.dumps(data)]
    assert final[f"{HOSTILE_OUT}/{attack}.json"] == result  # as it was when grade-all ended
    step = runs[env]["steps"]["hostile"]
    said = _cell(result)
    if attack == "reader":
        read = re.search(r"READ (\d+)(.*)", said)
        assert read and read.group(1) == "0", said
    if attack == "references":
        reached = re.search(r"REACHED (\d+)(.*)", said)
        assert reached and reached.group(1) == "0", said
    if attack == "scheduler":
        reached = re.search(r"SCHEDULER tried (\d+) reached (\d+)(.*)", said)
        assert reached and int(reached.group(1)) > 100 and reached.group(2) == "0", said
    if attack == "storm":
        forked = re.search(r"FORKED (\d+)", said)
        assert forked is None or int(forked.group(1)) < PROCESSES, said
        # the grader's own processes (as many as grading the reference took) and the sandbox's, with a margin
        # for a process being started or reaped while sampled; an uncontained storm reaches 1000
        baseline = runs[env]["steps"]["reference"]["peak_processes"]
        assert step["peak_processes"] <= baseline + PROCESSES + 8, (step["peak_processes"], baseline)
    if attack == "memory":
        # one process, no memfd: all it holds is in the address space RLIMIT_AS bounds before memory is taken,
        # so the machine's anonymous memory never rises past the limit, not even between two of the grader's
        # samples
        held = re.search(r"MEMORY (\d+) started, (\d+) memfds, (\d+) threads holding", said)
        assert held and held.group(1) == "0" and held.group(2) == "0" and int(held.group(3)) <= 2, said
        baseline = runs[env]["steps"]["reference"]["peak_anon_bytes"]
        assert step["peak_anon_bytes"] <= baseline + (MEMORY_MB << 20), (step["peak_anon_bytes"] >> 20,
                                                                          baseline >> 20)


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=IDS)
def test_no_process_outlives_grading(runs, env):
    assert runs[env]["processes_before"] == []
    assert runs[env]["processes_after"] == [], runs[env]["processes_after"][:20]


# --- Gradescope: the zip's own run_autograder, in Docker as root ---------------------------------------------

def _gradescope_result(runs: Runs, name: str) -> tuple[dict, dict]:
    """The step's results.json, checked to be the one its grader wrote: the supervisor kept it (the run's token,
    no 0 in its place), graded in tier 2, of the notebook handed in."""
    step = runs[GRADESCOPE_ENV]["steps"][name]
    said = step["stdout"][-3000:]
    assert step["returncode"] == 0, said
    assert GRADESCOPE_RESULTS in step["files"], said
    result = step["files"][GRADESCOPE_RESULTS]
    extra = result["extra_data"]
    assert "not_graded" not in extra, (extra["not_graded"], said)
    assert re.fullmatch(r"[0-9a-f]{64}", extra.get("run_token", "")), said
    assert "does not carry this run's token" not in step["stdout"] and "replaced by a 0" not in step["stdout"]
    assert extra["isolation"].startswith("tier 2"), extra["isolation"]
    assert "Isolation: tier 2" in result["output"], result["output"]
    assert not any(kind == "unisolated" or UNISOLATED in text for kind, text in extra["notices"])
    assert extra["submission"] == f"{ASSIGNMENT}.ipynb"
    assert extra["submission_sha256"] == runs.gradescope_sha256[name]
    return step, result


def test_gradescope_run_autograder_grades_the_one_bug_notebook(runs, host_one_bug):
    _, result = _gradescope_result(runs, "gradescope_one_bug")
    assert result["score"] == host_one_bug, result["output"]
    # the same grade as the kit's `grade` of the same notebook in the same container
    grade = runs[GRADESCOPE_ENV]["steps"]["one_bug"]["files"][f"{OUT}/one_bug/results.json"]
    assert result["score"] == grade["score"]


def test_gradescope_run_autograder_keeps_the_graders_result_of_a_forger_killer(runs):
    """The submission's full score over results.json never lands, its kills reach nothing of the grading: the
    result is the grader's, the untouched release's 0 with every check, and still so after the settle."""
    _, result = _gradescope_result(runs, "gradescope_hostile")
    assert result["score"] != 100 and result["score"] == 0 and result["tests"], result["output"]
    assert "FORGED" not in json.dumps(result)
    said = _cell(result)
    wrote = re.search(r"WROTE (\d+)", said)
    assert wrote is None or wrote.group(1) == "0", said  # None: its own sandbox died of its kills first
    assert runs[GRADESCOPE_ENV]["files"][GRADESCOPE_RESULTS] == result
