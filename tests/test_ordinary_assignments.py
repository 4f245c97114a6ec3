"""An ordinary nbgrader assignment in a course with the kit enabled: graded as plain nbgrader grades it, in the
kit's sandbox (autograder.nbgrader.ordinary).

One class (autograder.authoring.ordinary_samples: correct, wrong, raising, printing a lot, looping forever, a
test cell deleted, a cell's type changed, and a student who pries) is autograded twice by the real nbgrader CLI:
in a course of plain nbgrader, and in the same course whose nbgrader_config.py adds the kit's two lines.  The
gradebooks must agree cell by cell; what the prying student reached must differ.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.authoring import ordinary_samples as samples
from conftest import REPO

PLAIN_CONFIG = '''c = get_config()
c.CourseDirectory.course_id = "course101"
c.CourseDirectory.root = {root!r}
c.Execute.timeout = 4
'''
KIT_LINES = '''
from autograder.nbgrader.course import enable
enable(c)
'''
PY_ONLY = "oscar"  # handed in a .py: plain nbgrader skips the folder, the kit records 0 with the reason
# scores a class of this assignment gets from plain nbgrader (2 + 1 + 2 points autograded; 1 by hand)
EXPECTED = {"alice": 5.0, "bob": 1.0, "carol": 0.0, "dave": 5.0, "erin": 4.0, "frank": 1.0, "grace": 1.0,
            "mallory": 5.0}


def nbgrader(root: Path, *args: str) -> str:
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def build_course(root: Path, config: str) -> dict[str, str]:
    root.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(config.format(root=str(root)), encoding="utf-8")
    samples.write_source(root)
    nbgrader(root, "generate_assignment", samples.ASSIGNMENT)
    work = samples.write_submissions(root, root / "release" / samples.ASSIGNMENT / f"{samples.ASSIGNMENT}.ipynb")
    (root / "students.csv").write_text("id\n" + "\n".join(work) + "\n", encoding="utf-8")
    nbgrader(root, "db", "student", "import", "students.csv")
    return work


@pytest.fixture(scope="module")
def courses(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("ordinary")
    roots = {"plain": base / "plain", "kit": base / "kit"}
    for kind, root in roots.items():
        build_course(root, PLAIN_CONFIG + (KIT_LINES if kind == "kit" else ""))
        hand_in = root / "submitted" / PY_ONLY / samples.ASSIGNMENT / "answers.py"  # no notebook at all
        hand_in.parent.mkdir(parents=True)
        hand_in.write_text("def squares(n):\n    return [i * i for i in range(n)]\n", encoding="utf-8")
        (root / "autograde.log").write_text(nbgrader(root, "autograde", samples.ASSIGNMENT), encoding="utf-8")
    return roots


def cell_scores(root: Path) -> dict[str, dict[str, float | None]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {student: {grade.name: grade.score for grade in
                          gradebook.find_submission_notebook(samples.ASSIGNMENT, samples.ASSIGNMENT, student).grades}
                for student in EXPECTED}


def autograded(root: Path, student: str) -> dict:
    path = root / "autograded" / student / samples.ASSIGNMENT / f"{samples.ASSIGNMENT}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))


def outputs_text(nb: dict) -> str:
    return "\n".join(json.dumps(output) for cell in nb["cells"] for output in cell.get("outputs", []))


def test_the_gradebook_holds_plain_nbgraders_scores_cell_by_cell(courses):
    plain, kit = cell_scores(courses["plain"]), cell_scores(courses["kit"])
    assert kit == plain
    assert {student: sum(score or 0 for score in cells.values()) for student, cells in kit.items()} == EXPECTED


def test_a_folder_without_the_notebook_is_recorded_with_0_and_the_reason_where_plain_nbgrader_skips_it(courses):
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{courses['plain'] / 'gradebook.db'}") as gradebook:
        with pytest.raises(MissingEntry):
            gradebook.find_submission_notebook(samples.ASSIGNMENT, samples.ASSIGNMENT, PY_ONLY)
    with Gradebook(f"sqlite:///{courses['kit'] / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(samples.ASSIGNMENT, samples.ASSIGNMENT, PY_ONLY)
        assert notebook.score == 0 and not notebook.needs_manual_grade
    reason = f"no {samples.ASSIGNMENT}.ipynb was handed in, only answers.py: scored 0"
    assert reason in json.dumps(autograded(courses["kit"], PY_ONLY))  # the one cell of the graded notebook
    assert f"{PY_ONLY}: {reason}" in (courses["kit"] / "autograde.log").read_text(encoding="utf-8")


def test_manual_grading_is_left_as_nbgrader_leaves_it(courses):
    from nbgrader.api import Gradebook

    waiting = {}
    for kind, root in courses.items():
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            waiting[kind] = {s for s in EXPECTED if gradebook.find_grade(
                "why_empty", samples.ASSIGNMENT, samples.ASSIGNMENT, s).needs_manual_grade}
    # a written answer waits for the formgrader; the release's untouched one is scored 0 by nbgrader itself
    assert waiting["kit"] == waiting["plain"] == set(EXPECTED) - {"carol"}


def test_a_failing_test_cell_shows_its_traceback_and_the_notebook_says_which_sandbox_ran_it(courses):
    nb = autograded(courses["kit"], "bob")
    tests = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "squares_tests")
    assert [o["ename"] for o in tests["outputs"] if o["output_type"] == "error"] == ["AssertionError"]
    assert "assert squares(3) == [1, 4, 9]" in re.sub(r"\x1b\[[0-9;]*m", "", "".join(tests["outputs"][-1]["traceback"]))
    notice = "".join(nb["cells"][0]["source"])
    assert notice.startswith("*Graded in the sandbox: isolation tier") and "Its memory was held by one process" in notice
    log = (courses["kit"] / "autograde.log").read_text(encoding="utf-8")
    assert log.count("in the sandbox, isolation tier") == len(EXPECTED) + 1  # and oscar's stand-in notebook


def test_a_cell_past_its_timeout_ends_with_nbgraders_timeout_error_and_the_rest_still_runs(courses):
    for root in courses.values():
        nb = autograded(root, "erin")
        looping = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "mean")
        assert looping["outputs"][-1]["ename"] == "CellTimeoutError", root.name
        partial = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "partial_tests")
        assert "".join(partial["outputs"][0]["data"]["text/plain"]) == "2.0", root.name


def test_the_prying_student_reaches_nothing_of_the_course_with_the_kit(courses):
    plain, kit = outputs_text(autograded(courses["plain"], "mallory")), outputs_text(autograded(courses["kit"], "mallory"))
    # plain nbgrader runs her cell as the instructor, next to everything
    assert "SQLite format 3" in plain and "BEGIN HIDDEN TESTS" in plain and (courses["plain"] / "planted.txt").exists()
    assert "REACHED 0" in kit and "SQLite" not in kit and "HIDDEN TESTS" not in kit
    assert not (courses["kit"] / "planted.txt").exists()


def test_nbgrader_validate_works_in_the_course_with_the_kit(courses, tmp_path):
    root = courses["kit"]
    notebook = root / "submitted" / "alice" / samples.ASSIGNMENT / f"{samples.ASSIGNMENT}.ipynb"
    wrong = root / "submitted" / "bob" / samples.ASSIGNMENT / f"{samples.ASSIGNMENT}.ipynb"
    said = nbgrader(root, "validate", str(notebook), str(wrong))
    assert "Success! Your notebook passes all the tests." in said and "AssertionError" in said


# --- the sandbox holds in every environment the kit claims (the containers: tests/test_containers.py) ------------

ENVIRONMENTS = {"VM root": ([], "tier 1"), "VM ordinary user": ("ordinary", "tier 1"),
                "Docker-like root": ("docker", "tier 2"), "Docker-like ordinary user": ("ordinary docker", "tier 2")}


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_a_prying_ordinary_notebook_reaches_nothing_but_its_own_files(environment):
    from test_sandbox import _ordinary_user

    how, tier = ENVIRONMENTS[environment]
    prefix = []
    if "ordinary" in how:
        prefix += _ordinary_user()[0]
    if "docker" in how:
        prefix += [sys.executable, str(Path(__file__).parent / "docker_like.py")]
    folder = Path(tempfile.mkdtemp(prefix="ordinary-probe-"))  # where an ordinary user may write
    folder.chmod(0o777)
    out = folder / "probe.json"
    done = subprocess.run([*prefix, sys.executable, str(Path(__file__).parent / "ordinary_probe.py"), str(out)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    shutil.rmtree(folder)
    assert report["isolation"].startswith(tier), report
    assert report["printed"] == ["['3', '4', '5']\n", "REACHED 0\n"], report  # its own file, and nothing else
    assert not report["planted"] and not report["died"]


def test_a_notebook_whose_kernel_is_not_python_runs_in_nbgraders_own_execute_and_says_so(monkeypatch, caplog):
    import logging
    from types import SimpleNamespace

    import nbformat
    from traitlets.config import Config

    from autograder.model.limits import Limits
    from autograder.nbgrader import ordinary

    ran = []

    class RecordingExecute(ordinary.Execute):
        def preprocess(self, nb, resources):
            ran.append(nb.metadata.kernelspec.language)
            return nb, resources

    monkeypatch.setattr(ordinary, "Execute", RecordingExecute)
    monkeypatch.setattr(ordinary, "run_notebook", lambda *a, **k: pytest.fail("an R notebook ran in the sandbox"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x <- 1")], metadata={
        "kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    step = SimpleNamespace(config=Config(), parent=None, log=logging.getLogger("test-ordinary"), grade_ahead=0)
    with caplog.at_level(logging.WARNING, logger="test-ordinary"):
        graded, _ = ordinary.grade_ordinary(step, nb, {"nbgrader": {"student": "ann", "assignment": "ps1"}}, Limits())
    assert ran == ["R"]
    assert "Graded WITHOUT the sandbox: the notebook's kernel is r" in graded.cells[0].source
    assert "WITHOUT the sandbox" in caplog.text
    assert ordinary.kernel_language(nbformat.v4.new_notebook()) == "python"  # nbclient's default kernel

