"""The source notebook, the solutions module generated from it and the student release stay consistent.

The last test executes the whole source notebook in a kernel and is the slow one (a few seconds);
test_release_* run the real nbgrader once (a few seconds, shared through a module-scoped fixture).
"""
from __future__ import annotations

import ast
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import torch
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import notebook_shape  # noqa: E402
from autograder.authoring import notebook_sync, release  # noqa: E402
from autograder.grading.rubric import load_rubric  # noqa: E402
from autograder.authoring.assignment import (BEGIN_MARKER, END_MARKER, Assignment,  # noqa: E402
                                             nbgrader_meta, source_text, strip_solution_markers)

TB = Assignment("transformer_block")
SOURCE, MODULE, RELEASE = TB.source_notebook, TB.solutions_module, TB.release_notebook

# the parts and points the notebooks must carry: the manifest's, which add up to 100
EXPECTED_PARTS = {part.name: part.points for part in load_rubric(TB.name).parts}
PICTURES = set(load_rubric(TB.name).skip_when_unchanged)  # the locked plot cells grading never runs
assert sum(EXPECTED_PARTS.values()) == 100
CONTRACT = {"layer_norm", "LayerNorm", "causal_mask", "attention_weights", "scaled_dot_product_attention",
            "mask_dependence", "largest_dependence", "MultiHeadAttention", "ideal_head_weights", "guaranteed_share",
            "permutation_error", "TransformerBlock", "input_grad_norm", "batch_normalise", "batch_dependence",
            "block_parameter_count", "layer_grad_norms"}

_x = torch.randn(2, 3, 8)
STUB_CALLS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "layer_norm": lambda ns: ns["layer_norm"](_x, torch.ones(8), torch.zeros(8)),
    "LayerNorm": lambda ns: ns["LayerNorm"](8),
    "causal_mask": lambda ns: ns["causal_mask"](3),
    "attention_weights": lambda ns: ns["attention_weights"](_x, _x),
    "scaled_dot_product_attention": lambda ns: ns["scaled_dot_product_attention"](_x, _x, _x),
    "mask_dependence": lambda ns: ns["mask_dependence"](3, 2, True),
    "largest_dependence": lambda ns: ns["largest_dependence"](torch.rand(3, 3)),
    "MultiHeadAttention": lambda ns: ns["MultiHeadAttention"](8, 2),
    "ideal_head_weights": lambda ns: ns["ideal_head_weights"]([0, 2], 2, 4),
    "guaranteed_share": lambda ns: ns["guaranteed_share"](torch.rand(2, 4), [0, 2]),
    "permutation_error": lambda ns: ns["permutation_error"](torch.nn.Identity(), _x, torch.arange(3)),
    "TransformerBlock": lambda ns: ns["TransformerBlock"](8, 2, 16),
    "input_grad_norm": lambda ns: ns["input_grad_norm"](2, True),
    "batch_normalise": lambda ns: ns["batch_normalise"](_x[0]),
    "batch_dependence": lambda ns: ns["batch_dependence"]("batch"),
    "block_parameter_count": lambda ns: ns["block_parameter_count"](8, 2, 16),
    "layer_grad_norms": lambda ns: ns["layer_grad_norms"]([torch.nn.Identity()], _x, _x),
}
assert set(STUB_CALLS) == CONTRACT


_cells, _grade_cells = notebook_shape.cells, notebook_shape.grade_cells
_meta, _source = nbgrader_meta, source_text


def _solution_cells(path: Path) -> list[str]:
    return [_source(c) for c in _cells(path) if c["cell_type"] == "code" and _meta(c).get("solution")]


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release.generate_release(TB, tmp_path_factory.mktemp("release"))


@pytest.fixture(scope="module")
def stub_namespace() -> dict[str, Any]:
    """What a student starts from: the release's imports and solution cells, run untouched (no plots)."""
    namespace: dict[str, Any] = {"__name__": "release_stubs"}
    for cell in _cells(RELEASE):
        if cell["cell_type"] == "code" and (_meta(cell).get("solution")
                                            or _meta(cell).get("grade_id") == Assignment.IMPORTS_GRADE_ID):
            exec(compile(_source(cell), f"<release cell {cell['id']}>", "exec"), namespace)
    return namespace


# --- the solutions module is generated from the notebook ------------------------------------------------

def test_solutions_module_matches_notebook() -> None:
    assert MODULE.read_text(encoding="utf-8") == notebook_sync.render_solutions_module(TB), \
        "solutions/transformer_block.py is stale: run `python -m autograder.authoring.notebook_sync write`"


def test_solutions_module_defines_the_contract_and_nothing_else() -> None:
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert defined == CONTRACT
    assert all(isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
               for node in tree.body[1:]), "only the docstring, imports and definitions belong in the module"
    assert "matplotlib" not in MODULE.read_text(encoding="utf-8")


