"""The second assignment, gpt_decoder, beyond what every assignment must do (tests/test_assignments.py,
tests/test_assignment_catalogues.py): its five parts and the size of its catalogue, and its source notebook,
which trains a toy model once and draws what it learnt."""
from __future__ import annotations

import re

import nbformat
import torch
from nbclient import NotebookClient

from autograder.authoring.assignment import Assignment
from autograder.authoring.catalogue import load
from autograder.grading.rubric import load_rubric

NAME = "gpt_decoder"


def test_its_parts_and_the_size_of_its_catalogue():
    assert len(load_rubric(NAME).parts) == 5
    catalogue = load(NAME)
    mistakes = [e for e in catalogue.entries() if e.part is not None]
    variants = [e for e in catalogue.entries() if e.part is None and e.name != "reference"]
    assert len(mistakes) >= 30 and len(variants) >= 10, (len(mistakes), len(variants))


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


def test_the_training_suites_adam_is_torchs_step_for_step():
    """The own-parts check of Part 5 runs Adam's steps on the trusted side without torch's class (whose first
    construction imports torch._dynamo): the same values, bit for bit, a parameter without a gradient at first
    included."""
    from assignments.gpt_decoder.test_training import Adam

    generator = torch.Generator().manual_seed(0)
    start = {"a": torch.randn(4, 3, generator=generator), "b": torch.randn(5, generator=generator)}
    leaves = {n: p.clone().requires_grad_(True) for n, p in start.items()}
    theirs, ours = torch.optim.Adam(leaves.values(), lr=1e-2), Adam(start, 1e-2)
    for step in range(4):
        grads = {n: torch.randn(p.shape, generator=generator) for n, p in start.items()}
        if step == 0:
            grads["b"] = None
        for name, leaf in leaves.items():
            leaf.grad = grads[name]
        theirs.step()
        mine = ours.step(grads)
        assert all(torch.equal(mine[n], leaves[n].detach()) for n in start), step
