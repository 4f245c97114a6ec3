"""Shared helpers: sample submissions and running the real command line."""
from __future__ import annotations

import ast
import contextlib
import html
import io
import json
import os
import re
import subprocess
import sys
import time
import tokenize
from pathlib import Path
from typing import Iterator

import pytest

from autograder import REPO_ROOT as REPO
from autograder.authoring.samples import student_notebook, write_notebook

ASSIGNMENT = "transformer_block"  # the assignment the kit's own end-to-end tests grade
os.environ.setdefault("AUTOGRADER_ASSIGNMENT", ASSIGNMENT)
# one mistake, costing layer_norm only: the unbiased variance (divides by d - 1)
UNBIASED_VARIANCE = ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)")


# `make test` runs `pytest -n 2 --dist loadfile`: each file's tests on one worker, so a module fixture that grades
# a class runs once (pytest 9 ignores xdist_group marks: xdist 3.8 renames items through an attribute pytest no
# longer reads).  Whole files go to the workers in collection order, so the longest start first and neither
# worker is left idle behind one started last.  The order comes from each file's measured time in a full run,
# kept in tests/durations.json (`make durations` measures it again); a file not measured yet goes first, in
# case it is long.
DURATIONS = Path(__file__).with_name("durations.json")

# `make test-fast`: the engine's unit tests and the sandbox's own (test_sandbox, test_box: its steps, its refusals
# and the tiers' walls, as root and as an ordinary user, a few of them through `grade`), nothing graded by nbgrader,
# a browser or a container, and no class.  Every other file is marked `slow` (a new file too, until it is named here); `make test`
# runs both tiers.
FAST_TIER = {"test_architecture.py", "test_benchmark.py", "test_box.py", "test_check_suite.py", "test_checks.py", "test_fuzz.py",
             "test_hidden_suites.py", "test_intake.py", "test_judge.py", "test_lms.py", "test_notebook_run.py", "test_norms_and_gates.py",
             "test_object_arguments.py", "test_op_recorder.py", "test_packaging.py", "test_protocol.py",
             "test_release_validation.py", "test_requests.py", "test_resemblance.py", "test_reuse.py", "test_scratch.py",
             "test_rubric.py", "test_sandbox.py", "test_similarity.py", "test_source_cells.py", "test_spec_claims.py",
             "test_stored_references.py"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", action="store_true",
                     help="write each test file's total time (setup, call, teardown) to tests/durations.json")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: outside the fast tier (conftest.FAST_TIER); make test-fast skips it")
    # xdist 3.8 hands --dist loadfile's files out by their number of tests, most first, unless told to keep the
    # collection order (--no-loadscope-reorder): it would start test_assignments.py's hundreds of quick checks
    # first and test_cli.py's few long ones late, leaving the other worker idle at the end
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def measured_durations() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seconds = measured_durations()
    items.sort(key=lambda item: -seconds.get(item.path.name, float("inf")))  # stable: a file's own order is kept
    for item in items:
        if item.path.name not in FAST_TIER:
            item.add_marker(pytest.mark.slow)


_recorded: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # under xdist this runs in the controller too, for every worker's reports
    name = Path(report.nodeid.split("::")[0]).name
    _recorded[name] = _recorded.get(name, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("record_durations") and not hasattr(session.config, "workerinput"):
        # a partial run updates the files it ran; a file that is gone is forgotten
        measured = {**measured_durations(), **{name: round(seconds, 1) for name, seconds in _recorded.items()}}
        measured = {name: s for name, s in measured.items() if (DURATIONS.parent / name).exists()}
        DURATIONS.write_text(json.dumps(dict(sorted(measured.items(), key=lambda kv: -kv[1])), indent=1) + "\n")


def run_cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def grade(submission: Path, out_dir: Path, *flags: str) -> tuple[dict, float, subprocess.CompletedProcess]:
    """Grade through the CLI; returns results.json, wall seconds and the finished process."""
    out = out_dir / f"{submission.stem}.results.json"
    started = time.monotonic()
    done = run_cli("grade", submission, "-o", out, *flags)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), seconds, done


def failed_tests(result: dict, part: str | None = None) -> list[dict]:
    """The failed tests of a check-suite grading (authoring.check_suite), of one part or all."""
    return [t for t in result["tests"] if not t["passed"] and (part is None or t["part"] == part)]


def describe_result(result: dict) -> str:
    """A check-suite grading in a few lines, for an assertion's message."""
    lines = [f"score {result['score']}: {result['parts']}"] + [f"cell error: {e}" for e in result["cell_errors"]]
    lines += [f"{t['name']}: {t['output']}" for t in failed_tests(result)[:8]]
    return "\n".join(lines)