def test_sync_check_detects_drift(tmp_path: Path) -> None:
    for relative in (SOURCE.relative_to(REPO_ROOT), MODULE.relative_to(REPO_ROOT)):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / relative, tmp_path / relative)
    root = ["--root", str(tmp_path), "--assignment", TB.name]
    assert notebook_sync.main(["check", *root]) == 0

    module = tmp_path / MODULE.relative_to(REPO_ROOT)
    module.write_text(module.read_text(encoding="utf-8").replace("keepdim=True", "keepdim=False", 1))
    assert notebook_sync.main(["check", *root]) == 1
    assert notebook_sync.main(["write", *root]) == 0
    assert notebook_sync.main(["check", *root]) == 0

    notebook = tmp_path / SOURCE.relative_to(REPO_ROOT)
    notebook.write_text(notebook.read_text(encoding="utf-8").replace("math.sqrt(q.shape[-1])", "q.shape[-1]", 1))
    assert notebook_sync.main(["check", *root]) == 1


def test_policy_cell_is_the_rubrics_policy(tmp_path: Path) -> None:
    """The notebook tells students what the rubric disables, in the rubric's words; a drift is caught."""
    rubric = load_rubric(TB.name)
    notebook = json.loads(SOURCE.read_text(encoding="utf-8"))
    policy = source_text(notebook_sync._policy_cell(notebook))
    assert policy == notebook_sync.render_policy(rubric, notebook)
    # parts are named by the notebook's headings, sub-parts ("Part 2b") included
    assert notebook_sync.part_numbers(notebook)["multi_head_attention"] == "3"
    assert notebook_sync.part_numbers(notebook)["mask_dependence"] == "2b"
    assert "| 3 Multi-head attention |" in policy and "| 4 Transformer block" in policy
    for part in rubric.parts:
        assert all(f"`{name}`" in policy for name in part.off_limits)
    copy = tmp_path / "n.ipynb"
    copy.write_text(SOURCE.read_text(encoding="utf-8").replace("torch.nn.LayerNorm`", "torch.nn.Linear`", 1))
    assert not notebook_sync.sync_policy(TB, write=False, notebook_path=copy)
    assert notebook_sync.sync_policy(TB, True, copy) and notebook_sync.sync_policy(TB, False, copy)


def test_marker_stripping_keeps_indentation() -> None:
    cell = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    assert strip_solution_markers(cell) == "def f():\n    return 1"
    with pytest.raises(ValueError):
        strip_solution_markers("### BEGIN SOLUTION\nx = 1")


# --- grade cells ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [SOURCE, RELEASE], ids=["source", "release"])
def test_grade_cells_match_the_rubric(path: Path) -> None:
    grade_cells = _grade_cells(path)
    assert {_meta(c)["grade_id"]: _meta(c)["points"] for c in grade_cells} == EXPECTED_PARTS
    assert len(grade_cells) == len(EXPECTED_PARTS)
    assert all(c["cell_type"] == "code" and _meta(c)["locked"] and not _meta(c)["solution"] for c in grade_cells)
    grade_ids = [_meta(c)["grade_id"] for c in _cells(path)]
    assert len(grade_ids) == len(set(grade_ids)), "nbgrader needs unique grade_ids"


# --- steps for students: goals, hints, a written question per part (the checks in notebook_shape.py) ---------

@pytest.mark.parametrize("part", sorted(EXPECTED_PARTS))
def test_every_part_has_goals_hints_and_a_question_where_students_meet_them(part: str) -> None:
    notebook_shape.assert_part_steps(TB, part, PICTURES)


def test_the_written_answers_are_manually_graded_cells_with_model_answers_in_the_source_only() -> None:
    notebook_shape.assert_written_answers(TB)
    assert sum(EXPECTED_PARTS.values()) == 100


def test_how_this_notebook_works_follows_the_policy_cell() -> None:
    notebook_shape.assert_how_to_work_and_parts(TB)


# --- the release --------------------------------------------------------------------------------------------

def test_release_is_not_stale(fresh_release: Path) -> None:
    assert release.notebooks_equal(fresh_release, RELEASE), \
        "release/transformer_block/transformer_block.ipynb is stale: run `python -m autograder.authoring.release write`"
    assert fresh_release.read_bytes() == RELEASE.read_bytes(), "generation should be byte-for-byte deterministic"


def test_release_comparison_notices_a_change(fresh_release: Path, tmp_path: Path) -> None:
    notebook = json.loads(fresh_release.read_text(encoding="utf-8"))
    notebook["cells"][0]["source"] = ["edited"]
    tampered = tmp_path / "tampered.ipynb"
    tampered.write_text(json.dumps(notebook), encoding="utf-8")
    assert not release.notebooks_equal(fresh_release, tampered)


