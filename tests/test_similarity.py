"""Copying is visible (autograder/judging/similarity.py, autograder/reports/similarity.py): a class holding a
copied pair, a copied pair with renamed variables and reordered functions, independent correct solutions (the
reference and the catalogue's variants) and the untouched release ranks the copies on top, above the
threshold, and nothing else above it; the release's own code never counts; the page escapes what students
wrote and what they are called; torch's own code pasted into a cell is named."""
from __future__ import annotations

import html as html_module
import json
import re
from pathlib import Path

import pytest

from autograder.authoring.catalogue import Entry, load, release_cells
from autograder.judging import similarity
from autograder.authoring.similarity import class_report, release_code
from autograder.judging.similarity import MIN_SHARED, REVIEW_SHARE
from autograder.reports.similarity import page
from conftest import run_cli
from torch_routes import entry as torch_route

ASSIGNMENT = "transformer_block"
HOSTILE_NAME = '<img src=x onerror="alert(1)">&amp;'
HOSTILE_CODE = '    # </pre><script>alert("code")</script>\n'
# the cells the copied-and-renamed pair is made of: variants' cells that no independent submission uses
DANA_VARIANTS = ("addcmul-inline-LayerNorm", "stable-softmax-by-hand", "unflatten-own-scores", "torch-style-block",
                 "grad-autograd-grad", "batch-clone-rsqrt", "count-by-layer-list", "grad-norms-block-by-block",
                 "md-batched-nudges", "hs-strided-slices", "ob-one-batched-call")
# variants that are the reference edited (mutations) or reuse the cells above: not independent of them
NOT_INDEPENDENT = {"nb-reference", "nb-mingpt-bias-buffer", "llms-from-scratch-mask-buffer",
                   "non-persistent-mask-buffer", "nb-fused-qkv-einsum", *DANA_VARIANTS}
AS_NOTEBOOK = {"var_mean-rsqrt-einsum", "fused-qkv"}  # handed in as the release notebook: checks, plots and all
RENAMES = {"x": "inp", "mean": "mu", "centred": "ctr", "std": "sigma", "scores": "logits", "shifted": "ex",
           "seq": "n", "layers": "stack", "layer": "lin", "h": "hidden", "grad": "g", "q": "query", "k": "key",
           "v": "value", "t": "tensor_in"}  # never a keyword argument's name


def _renamed(code: str) -> str:
    """Local names renamed (never an attribute, which the contract names), functions of a cell swapped."""
    renamed = re.sub(r"(?<![.\w])(%s)\b" % "|".join(RENAMES), lambda m: RENAMES[m.group(1)], code)
    functions = re.split(r"\n(?=def )", renamed.strip())
    return "\n\n\n".join(reversed(functions)) + "\n"


def build_class(folder: Path) -> dict[str, str]:
    """Writes the class into `folder`; student -> what they are."""
    catalogue = load(ASSIGNMENT)
    stubs = release_cells(ASSIGNMENT)
    reference = catalogue.solution_cells(catalogue.entry("reference"))
    kinds: dict[str, str] = {}

    def hand_in(student: str, kind: str, cells: dict[str, str], after: tuple[str, ...] = (),
                notebook: bool = False) -> None:
        entry = Entry(student, kind, replace={**stubs, **cells}, after=after, notebook=notebook)
        suffix = ".ipynb" if notebook else ".py"
        text = (json.dumps(catalogue.notebook(entry), indent=1) if notebook else catalogue.python_source(entry))
        (folder / f"{student}{suffix}").write_text(text, encoding="utf-8")
        kinds[student] = kind

    folder.mkdir(parents=True, exist_ok=True)
    # (a) a copied pair: the reference, and the reference with comments, blank lines and a hostile comment added
    hand_in("ref", "independent", reference)
    copied = {gid: code.replace("\n    return", f"\n{HOSTILE_CODE}\n    return", 1) + "\n# checked it twice\n"
              for gid, code in reference.items()}
    hand_in(HOSTILE_NAME, "copy of ref", copied)
    # (b) a copied pair with renamed variables and reordered functions (and cells handed in in another order)
    dana = {gid: code for name in DANA_VARIANTS for gid, code in catalogue.entry(name).replace.items()}
    hand_in("dana", "independent", dana)
    assert set(dana) == set(stubs)  # a whole solution, so that eve hands in no stub
    imports = catalogue.assignment.imports_cell(catalogue.notebook())
    eve = [imports, *(_renamed(code) for code in reversed(dana.values()))]  # the cells in the reverse order too
    (folder / "eve.py").write_text("\n\n".join(f"# %%\n{cell.strip()}\n" for cell in eve), encoding="utf-8")
    kinds["eve"] = "copy of dana, renamed and reordered"
    # (c) independent correct solutions: each variant's own cells, the parts it leaves as the reference's left
    # as the release's stubs (taken whole, the variants are the reference with a cell or two replaced)
    for variant in catalogue.entries():
        if variant.kind == "variant" and variant.name not in NOT_INDEPENDENT | {"reference"}:
            hand_in(variant.name, "independent", variant.replace, variant.after, notebook=variant.name in AS_NOTEBOOK)
    # (d) the release untouched, as a notebook and as a .py file
    (folder / "stubs_nb.ipynb").write_text(json.dumps(catalogue.notebook(), indent=1), encoding="utf-8")
    kinds["stubs_nb"] = "release"
    hand_in("stubs_py", "release", {})
    # torch's own layer norm pasted (tests/torch_routes.py), everything else left as released
    part, cell, source, _ = torch_route("ln-pasted-refs-normalize")
    hand_in("paster", "torch's code", {cell: source})
    return kinds


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    folder = tmp_path_factory.mktemp("similarity") / "class"
    kinds = build_class(folder)
    return folder, kinds, class_report(folder, ASSIGNMENT)