def part_scores(results: dict) -> dict[str, float]:
    return {name: p["score"] for name, p in results["extra_data"]["parts"].items()}


def full_marks(results: dict) -> dict[str, float]:
    return {name: p["max_score"] for name, p in results["extra_data"]["parts"].items()}


def processes_mentioning(token: str) -> list[str]:
    """Processes whose command line or working folder holds `token` (a sandboxed process cannot run another
    program, so a test's daemon marks itself with the folder it works in)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            cwd = ""
        if token in cmdline or token in cwd:
            found.append(f"{proc.name}: {cmdline[:200]} (in {cwd[:200]})")
    return found


@pytest.fixture(scope="session")
def samples(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("samples")
    write_notebook(student_notebook("transformer_block"), folder / "correct.ipynb")
    write_notebook(student_notebook("transformer_block", solved=False), folder / "untouched.ipynb")
    return folder


def grade_class_both_ways(folder: Path, out: Path, course_root: Path, through_nbgrader: list[str],
                          flags: list[str] = (), nbgrader_flags: list[str] = (), assignment: str = ASSIGNMENT
                          ) -> tuple[subprocess.CompletedProcess, dict[str, float]]:
    """Grades the notebooks in `folder` with `grade-all --jobs 2 --assignment ASSIGNMENT` while nbgrader
    autogrades the students in `through_nbgrader` (submitted from the same files, straight into the course's
    submitted/ folder: the exchange is test_nbgrader.py's) in a course of its own; returns the CLI's finished
    process and nbgrader's score per student.  Most hostile submissions spend their time waiting out a
    limit, and nbgrader most of its own starting up, so the two run side by side."""
    import csv
    from concurrent.futures import ThreadPoolExecutor

    from autograder.authoring.demo import Course

    course = Course(course_root, assignment)
    course.create()
    course.nbgrader("generate_assignment", assignment, "--force")
    for student in through_nbgrader:
        target = course.root / "submitted" / student / assignment
        target.mkdir(parents=True)
        (target / f"{assignment}.ipynb").write_bytes((folder / f"{student}.ipynb").read_bytes())
    course.add_students(through_nbgrader)

    def nbgrader_scores() -> dict[str, float]:
        course.nbgrader("autograde", assignment, *nbgrader_flags)
        grades = course.root / "grades.csv"
        course.nbgrader("export", "--to", str(grades))
        with grades.open(newline="") as handle:
            return {r["student_id"]: float(r["score"]) for r in csv.DictReader(handle)}

    with ThreadPoolExecutor(1) as background:
        scores = background.submit(nbgrader_scores)
        done = run_cli("grade-all", folder, "-o", out, "--jobs", "2", "--assignment", assignment, *flags,
                       timeout=1800)
        return done, scores.result()



def two_student_course(root: Path):
    """A scratch nbgrader course with the assignment released, in which alice (the reference) and bob (the
    unbiased-variance bug) have submitted through the exchange and are on the roster."""
    from autograder.authoring.demo import Course
    from autograder.authoring.samples import student_notebook, write_notebook

    course = Course(root / "course", ASSIGNMENT)
    course.create()
    course.release()
    notebooks = {"alice": student_notebook(ASSIGNMENT), "bob": student_notebook(ASSIGNMENT, [UNBIASED_VARIANCE])}
    for student, notebook in notebooks.items():
        course.student_submits(student, write_notebook(notebook, root / "notebooks" / f"{student}.ipynb"))
    course.add_students(list(notebooks))
    return course


def hidden_source(assignment: str, shown: str = "") -> list[re.Pattern]:
    """What of an assignment's hidden suites must never reach a student, as patterns: each function's definition
    (test functions' names are the checks' names, which students see; `def name(` is not), each private helper's
    name as a whole word, each line of code that holds no string literal (strings are messages, which students
    see), each comment and each docstring line.  What `shown` holds (the submission and the release notebook,
    which students see anyway) does not count."""
    texts, names = [], []
    for suite in sorted((REPO / "assignments" / assignment).glob("*.py")):  # the suites and their helpers
        source = suite.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                texts.append(f"def {node.name}(")
                if node.name.startswith("_"):
                    names.append(node.name)
            if isinstance(node, (ast.Module, ast.FunctionDef)) and ast.get_docstring(node):
                texts += [line.strip() for line in ast.get_docstring(node).splitlines() if len(line.strip()) >= 30]
        with_strings = set()
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                with_strings.update(range(token.start[0], token.end[0] + 1))
            elif token.type == tokenize.COMMENT and len(token.string) >= 16:
                texts.append(token.string.lstrip("#").strip())
        texts += [line.strip() for number, line in enumerate(source.splitlines(), 1)
                  if number not in with_strings and len(line.strip()) >= 20 and not line.strip().startswith("#")]
    patterns = [re.compile(re.escape(t)) for t in dict.fromkeys(texts)]
    patterns += [re.compile(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])") for n in dict.fromkeys(names)]
    return [p for p in patterns if not p.search(shown)]


def leaked_hidden_source(page: str, assignment: str, shown: str = "") -> list[str]:
    """What `hidden_source` finds in an HTML page, as markup or as text."""
    texts = (page, html.unescape(page), html.unescape(re.sub(r"<[^>]+>", "", page)))
    return [p.pattern for p in hidden_source(assignment, shown) if any(p.search(text) for text in texts)]


# Entries that stand where a submission should be but are not one (autograder/host/intake.py): student -> what
# its reason must say.  The source notebook with the solutions sits three folders above nbgrader's submitted
# notebook, as in every nbgrader course.
NOT_REGULAR = {"mallory": "mallory.ipynb is a symbolic link, not a notebook",
               "trudy": "trudy.ipynb is a symbolic link, not a notebook",
               "stdout": "stdout.ipynb is a symbolic link, not a notebook",
               "fifo": "fifo.ipynb is a FIFO (named pipe), not a notebook",
               "zero": "zero.ipynb is a character device, not a notebook",
               "folder": "folder.ipynb is a folder, not a notebook"}
NOT_REGULAR_NESTED = {"eve": "eve is a symbolic link, not a folder",
                      "gil": f"gil/{ASSIGNMENT} is a symbolic link, not a folder",
                      "mallory": f"mallory/{ASSIGNMENT}/{ASSIGNMENT}.ipynb is a symbolic link, not a notebook",
                      "trudy": f"trudy/{ASSIGNMENT}/{ASSIGNMENT}.ipynb is a symbolic link, not a notebook",
                      "fifo": f"fifo/{ASSIGNMENT}/{ASSIGNMENT}.ipynb is a FIFO (named pipe), not a notebook"}


def write_not_regular_entries(root: Path) -> tuple[Path, Path]:
    """A flat class and an nbgrader course (root/course/submitted/...), each with alice's correct notebook and
    every kind of entry of NOT_REGULAR(_NESTED), plus `growing.ipynb` in the flat class for a test to append
    to while it grades.  Returns (flat folder, course root)."""
    import stat

    solved = student_notebook(ASSIGNMENT)
    course = root / "course"
    source = write_notebook(solved, course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    flat = root / "flat"
    alice = write_notebook(solved, flat / "alice.ipynb")
    (flat / "mallory.ipynb").symlink_to(alice)
    (flat / "trudy.ipynb").symlink_to(source)
    (flat / "stdout.ipynb").symlink_to("/dev/stdout")
    os.mkfifo(flat / "fifo.ipynb")
    os.mknod(flat / "zero.ipynb", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero; the tests run as root
    (flat / "folder.ipynb").mkdir()
    write_notebook(solved, flat / "growing.ipynb")
    write_notebook(solved, course / "submitted" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    write_not_regular_nested(course / "submitted")
    return flat, course


def write_not_regular_nested(submitted: Path) -> None:
    """NOT_REGULAR_NESTED's entries in nbgrader's submitted/ folder, which holds alice's notebook and sits
    beside the course's source/ folder."""
    folder = lambda student: submitted / student / ASSIGNMENT  # noqa: E731
    (submitted / "eve").symlink_to(submitted / "alice")
    (submitted / "gil").mkdir()
    folder("gil").symlink_to(folder("alice"))
    folder("mallory").mkdir(parents=True)
    (folder("mallory") / f"{ASSIGNMENT}.ipynb").symlink_to(folder("alice") / f"{ASSIGNMENT}.ipynb")
    folder("trudy").mkdir(parents=True)
    (folder("trudy") / f"{ASSIGNMENT}.ipynb").symlink_to(f"../../../source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
    folder("fifo").mkdir(parents=True)
    os.mkfifo(folder("fifo") / f"{ASSIGNMENT}.ipynb")


@contextlib.contextmanager
def growing(path: Path) -> Iterator[None]:
    """`path` grows by appending, for as long as the block runs."""
    import threading

    stop = threading.Event()

    def grow() -> None:
        with path.open("ab") as handle:
            while not stop.is_set() and handle.tell() < 64 << 20:
                handle.write(b" " * 65536)
                handle.flush()
                time.sleep(0.001)

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()