def test_release_contains_no_solution_code() -> None:
    solution_lines: set[str] = set()
    for code in _solution_cells(SOURCE):
        inside = False
        for line in code.split("\n"):
            if line.strip() == BEGIN_MARKER:
                inside = True
            elif line.strip() == END_MARKER:
                inside = False
            elif inside and line.strip():
                solution_lines.add(line.strip())
    assert len(solution_lines) > 30, "expected the source to hold the full solutions"
    release_text = RELEASE.read_text(encoding="utf-8")
    release_lines = {line.strip() for c in _cells(RELEASE) for line in _source(c).split("\n")}
    assert not solution_lines & release_lines, f"solution lines leaked: {sorted(solution_lines & release_lines)}"
    assert "BEGIN SOLUTION" not in release_text and "END SOLUTION" not in release_text


def test_every_release_function_is_a_stub() -> None:
    """Each function and method, __init__ included, must raise at once: no points for structure alone."""
    functions = [node for code in _solution_cells(RELEASE) for node in ast.walk(ast.parse(code))
                 if isinstance(node, ast.FunctionDef)]
    assert {f.name for f in functions} >= {"__init__", "forward"}
    for function in functions:
        raises = [s for s in function.body if isinstance(s, ast.Raise)
                  and ast.unparse(s.exc) in ("NotImplementedError()", "NotImplementedError")]
        assert raises, f"{function.name} (line {function.lineno}) does not raise NotImplementedError"


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_release_stub_raises_not_implemented(stub_namespace: dict[str, Any], name: str) -> None:
    with pytest.raises(NotImplementedError):
        STUB_CALLS[name](stub_namespace)


@pytest.mark.parametrize("grade_id", sorted(EXPECTED_PARTS))
def test_check_cells_fail_on_the_untouched_release(stub_namespace: dict[str, Any], grade_id: str) -> None:
    [cell] = [c for c in _grade_cells(RELEASE) if _meta(c)["grade_id"] == grade_id]
    with pytest.raises(NotImplementedError):
        exec(compile(_source(cell), f"<check cell {grade_id}>", "exec"), dict(stub_namespace))


# --- slow: the source notebook runs top to bottom ---------------------------------------------------------

def test_slow_source_notebook_executes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")  # as the grader runs it
    notebook = nbformat.read(SOURCE, as_version=4)
    started = time.perf_counter()
    NotebookClient(notebook, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on the first failing cell
    elapsed = time.perf_counter() - started
    assert elapsed < 60, f"the source notebook took {elapsed:.1f} s"
    for cell in notebook.cells:
        if _meta(cell).get("grade") and not _meta(cell).get("solution"):
            printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert "all visible checks passed" in printed, f"check cell {_meta(cell)['grade_id']}: {printed!r}"
    printed = {_meta(c).get("grade_id"): "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
               for c in notebook.cells if c.cell_type == "code"}
    gpu = torch.cuda.is_available()  # the CUDA branch of both cells is correct by construction, unobserved here
    assert printed["setup"].startswith(f"DEVICE = '{'cuda' if gpu else 'cpu'}'"), printed["setup"]
    assert printed["gpu_check"].startswith("GPU check passed" if gpu else "GPU check skipped"), printed["gpu_check"]
    assert {"setup", "gpu_check"} <= set(load_rubric(TB.name).skip_when_unchanged), "grading must not run them"
    assert list(tmp_path.iterdir()) == [], "the notebook must not write files"


@pytest.mark.parametrize("tool", [notebook_sync, release])
def test_an_unknown_assignment_is_a_usage_error(tool, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        tool.main(["check", "--assignment", "nope"])
    assert stopped.value.code == 2 and "no assignment 'nope'" in capsys.readouterr().err


def test_the_table_of_parts_is_generated_from_the_manifest_and_the_notebook(tmp_path: Path) -> None:
    """Each part's number, title, names, time and points in the notebook's `parts` cell come from the manifest and
    the notebook's own cells; a hand edit there, or a changed time in a goals cell, is caught as stale."""
    notebook = json.loads(SOURCE.read_text(encoding="utf-8"))
    table = source_text(next(c for c in notebook["cells"] if c["id"] == notebook_sync.PARTS_GRADE_ID))
    assert table == notebook_sync.render_parts(load_rubric(TB.name), notebook)
    assert "| 2b | Measuring what the mask hides | `mask_dependence`, `largest_dependence` | 25 min | 6 |" in table
    assert f"| **{sum(EXPECTED_PARTS.values()):g}** |" in table and "11 short questions" in table
    copy = tmp_path / "n.ipynb"
    for edit in (("| 25 min | 6 |", "| 25 min | 7 |"), ("**Time:** about 25 minutes", "**Time:** about 35 minutes")):
        copy.write_text(SOURCE.read_text(encoding="utf-8").replace(*edit, 1))
        assert not notebook_sync.sync_policy(TB, write=False, notebook_path=copy), edit
        assert notebook_sync.sync_policy(TB, True, copy) and notebook_sync.sync_policy(TB, False, copy)
