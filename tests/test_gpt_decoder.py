"""The second assignment, gpt_decoder, written only through the authoring path: its generated files are
fresh, its catalogue is caught at 100 %, and the command line and nbgrader grade it alike."""
from __future__ import annotations

import json
import re

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from autograder.authoring import check_suite, notebook_sync, release
from autograder.authoring.assignment import Assignment, assignment_names
from autograder.authoring.catalogue import EveryPart, load
from autograder.authoring.demo import Course
from autograder.authoring.samples import write_demo_class
from autograder.model.limits import Limits
from autograder.host.remote import RemoteSubmission
from autograder.grading.rubric import load_rubric
from conftest import grade_class_both_ways

NAME = "gpt_decoder"


def test_its_generated_files_are_fresh():
    assert notebook_sync.main(["check", "--assignment", NAME]) == 0
    assert release.main(["check", "--assignment", NAME]) == 0


def test_its_manifest_and_catalogue():
    rubric = load_rubric(NAME)  # its parts agree with the notebook's check cells: the release check above
    assert len(rubric.parts) == 5 and rubric.max_score == 100
    catalogue = load(NAME)
    mistakes = [e for e in catalogue.entries() if e.part is not None]
    variants = [e for e in catalogue.entries() if e.part is None and e.name != "reference"]
    assert len(mistakes) >= 30 and len(variants) >= 10, (len(mistakes), len(variants))
    assert {str(e.part) for e in mistakes if not isinstance(e.part, EveryPart)} == {p.name for p in rubric.parts}
    assert len(catalogue.determinism) == 4 and catalogue.entry(catalogue.demo).part is not None


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    return check_suite.run_catalogue(NAME, workers=2, folder=tmp_path_factory.mktemp("gpt-catalogue"))


def test_check_suite_catches_every_mistake_and_passes_every_variant(graded):
    text, ok = check_suite.summarise(NAME, graded, 0.0, 2)
    assert ok, text
    assert graded["reference"]["score"] == 100


def test_the_command_line_and_nbgrader_grade_it_alike(tmp_path):
    students = write_demo_class(NAME, tmp_path / "class")
    done, nbgrader = grade_class_both_ways(tmp_path / "class", tmp_path / "out", tmp_path / "course", list(students),
                                           assignment=NAME)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = {s: json.loads((tmp_path / "out" / f"{s}.json").read_text())["score"] for s in students}
    assert cli["alice"] == 100 and 0 < cli["bob"] < 100 and cli["carol"] == 0, cli
    assert nbgrader == pytest.approx(cli, abs=1e-3)

    course = Course(tmp_path / "course", NAME)  # the course nbgrader graded: its feedback, for every student
    course.nbgrader("generate_feedback", NAME, "--force")
    for student in students:
        assert (course.root / "feedback" / student / NAME / f"{NAME}.html").is_file(), student


def test_its_source_notebook_trains_once_and_draws_the_look_back(monkeypatch, tmp_path):
    """Top to bottom, with matplotlib's inline pictures (MPLBACKEND unset, as in JupyterLab): every check cell
    passes, the plots draw the check cell's one 300-step run instead of training again, and in the trained
    model's attention one head puts nearly all its weight 3 positions back (the token 4 before the predicted
    one)."""
    monkeypatch.delenv("MPLBACKEND", raising=False)
    notebook = nbformat.read(Assignment(NAME).source_notebook, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",  # 11 s on 2 idle cores; far more under load
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in notebook.cells}
    printed = {grade_id: "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")
               for grade_id, cell in cells.items()}
    for part in load_rubric(NAME).parts:
        assert "all visible checks passed" in printed[part.name], (part.name, printed[part.name])
    assert printed["setup"].startswith(f"DEVICE = '{'cuda' if torch.cuda.is_available() else 'cpu'}'"), printed["setup"]
    for plot in ("training_plot", "attention_plot"):
        assert "train_toy_model" not in cells[plot].source, f"{plot} trains again"
        assert any("image/png" in o.get("data", {}) for o in cells[plot].outputs), f"{plot} drew nothing"
    back = [float(w) for w in re.findall(r"average weight 3 positions back (\d\.\d\d)", printed["attention_plot"])]
    assert len(back) == 2 and max(back) > 0.9, printed["attention_plot"]
    assert {"setup", "training_plot", "attention_plot"} <= set(load_rubric(NAME).skip_when_unchanged)
    assert list(tmp_path.iterdir()) == [], "the notebook must not write files"


def test_no_assignments_hidden_files_are_visible_in_its_sandbox():
    hidden = [str(path) for name in assignment_names() for path in
              (Assignment(name).solutions_module, Assignment(name).manifest, Assignment(name).source_notebook)]
    cell = f"import os\n\ndef visible():\n    return [p for p in {hidden!r} if os.path.exists(p)]\n"
    submission = RemoteSubmission([cell], Limits(), load_rubric(NAME).forbidden_ops)
    try:
        assert submission.call("visible") == []
    finally:
        submission.close()
