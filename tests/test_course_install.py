"""The kit in a course of its own: `python -m autograder add-assignment` copies transformer_block into a scratch
course as hw5 with four of its parts, and the course's folder is all the commands need afterwards.

One course is built per run (the module fixture); each test reads it: its rubric and notebooks, the grades of
the reference and the stub through `grade` run from the course folder, check-suite on hw5's catalogue (every
known mistake of the parts kept), and nbgrader's own generate_assignment and autograde with the course's
nbgrader_config.py, which enables the kit in two lines (autograder.nbgrader.course.enable).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.authoring.add_assignment import new_points
from autograder.authoring.assignment import Assignment
from autograder.authoring.catalogue import REFERENCE, load
from autograder.authoring.release import rubric_mismatches
from autograder.grading.rubric import Part, load_rubric
from autograder.model.course import COURSE_ROOT_VARIABLE

KIT = "transformer_block"
PARTS = ["layer_norm", "attention", "multi_head_attention", "transformer_block"]
QUIZ_PARTS = ["layer_norm", "batch_dependence"]  # the suites quickest to run
COURSE_CONFIG = """c = get_config()
c.CourseDirectory.course_id = "ml101"
c.LimitOutput.max_lines = 1000  # the course's own setting, which enable() keeps

from autograder.nbgrader.course import enable
enable(c)
"""


def in_course(course: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command as an instructor types it in the course folder: the course root is the working directory."""
    env = {k: v for k, v in os.environ.items() if k != COURSE_ROOT_VARIABLE}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # nbgrader's alembic
    return subprocess.run([sys.executable, "-m", *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text(COURSE_CONFIG, encoding="utf-8")
    done = in_course(root, "autograder", "add-assignment", KIT, "--as", "hw5", "--course", ".",
                     "--parts", ",".join(PARTS))
    assert done.returncode == 0, done.stderr
    return root


def test_the_rubric_keeps_the_parts_chosen_with_100_points_that_the_check_cells_carry(course):
    rubric = load_rubric("hw5", course=course)
    assert [p.name for p in rubric.parts] == PARTS and rubric.assignment == "hw5"
    assert rubric.max_score == 100 and all(p.points == int(p.points) for p in rubric.parts)
    assert rubric.folder == course / "assignments" / "hw5"
    assert sorted(p.name for p in rubric.folder.glob("test_*.py")) == sorted(p.suite for p in rubric.parts)
    # the plots of the parts left out are gone from the notebook and from skip_when_unchanged
    assert set(rubric.skip_when_unchanged) == {"setup", "heads_plot", "gpu_check"}
    hw5 = Assignment("hw5", course)
    for notebook in (hw5.source_notebook, hw5.release_notebook):
        cells = json.loads(notebook.read_text(encoding="utf-8"))
        assert rubric_mismatches(cells, rubric.parts, notebook.name) == []
        text = "\n".join("".join(c["source"]) for c in cells["cells"])
        assert "batch_normalise" not in text and "input_grad_norm(" not in text  # parts left out
        assert re.search(r"^## Part 1 — Layer normalisation \(22 points\)", text, re.M)
        assert "| | **All parts** | | **about 2 h 00 min** | **100** |" in text  # the table of parts, regenerated
    assert "def layer_norm(" in hw5.solutions_module.read_text() and "def input_grad_norm" not in \
        hw5.solutions_module.read_text()


def test_points_are_rescaled_exactly_or_kept():
    parts = [Part(name, name, points, "s.py") for name, points in zip(PARTS, (15, 20, 18, 14))]
    assert new_points(parts, 100) == {"layer_norm": 22, "attention": 30, "multi_head_attention": 27,
                                      "transformer_block": 21}
    assert sum(new_points(parts, 7).values()) == 7
    assert new_points(parts, None) == {"layer_norm": 15, "attention": 20, "multi_head_attention": 18,
                                       "transformer_block": 14}


def test_a_part_without_the_parts_it_is_built_on_is_one_line_naming_them(course, tmp_path):
    done = in_course(tmp_path, "autograder", "add-assignment", KIT, "--as", "lab", "--parts", "transformer_block")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "rubric.toml: part 'transformer_block' is built on 'layer_norm'" in done.stderr, done.stderr
    assert not (tmp_path / "source").exists()
    again = in_course(course, "autograder", "add-assignment", KIT, "--as", "hw5")
    assert again.returncode == 2 and "source/hw5: already exists; --force replaces it" in again.stderr, again.stderr


def test_the_reference_gets_full_marks_and_the_stub_none_graded_from_the_course_folder(course):
    catalogue = load(Assignment("hw5", course))
    (course / "reference.ipynb").write_text(json.dumps(catalogue.notebook(REFERENCE)), encoding="utf-8")
    for submission, expected in (("reference.ipynb", 100), ("release/hw5/hw5.ipynb", 0)):
        out = course / f"{Path(submission).stem}.json"
        done = in_course(course, "autograder", "grade", submission, "--assignment", "hw5", "-o", str(out))
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(out.read_text())
        assert (result["score"], result["max_score"]) == (expected, 100), (submission, done.stdout[-2000:])


def test_check_suite_catches_every_known_mistake_of_the_parts_kept(course):
    kit, hw5 = load(KIT), load(Assignment("hw5", course))
    # hw5's catalogue holds every mistake of its parts, and the variants that still build on its notebook
    assert {e.name for e in hw5.entries() if e.part} == {e.name for e in kit.entries() if e.part in PARTS}
    variants = {e.name for e in hw5.entries() if e.part is None}
    assert "reference" in variants and len(variants) > 5 and variants <= {e.name for e in kit.entries()}
    # graded on a second, smaller assignment of the same course (hw5's would grade the same entries again, at
    # a minute's cost): check-suite takes the course's id and grades every mistake of the parts kept
    done = in_course(course, "autograder", "add-assignment", KIT, "--as", "quiz", "--course", ".",
                     "--parts", ",".join(QUIZ_PARTS), "--keep-points")
    assert done.returncode == 0, done.stderr
    expected = {part: sum(1 for e in kit.entries() if e.part == part) for part in QUIZ_PARTS}
    done = in_course(course, "autograder", "check-suite", "quiz")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    total = sum(expected.values())
    assert f"mutation score: {total} / {total} mistakes caught" in done.stdout, done.stdout
    for part, count in expected.items():  # every one of the kit's mistakes in these parts, not a subset
        assert re.search(rf"^\s+{part}\s+{count} / {count}$", done.stdout, re.M), (part, done.stdout)


def test_nbgrader_grades_it_beside_an_ordinary_assignment_with_the_courses_own_config(course):
    """The course also has an ordinary nbgrader assignment (ps1, graded by its own test cells, in the sandbox):
    one autograde grades both, each by its own rules, into one gradebook."""
    from autograder.authoring import ordinary_samples

    ordinary_samples.write_source(course)
    for assignment in ("hw5", ordinary_samples.ASSIGNMENT):
        done = in_course(course, "nbgrader", "generate_assignment", assignment, "--force")
        assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (course / "release" / "hw5").iterdir()) == ["hw5.ipynb"]  # nothing hidden
    submitted = course / "submitted" / "alice" / "hw5"
    submitted.mkdir(parents=True)
    (submitted / "hw5.ipynb").write_text(json.dumps(load(Assignment("hw5", course)).notebook(REFERENCE)))
    # graded ahead of alice, in the same pool and zygote: prlimit, nice, SCHED_IDLE and affinity on every process
    # around it (tests/hostile_container/scheduler.py); alice must still score 100
    attacker = json.loads((course / "release" / "hw5" / "hw5.ipynb").read_text())
    attacker["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                              "source": (Path(__file__).parent / "hostile_container" / "scheduler.py").read_text()})
    (course / "submitted" / "aaron" / "hw5").mkdir(parents=True)
    (course / "submitted" / "aaron" / "hw5" / "hw5.ipynb").write_text(json.dumps(attacker))
    work = ordinary_samples.write_submissions(course, course / "release" / "ps1" / "ps1.ipynb")
    for student in set(work) - {"alice", "bob"}:  # alice correct and bob wrong are enough here
        for folder in (course / "submitted" / student).iterdir():
            if folder.name == "ps1":
                import shutil

                shutil.rmtree(folder)
    assert in_course(course, "nbgrader", "db", "student", "import", str(_roster(course, ["aaron", "alice", "bob"]))
                     ).returncode == 0
    done = in_course(course, "nbgrader", "autograde", "*", "--force")
    assert done.returncode == 0 and "alice graded: 100.0 / 100.0" in done.stderr, done.stderr[-3000:]
    assert "grading 2 submissions ahead" in done.stderr, done.stderr[-3000:]
    said = (course / "autograded" / "aaron" / "hw5" / "hw5.ipynb").read_text()
    assert re.search(r"SCHEDULER tried \d+ reached 0", said), said[-3000:]
    done = in_course(course, "nbgrader", "export", "--to", "grades.csv")
    assert done.returncode == 0, done.stderr[-2000:]
    import csv

    with (course / "grades.csv").open(newline="", encoding="utf-8") as handle:
        scores = {(r["assignment"], r["student_id"]): r["score"] for r in csv.DictReader(handle)}
    assert (scores[("hw5", "alice")], scores[("hw5", "aaron")]) == ("100.0", "0.0")
    assert (scores[("ps1", "alice")], scores[("ps1", "bob")]) == ("5.0", "1.0")  # as plain nbgrader scores them


def _roster(course: Path, students: list[str]) -> Path:
    path = course / "students.csv"
    path.write_text("id\n" + "\n".join(students) + "\n", encoding="utf-8")
    return path


def test_enable_puts_the_kits_steps_in_nbgraders_lists_and_keeps_the_courses_settings():
    from traitlets.config import Config

    from autograder.nbgrader.course import enable

    def steps(config):
        return [s if isinstance(s, str) else s.__name__ for s in config]

    mine = Config()
    mine.LimitOutput.max_lines = 1000
    enable(mine)
    kit_metadata = "autograder.nbgrader.cell_metadata.CheckCellMetadata"
    assert steps(mine.Autograde.sanitize_preprocessors) == [
        "autograder.nbgrader.plugin.ReleaseCells", "ClearOutput", "DeduplicateIds", "OverwriteKernelspec",
        "OverwriteCells", kit_metadata]
    assert steps(mine.Autograde.autograde_preprocessors) == [
        "autograder.nbgrader.plugin.SandboxedGrading", "IgnorePattern", "ClearMetadataPreprocessor", "LimitOutput",
        "SaveAutoGrades", "AssignLatePenalties", kit_metadata]
    assert mine.Autograde.exporter_class == "autograder.nbgrader.plugin.SubmissionExporter"
    assert mine.HTMLExporter.preprocessors == ["autograder.nbgrader.pictures.DrawPictures"]
    assert mine.LimitOutput.max_lines == 1000
    # a course's own step stays where it was; enabling twice changes nothing
    own = Config()
    own.Autograde.autograde_preprocessors = ["course.Timer", "nbgrader.preprocessors.Execute", "course.After"]
    enable(own)
    enable(own)
    assert own.Autograde.autograde_preprocessors == ["course.Timer", "autograder.nbgrader.plugin.SandboxedGrading",
                                                     "course.After"]


def test_an_assignment_is_looked_up_in_the_course_first_then_in_the_kit(course, tmp_path, monkeypatch):
    from autograder import REPO_ROOT
    from autograder.grading.rubric import has_rubric

    assert has_rubric("hw5", course=course) and not has_rubric("hw5", course=tmp_path)
    assert Assignment("hw5", course).root == course
    # the kit's own assignments stay the checkout's: the demo's scratch course holds only source/
    (tmp_path / "source" / KIT).mkdir(parents=True)
    assert has_rubric(KIT, course=tmp_path)
    assert load_rubric(KIT, course=tmp_path).folder == REPO_ROOT / "assignments" / KIT
    monkeypatch.setenv(COURSE_ROOT_VARIABLE, str(course))  # what nbgrader_config.py or a script may set
    assert has_rubric("hw5") and Assignment("hw5").root == course and Assignment(KIT).root == REPO_ROOT
    monkeypatch.delenv(COURSE_ROOT_VARIABLE)
    monkeypatch.chdir(course)  # an instructor in the course folder
    assert has_rubric("hw5") and load_rubric("hw5").folder == course / "assignments" / "hw5"
    assert not has_rubric("../assignments/hw5") and not has_rubric("")


def test_grade_all_lms_similarity_and_the_exporters_take_the_courses_id(course, tmp_path):
    catalogue = load(Assignment("hw5", course))
    folder = course / "handed-in"
    folder.mkdir()
    (folder / "ann.ipynb").write_text(json.dumps(catalogue.notebook(REFERENCE)), encoding="utf-8")
    (folder / "ben.ipynb").write_text((course / "release" / "hw5" / "hw5.ipynb").read_text(), encoding="utf-8")
    results = tmp_path / "results"
    done = in_course(course, "autograder", "grade-all", "handed-in", "--assignment", "hw5", "-o", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    assert {p.stem: json.loads(p.read_text())["score"] for p in results.glob("*.json")} == {"ann": 100, "ben": 0}
    canvas = tmp_path / "canvas.csv"
    done = in_course(course, "autograder", "lms", str(results), "--format", "canvas", "-o", str(canvas))
    assert done.returncode == 0, done.stderr[-2000:]
    assert canvas.read_text().splitlines()[0].endswith(",hw5," + ",".join(f"hw5: {p}" for p in PARTS))
    done = in_course(course, "autograder", "similarity", "handed-in", "--assignment", "hw5", "-o",
                     str(tmp_path / "similarity.html"))
    assert done.returncode == 0 and (tmp_path / "similarity.html").is_file(), done.stderr[-2000:]
    archive = tmp_path / "gradescope.zip"
    done = in_course(course, "autograder", "export", "gradescope", "--assignment", "hw5", "-o", str(archive))
    assert done.returncode == 0, done.stderr[-2000:]
    import zipfile

    names = zipfile.ZipFile(archive).namelist()
    assert "assignments/hw5/rubric.toml" in names and not any(n.startswith("assignments/transformer_block/")
                                                                 for n in names)
    template = tmp_path / "template"
    template.mkdir()
    done = in_course(course, "autograder", "export", "github-classroom", "--assignment", "hw5", "-o", str(template))
    assert done.returncode == 0 and "hw5" in (template / ".github" / "workflows" / "classroom.yml").read_text()