COPIED_PAIRS = [{"ref", HOSTILE_NAME}, {"dana", "eve"}]


def test_copied_pairs_rank_on_top_above_the_threshold(graded_class):
    _, _, report = graded_class
    top = [{p.a, p.b} for p in report.pairs[:2]]
    assert sorted(map(sorted, top)) == sorted(map(sorted, COPIED_PAIRS))
    assert all(p.to_review() for p in report.pairs[:2])
    assert [{p.a, p.b} for p in report.to_review] == top
    for p in report.pairs[:2]:
        assert p.score >= 0.8 and p.shared >= 3 * MIN_SHARED, p


def test_no_independent_pair_is_above_the_threshold(graded_class):
    _, kinds, report = graded_class
    independent = [p for p in report.pairs if {p.a, p.b} not in COPIED_PAIRS]
    assert independent, "independent solutions share some idiom: the test would show nothing otherwise"
    assert all(not p.to_review() for p in independent)
    assert max(p.score for p in independent) < REVIEW_SHARE


def test_the_release_never_counts(graded_class):
    _, kinds, report = graded_class
    for student in ("stubs_nb", "stubs_py"):
        assert report.written(student).prints == {}, student  # nothing of their own: stubs, imports, checks
    assert not [p for p in report.pairs if {"stubs_nb", "stubs_py"} & {p.a, p.b}]
    # two students who solved different parts in the release notebook share its checks, plots and imports
    assert not [p for p in report.pairs if {p.a, p.b} == AS_NOTEBOOK]
    # the release's own text left in a solved cell (signatures, docstrings) is no fingerprint of the student
    release = similarity.Release.of(release_code(ASSIGNMENT))
    assert all(h not in release.kgrams for w in report.submissions for h in w.prints)


def test_torchs_own_implementation_is_named(graded_class):
    _, _, report = graded_class
    found = {w.student: [r.function for r in w.torch] for w in report.submissions if w.torch}
    assert found == {"paster": ["torch._refs._normalize"]}
    assert report.written("paster").torch_lines["torch._refs._normalize"]


def test_the_page_shows_matches_side_by_side_and_escapes_names_and_code(graded_class, tmp_path):
    _, _, report = graded_class
    text = page(report)
    assert "<script" not in text and "onerror=" not in text.replace("onerror=&quot;", "")
    assert html_module.escape(HOSTILE_NAME, quote=True) in text
    assert html_module.escape(HOSTILE_CODE.strip(), quote=False) in text  # shown, inside a matched region
    assert text.count('class="pair"') >= 2 and "<mark" in text
    assert "torch._refs._normalize" in text
    assert re.search(r'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'', text)


def test_command_line_writes_the_page(graded_class, tmp_path):
    folder, _, _ = graded_class
    out = tmp_path / "site" / "similarity.html"
    done = run_cli("similarity", folder, "-o", out, "--assignment", ASSIGNMENT, "--json", tmp_path / "s.json")
    assert done.returncode == 0, done.stderr
    assert "2 pairs to review" in done.stderr
    stored = json.loads((tmp_path / "s.json").read_text())
    assert sum(p["to_review"] for p in stored["pairs"]) == 2 and stored["threshold"] == REVIEW_SHARE
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    refused = run_cli("similarity", folder, "-o", out, "--threshold", "2")
    assert refused.returncode == 2 and "threshold" in refused.stderr
