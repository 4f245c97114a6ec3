"""Feedback pages and their pictures: the evidence failing checks attach, carried through results.json (and
refused when forged), drawn into self-contained pages that escape everything a submission wrote; then three
real one-bug submissions graded through the command line with --html, and grade-all --html over them."""
from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import os
import re
from html import unescape
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import PIL.Image
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from nbgrader.utils import determine_grade

from autograder import REPO_ROOT
from autograder.authoring.assignment import Assignment
from autograder.authoring.catalogue import load as load_catalogue
from autograder.judging import checks, evidence
from autograder.judging.checks.failing import Later
from autograder.judging.checks.mismatch import error_map
from autograder.judging.evidence import Curves, Dependence, ErrorMap, Series
from autograder.judging.judge import Outcome
from autograder.grading.rubric import PartScore, load_rubric, score
from autograder.grading.rubric import TestScore as Score  # not collected as a test class
from autograder.nbgrader.pictures import EVIDENCE, NO_PICTURE, drawn_outputs
from autograder.nbgrader.plugin import write_verdicts
from autograder.model.load_report import Notice, NoticeKind
from autograder.protocol import UNISOLATED
from autograder.reports import html
from autograder.reports.figures import png as draw
from autograder.grading.results_json import NotAResult, from_gradescope, gradescope, read_result
from autograder.grading.result import GradeResult
from conftest import ASSIGNMENT, leaked_hidden_source, run_cli

RUBRIC = load_rubric(ASSIGNMENT)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DATA_PNG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')

CAUSAL = Dependence("attention with a causal mask", "gradient", ("q", "v"), (False, True),
                    (("10000", "01000", "00100", "00010", "00001"), ("11111", "11000", "11100", "11110", "11111")))
MISMATCH = ErrorMap("layer_norm output", (2, 5, 6), "dim -2 (positions)", "last dim (features)", 1,
                    tuple(tuple(0.5 if c < 3 else 12.0 for c in range(6)) for _ in range(4)) + ((-1.0,) * 6,))
CURVES = Curves("input_grad_norm", "n_layers", "norm", True,
                (Series("recipe", False, (1.0, 2.0, 3.0), (1.0, 0.1, 0.01)),
                 Series("yours", True, (1.0, 3.0), (1.0, None))))
FIGURES = {"layer_norm": MISMATCH, "attention": CAUSAL, "gradient_experiment": CURVES}


def result_with(figures: dict[str, evidence.Figure], message: str = "max abs error 0.5",
                name: str = "test_check", submission: str = "alice.ipynb",
                hints: tuple[str, ...] = ("look here",)) -> GradeResult:
    """Every part of the rubric: one passing check, and one failing check carrying the part's figure."""
    parts = []
    for part in RUBRIC.parts:
        share = part.points / 2
        tests = [Score(part.name, "test_passes", share, share, True, ""),
                 Score(part.name, name, 0.0, share, False, message, figures.get(part.name), hints)]
        parts.append(PartScore(part, share, tests, ()))
    return GradeResult(submission, "ab" * 32, RUBRIC.assignment, parts, RUBRIC.max_score)


def stored(result: GradeResult) -> dict:
    """results.json as a file holds it (NaN written as JSON's NaN, as json.dump would)."""
    return json.loads(json.dumps(gradescope(result, cells_sha256="c" * 64, assignment_fingerprint="f" * 64)))


def pngs(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in DATA_PNG.findall(page)]


def notebook_outputs(result: GradeResult) -> list:
    """The check cells as nbgrader's autograde writes them."""
    notebook = nbformat.read(str(Assignment(ASSIGNMENT).release_notebook), as_version=4)
    write_verdicts(notebook, result)
    return [cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")
            and cell.cell_type == "code"]


def feedback_outputs(result: GradeResult) -> list:
    """The check cells as generate_feedback shows them: the evidence drawn (nbgrader.pictures.DrawPictures)."""
    cells = notebook_outputs(result)
    for cell in cells:
        cell.outputs = drawn_outputs(cell.outputs)
    return cells


# --- evidence through results.json ------------------------------------------------------------------------

def test_evidence_round_trips_through_results_json_and_draws_the_same_page():
    fresh = result_with(FIGURES)
    again = from_gradescope(stored(fresh), RUBRIC)
    assert [t.figure for p in again.parts for t in p.tests] == [t.figure for p in fresh.parts for t in p.tests]
    assert sum(t.figure is not None for p in again.parts for t in p.tests) == 3
    assert html.student_page(again) == html.student_page(fresh)
    assert notebook_outputs(again) == notebook_outputs(fresh)
    assert feedback_outputs(again) == feedback_outputs(fresh)


def _figure_json(data: dict, part: str) -> dict:
    return data["extra_data"]["parts"][part]["tests"][1][5]


def _set(path: tuple, value: object):
    def change(data: dict) -> None:
        *outer, last = path
        holder = _figure_json(data, {"c": "attention", "m": "layer_norm", "g": "gradient_experiment"}[outer[0]])
        for key in outer[1:]:
            holder = holder[key]
        holder[last] = value
    return change


def _many_figures(data: dict) -> None:
    """More tests carrying evidence than a grade may have."""
    tests = data["extra_data"]["parts"]["layer_norm"]["tests"]
    for i in range(evidence.MAX_FIGURES):
        tests.append([f"test_extra_{i}", 0.0, 0.0, False, "extra", evidence.to_json(MISMATCH)])


def _on_passed_test(data: dict) -> None:
    data["extra_data"]["parts"]["layer_norm"]["tests"][0][5] = evidence.to_json(MISMATCH)


FORGERIES = {
    "ratio-as-text": _set(("m", "ratio", 0, 0), "1.0"),
    "ratio-nan": _set(("m", "ratio", 0, 0), math.nan),
    "ratio-infinite": _set(("m", "ratio", 0, 0), math.inf),
    "ratio-negative": _set(("m", "ratio", 0, 0), -2.0),
    "ratio-huge": _set(("m", "ratio", 0, 0), 1e300),
    "ratio-int": _set(("m", "ratio", 0, 0), 1),
    "map-too-tall": _set(("m", "ratio"), [[0.5]] * (evidence.MAX_SIDE + 1)),
    "map-too-wide": _set(("m", "ratio"), [[0.5] * (evidence.MAX_SIDE + 1)]),
    "map-million": _set(("m", "ratio"), [[0.5] * 1000] * 1000),
    "map-ragged": _set(("m", "ratio"), [[0.5, 0.5], [0.5]]),
    "map-empty": _set(("m", "ratio"), []),
    "groups-bool": _set(("m", "groups"), True),
    "groups-not-dividing": _set(("m", "groups"), 2),
    "shape-negative": _set(("m", "shape"), [-1, 5]),
    "causal-symbol": _set(("c", "matrices", 0, 0), "10x00"),
    "causal-row-too-long": _set(("c", "matrices", 0, 0), "1" * (evidence.MAX_SIDE + 1)),
    "causal-too-many-inputs": _set(("c", "inputs"), ["a", "b", "c", "d", "e"]),
    "causal-required-length": _set(("c", "required"), [True]),
    "causal-method": _set(("c", "method"), "guessed"),
    "causal-name-not-text": _set(("c", "inputs", 0), 7),
    "curve-too-long": _set(("g", "series", 0, "x"), [1.0] * (evidence.MAX_POINTS + 1)),
    "curve-nan": _set(("g", "series", 0, "y", 0), math.nan),
    "curve-x-text": _set(("g", "series", 0, "x", 0), "1"),
    "curve-lengths": _set(("g", "series", 1, "y"), [1.0]),
    "too-many-series": _set(("g", "series"), [evidence.to_json(CURVES)["series"][0]] * (evidence.MAX_SERIES + 1)),
    "title-too-long": _set(("g", "title"), "t" * (evidence.MAX_TEXT + 1)),
    "unknown-kind": _set(("g", "kind"), "script"),
    "extra-field": _set(("g", "onload"), "alert(1)"),
    "not-an-object": lambda data: data["extra_data"]["parts"]["layer_norm"]["tests"][1].__setitem__(5, [1, 2]),
    "a-field-missing": lambda data: data["extra_data"]["parts"]["layer_norm"]["tests"][1].pop(),
    "on-a-passed-test": _on_passed_test,
    "score-nan": lambda data: data["extra_data"]["parts"]["layer_norm"].__setitem__("exact_score", math.nan),
    "too-many-figures": _many_figures,
}


@pytest.mark.parametrize("forge", FORGERIES.values(), ids=FORGERIES.keys())
def test_forged_evidence_is_refused(forge):
    data = stored(result_with(FIGURES))
    forge(data)
    data = json.loads(json.dumps(data))  # NaN and Infinity through JSON text, as a forged file holds them
    with pytest.raises(NotAResult):
        from_gradescope(data, RUBRIC)


scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-10 ** 400, max_value=10 ** 400)
           | st.floats() | st.text(max_size=5) | st.sampled_from(["causal", "mismatch", "curves", "01?"]))
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=6), max_leaves=30)


@settings(max_examples=300, deadline=None, database=None)
@given(kind=st.sampled_from(["causal", "mismatch", "curves"]), fields=st.dictionaries(
    st.sampled_from(["title", "method", "inputs", "required", "matrices", "shape", "rows", "columns", "groups",
                     "ratio", "x_label", "y_label", "log_y", "series"]), json_values))
def test_whatever_evidence_a_file_holds_it_is_read_or_refused(kind, fields):
    """Any JSON where evidence belongs: a record, or EvidenceError (which from_gradescope makes NotAResult),
    never another exception."""
    real = evidence.to_json({"causal": CAUSAL, "mismatch": MISMATCH, "curves": CURVES}[kind])
    try:
        evidence.from_json({**real, **fields})
    except evidence.EvidenceError:
        pass


# --- the page ---------------------------------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)><a href="https://evil.example/">'


def test_hostile_text_is_escaped_and_huge_text_clipped():
    result = result_with(FIGURES, message=HOSTILE + "x" * 1_000_000, hints=(HOSTILE,),
                         name=HOSTILE * 1000, submission=HOSTILE + ".ipynb")
    result.load.notices = [Notice(NoticeKind.UNISOLATED, f"{UNISOLATED}: {HOSTILE}")]
    result.load.failure = HOSTILE
    result.load.cell_errors = [{"cell": HOSTILE, "type": HOSTILE, "message": HOSTILE * 100}]
    again = from_gradescope(stored(result), RUBRIC)  # as a page drawn later from the stored result sees it
    for page in (html.student_page(result), html.student_page(again),
                 html.class_index(ASSIGNMENT, [(HOSTILE, result), ("bob", again)])):
        lowered = page.lower()
        assert "<script" not in lowered and "<img src=x" not in lowered and "<a href=\"https" not in lowered
        assert "&lt;script&gt;" in page  # shown, as text
        assert len(page) < 1_000_000  # 5 checks of at most 20 000 characters each, names clipped, pictures
    assert html.student_page(again) == html.student_page(result)


EXTERNAL = re.compile(r"""(?:src|href|action|srcset)\s*=\s*["']?\s*(?:https?:|//)""", re.IGNORECASE)


def test_pages_are_self_contained_phone_sized_and_their_images_png():
    result = result_with(FIGURES)
    pages = {"student": html.student_page(result), "index": html.class_index(ASSIGNMENT, [("ann", result)])}
    for name, page in pages.items():
        assert not EXTERNAL.search(page) and "http://" not in page and "https://" not in page, name
        assert "<script" not in page and "<link" not in page and "url(" not in page, name
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
        assert "Content-Security-Policy" in page and "default-src 'none'" in page
        images = pngs(page)
        assert images and all(image.startswith(PNG_SIGNATURE) for image in images), name
        for image in images:
            with PIL.Image.open(io.BytesIO(image)) as decoded:
                decoded.verify()
    # one picture per failing check that carries evidence, with its hint apart from its message
    assert len(pngs(pages["student"])) == 3
    assert '<p class="hint"><strong>Hint:</strong> look here</p>' in pages["student"]
    assert 'href="students/ann.html"' in pages["index"]


def test_the_class_index_counts_failures_per_check_and_links_each_student():
    clean = result_with({})
    for part in clean.parts:
        part.tests[1] = dataclasses.replace(part.tests[1], passed=True, score=part.tests[1].max_score,
                                            message="")
        part.score = part.part.points
    results = [("ann", result_with(FIGURES)), ("b&b/..", result_with({})), ("cy", clean)]
    page = html.class_index(ASSIGNMENT, results)
    assert "3 submissions" in page and len(pngs(page)) == 1  # the distribution
    failed = re.findall(r"<tr><td>(test_\w+)</td><td class='num'>(\d+) of 3</td></tr>", page)
    assert sorted(set(failed)) == [("test_check", "2"), ("test_passes", "0")]
    assert 'href="students/b%2526b%252F...html"' in page and "b&amp;b/.." in page
    assert html.page_file("b&b/..") == "b%26b%2F...html" and "/" not in html.page_file("/" * 300)


def test_same_evidence_is_drawn_once_per_page_and_cell():
    result = result_with({"gradient_experiment": CURVES})
    part = next(p for p in result.parts if p.part.name == "gradient_experiment")
    part.tests.append(Score(part.part.name, "test_also", 0.0, 1.0, False, "off", CURVES))
    assert len(pngs(html.student_page(result))) == 1
    for cells in (notebook_outputs(result), feedback_outputs(result)):
        cell = next(c for c in cells if c.metadata.nbgrader.grade_id == "gradient_experiment")
        assert [o.output_type for o in cell.outputs].count("display_data") == 1


ALL_RED = ErrorMap("layer_norm output", (2, 5, 6), "dim -2 (positions)", "last dim (features)", 1,
                   ((2000.0,) * 6,) * 5)
HINT = "divide by n, not n - 1"


def _one_part_failing(tests: list[Score]) -> tuple[GradeResult, str]:
    """result_with({}) whose layer_norm part fails `tests` instead, and its page."""
    result = result_with({})
    part = next(p for p in result.parts if p.part.name == "layer_norm")
    part.tests = [part.tests[0], *tests]
    return result, html.student_page(result)


def test_one_bug_failing_several_checks_draws_one_picture_in_nbgraders_cell_too():
    same = [ALL_RED, dataclasses.replace(ALL_RED, ratio=((1000.0,) * 6,) * 5)]  # different evidence, one picture
    other = dataclasses.replace(ALL_RED, ratio=((0.5,) * 6,) * 5)
    result, _ = _one_part_failing([Score("layer_norm", f"test_{i}", 0.0, 2.0, False, "off", figure)
                                   for i, figure in enumerate([*same, other])])
    written = next(c for c in notebook_outputs(result) if c.metadata.nbgrader.grade_id == "layer_norm")
    assert [o.output_type for o in written.outputs].count("display_data") == 3  # autograde draws nothing
    cell = next(c for c in feedback_outputs(result) if c.metadata.nbgrader.grade_id == "layer_norm")
    pictures = [o for o in cell.outputs if o.output_type == "display_data"]
    assert len(pictures) == 2 and pictures[0].data["text/plain"].startswith("test_0: ")
    assert pictures[1].data["text/plain"].startswith("test_2: ")


def test_one_bug_failing_several_checks_shows_its_hint_and_picture_once():
    """Four checks that one bug fails the same way: the same hint, and evidence that draws the same picture
    (an equal copy, ratios past the scale's end, another output shape)."""
    same = [ALL_RED, dataclasses.replace(ALL_RED, ratio=tuple(tuple(row) for row in ALL_RED.ratio)),
            dataclasses.replace(ALL_RED, ratio=((1000.0,) * 6,) * 5), dataclasses.replace(ALL_RED, shape=(3, 5, 6))]
    assert same[1] is not same[0] and len({draw(f) for f in same}) == 1 and len(set(same)) == 3
    names = ["test_first<b>", "test_second", "test_third", "test_fourth"]
    tests = [Score("layer_norm", name, 0.0, 2.0, False, f"max abs error {i}", figure, (HINT,))
             for i, (name, figure) in enumerate(zip(names, same))]
    _, page = _one_part_failing(tests)
    assert page.count("<img") == len(pngs(page)) == 1
    assert page.count(HINT) == 1
    assert page.count("(same hint as test_first&lt;b&gt; above)") == 3
    assert page.count("The picture above, under test_first&lt;b&gt;, shows what this check saw too.") == 3
    assert "<b>" not in page
    for i, name in enumerate(names):  # every check listed, with its own message
        assert f"<h3>{html._text(name)}</h3><pre>max abs error {i}</pre>" in page
    # the other shape is said in words: the picture cannot show it
    assert page.count('<p class="meta">Here: Where your output (shape [3, 5, 6])') == 1
    assert page.count("look here") == len(RUBRIC.parts) - 1  # each other part gives its own hint


def test_distinct_hints_and_pictures_are_all_shown():
    other = dataclasses.replace(ALL_RED, ratio=((0.5,) * 6,) * 5)  # all green: another picture
    hints = [(HINT,), ("first",), (HINT, "and more"), ("second",)]
    tests = [Score("layer_norm", f"test_{i}", 0.0, 2.0, False, "off", figure, hint)
             for i, (hint, figure) in enumerate(zip(hints, [ALL_RED, MISMATCH, other, CURVES]))]
    _, page = _one_part_failing(tests)
    assert len(pngs(page)) == len(set(pngs(page))) == 4 and page.count("<img") == 4
    assert "The picture above" not in page
    for hint in (HINT, "first", "and more", "second"):
        assert f"<strong>Hint:</strong> {hint}</p>" in page
    # a hint is given once per part, also when a later check gives it beside another
    assert page.count(f"<strong>Hint:</strong> {HINT}</p>") == 1
    assert page.count("(same hint as test_0 above)") == 1


def _class(shares: dict[str, list[float]]) -> GradeResult:
    """A result whose parts score the sum of `shares[part]`, one passed check per share (a part not named:
    full points in one check)."""
    parts = []
    for part in RUBRIC.parts:
        scores = shares.get(part.name, [part.points])
        tests = [Score(part.name, f"test_{i}", s, s, True, "") for i, s in enumerate(scores)]
        parts.append(PartScore(part, sum(scores), tests, ()))
    return GradeResult("x.ipynb", "ab" * 32, RUBRIC.assignment, parts, RUBRIC.max_score)


def _full_marks(page: str) -> dict[str, int]:
    rows = re.findall(r"<tr><td>([^<]+)</td><td class='num'>[^<]+</td><td class='num'>(\d+)</td></tr>", page)
    return {unescape(title): int(n) for title, n in rows}


def test_the_class_index_counts_full_marks_to_the_kits_rounding():
    ninths = {p.name: [p.points / 9] * 9 for p in RUBRIC.parts}  # float shares: 9 x 20/9 != 20
    twenty = next(p for p in RUBRIC.parts if p.points == 20)
    assert sum(ninths[twenty.name]) == 19.999999999999996
    results = [(student, _class(ninths)) for student in ("ann", "bob", "cy")]
    assert _full_marks(html.class_index(ASSIGNMENT, results)) == {p.title: 3 for p in RUBRIC.parts}
    short = {twenty.name: [19.99]}, {twenty.name: [19.9999]}, {twenty.name: [10.0, 9.99]}
    results += [(f"short{i}", _class(s)) for i, s in enumerate(short)]
    counts = _full_marks(html.class_index(ASSIGNMENT, results))
    assert counts == {p.title: 3 if p is twenty else 6 for p in RUBRIC.parts}


def test_nbgrader_cells_keep_their_grade_and_add_the_pictures():
    result = result_with(FIGURES)
    written = {cell.metadata.nbgrader.grade_id: cell for cell in notebook_outputs(result)}
    for cell in feedback_outputs(result):
        grade_id = cell.metadata.nbgrader.grade_id
        evidence_written = [o for o in written[grade_id].outputs if o.output_type == "display_data"]
        pictures = [o for o in cell.outputs if o.output_type == "display_data"]
        assert len(pictures) == len(evidence_written) == (grade_id in FIGURES)
        for record, picture in zip(evidence_written, pictures):
            assert set(record.data) == {EVIDENCE, "text/plain"}  # autograde writes the evidence, not the picture
            assert evidence.from_json(json.loads(json.dumps(record.data[EVIDENCE]))) == FIGURES[grade_id]
            assert base64.b64decode(picture.data["image/png"]) == draw(FIGURES[grade_id])
            assert picture.data["text/plain"] == record.data["text/plain"]
            assert picture.data["text/plain"].startswith("test_check: ")
        points = float(cell.metadata.nbgrader.points)
        for graded in (written[grade_id], cell):
            assert determine_grade(graded)[0] == pytest.approx(points / 2)  # partial credit, pictures or not
            assert graded.outputs[0].output_type == "execute_result"


FORGED_RECORDS = {
    "an unknown kind": {"kind": "script", "title": "x"},
    "an oversized map": {**evidence.to_json(MISMATCH), "ratio": [[0.5] * 6] * (evidence.MAX_SIDE + 1)},
    "not an object": "<img src=x onerror=alert(1)>",
    "a ratio that is not a number": {**evidence.to_json(MISMATCH), "ratio": [["1e309"] * 6] * 5},
}


def test_evidence_that_is_not_the_kits_costs_only_its_picture_in_nbgraders_feedback():
    """An autograded notebook edited by hand or by another tool: what is not evidence the kit writes is never
    drawn (the caption stays, saying there is no picture), and the cell's other pictures are."""
    cell = next(c for c in notebook_outputs(result_with(FIGURES)) if c.metadata.nbgrader.grade_id == "layer_norm")
    good = next(o for o in cell.outputs if o.output_type == "display_data")
    forged = [nbformat.v4.new_output("display_data", data={EVIDENCE: record, "text/plain": f"test_{name}: x"})
              for name, record in FORGED_RECORDS.items()]
    drawn = drawn_outputs([*cell.outputs[:-1], *forged, good])
    assert drawn[:len(cell.outputs) - 1] == cell.outputs[:-1]  # the verdict, untouched
    shown = drawn[len(cell.outputs) - 1:]
    assert [o.data for o in shown[:-1]] == [{"text/plain": f"test_{name}: x {NO_PICTURE}"} for name in FORGED_RECORDS]
    assert base64.b64decode(shown[-1].data["image/png"]) == draw(MISMATCH)


def test_nbgraders_autograde_never_draws():
    """Drawing is generate_feedback's (nbgrader_config.py): autograde, which grades the class one notebook after
    another, loads no matplotlib."""
    script = "import sys, autograder.nbgrader.plugin; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


def test_a_grade_keeps_at_most_max_figures_the_first_in_the_suites_order():
    part = RUBRIC.parts[0]
    suite = Path(part.suite).stem
    outcomes = [Outcome(suite, f"test_{i}", False, "off", (), MISMATCH) for i in range(evidence.MAX_FIGURES + 5)]
    outcomes.append(Outcome(suite, "test_passes", True, "", (), MISMATCH))  # a check that passed shows nothing
    tests = score(RUBRIC, outcomes)[0].tests
    assert [t.figure is not None for t in tests] == [True] * evidence.MAX_FIGURES + [False] * 6


# --- what the checks attach --------------------------------------------------------------------------------

def test_a_mismatch_map_is_bounded_and_marks_nan():
    expected = torch.zeros(3, 4, 100, 200, dtype=torch.float64)
    actual = expected.clone()
    actual[1, 2, 50, 150] = 1.0
    actual[0, 0, 0, 0] = math.nan
    with pytest.raises(pytest.fail.Exception) as failed:
        checks.assert_close(actual, expected, what="x", inputs="x", atol=1e-3)
    figure = failed.value.figure
    assert isinstance(figure, ErrorMap) and figure.shape == (3, 4, 100, 200)
    assert len(figure.ratio) == evidence.MAX_SIDE and len(figure.ratio[0]) == evidence.MAX_SIDE
    assert figure.ratio[0][0] == evidence.NON_FINITE and max(max(row) for row in figure.ratio) == 1000.0
    heads = error_map("x", actual[:, :, :4, :5], expected[:, :, :4, :5], 1e-3, 0.0)
    assert heads.groups == 4 and len(heads.ratio) == 16 and heads.rows.startswith("dims 1 to -2")
    assert error_map("x", actual[0, 0, 0, 1:2], expected[0, 0, 0, 1:2], 1e-3, 0.0) is None


def test_a_causal_failure_carries_the_dependence_measured_from_the_gradients():
    seq, x = 4, torch.zeros(1, 4, 2, dtype=torch.float64)

    def leaky_vjp(cotangents):
        """Output t sees every position up to t, and position 3 too."""
        grads = []
        for t in range(seq):
            g = torch.zeros(1, seq, 2, dtype=torch.float64)
            g[:, :t + 1] = 1.0
            g[:, 3] = 1.0
            grads.append([g])
        return grads

    with pytest.raises(pytest.fail.Exception) as failed:
        checks.check_causal_jacobian(leaky_vjp, [x], ["x"], (1, seq, 2), must_matter=["x"], what="leaky", seed=0)
    assert failed.value.figure == Dependence("leaky", "gradient", ("x",), (True,),
                                             (("1001", "1101", "1111", "1111"),))

    def leaky_forward(inputs):
        """Output p sums the inputs up to p, and sees position p + 1 as well."""
        y = inputs[0].cumsum(dim=-2)
        y[..., :-1, :] += inputs[0][..., 1:, :]
        return y

    with pytest.raises(pytest.fail.Exception) as failed:
        checks.check_causal_perturbation(leaky_forward, [x], what="perturbed", seed=0)
    # measured by asking for more outputs: drawn once every verdict is final
    assert isinstance(failed.value.figure, Later)
    figure = failed.value.figure.build()
    # column j: the outputs that changed when the inputs moved at j and later (column 0 is never moved)
    assert figure.matrices == (("?100", "?110", "?111", "?111"),) and figure.method == "perturbation"


def test_evidence_on_failure_is_drawn_later_and_a_checks_own_evidence_stays():
    """What the block would draw is handed to the judge (tests/test_judge.py draws it once every verdict is
    final); nothing is built where nothing failed."""
    with pytest.raises(pytest.fail.Exception) as failed:
        with checks.evidence_on_failure(lambda: CURVES):
            checks.fail("wrong")
    assert failed.value.msg == "wrong" and isinstance(failed.value.figure, Later)
    assert failed.value.figure.build() == CURVES
    with pytest.raises(pytest.fail.Exception) as failed:
        with checks.evidence_on_failure(lambda: CURVES):
            checks.fail("wrong", MISMATCH)
    assert failed.value.figure == MISMATCH  # the check's own evidence stays

    def never():
        raise AssertionError("built although nothing failed")

    with checks.evidence_on_failure(never):
        pass


# --- real grades ------------------------------------------------------------------------------------------

# one student per picture: a causal-mask leak, a numerical mismatch, the gradient experiment
BUGS = {"alice": "att-sdpa-drops-mask", "bob": "ln-unbiased-variance", "carol": "grad-residual-flipped"}
EXPECTED = {
    "alice": {("attention", "test_sdpa_causal_has_no_future_dependence"): "causal",
              ("attention", "test_sdpa_matches_torch"): "mismatch"},
    "bob": {("layer_norm", "test_layer_norm_matches_torch_with_random_weight_and_bias"): "mismatch"},
    "carol": {("gradient_experiment", "test_gradient_vanishes_without_residuals_at_depth_40"): "curves",
              ("gradient_experiment", "test_gradient_survives_with_residuals_at_depth_40"): "curves",
              ("gradient_experiment", "test_input_grad_norm_matches_recipe_at_depth_40"): "curves"},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The three submissions, each graded once through `grade --html`, its results.json stored where grade-all
    keeps a class's results."""
    root = tmp_path_factory.mktemp("feedback")
    catalogue = load_catalogue(ASSIGNMENT)
    folder, out, pages = root / "class", root / "results", root / "pages"
    folder.mkdir()
    pages.mkdir()
    seconds = {}
    for student, bug in BUGS.items():
        source = folder / f"{student}.py"
        source.write_text(catalogue.python_source(catalogue.entry(bug)))
        started = time.monotonic()
        done = run_cli("grade", source, "-o", out / f"{student}.json", "--html", pages / f"{student}.html")
        seconds[student] = time.monotonic() - started
        assert done.returncode == 0, done.stderr[-3000:]
    return folder, out, pages, seconds


def test_each_bug_gets_pictures_of_its_kind_on_its_failing_checks_only(graded):
    folder, out, pages, _ = graded
    for student, expected in EXPECTED.items():
        data = json.loads((out / f"{student}.json").read_text())
        kinds = {}
        for part, stored_part in data["extra_data"]["parts"].items():
            for name, _, _, passed, _, figure, _ in stored_part["tests"]:
                assert figure is None or not passed, (student, name)  # none for a passing check
                if figure is not None:
                    kinds[(part, name)] = figure["kind"]
        assert expected.items() <= kinds.items(), (student, kinds)
        if student != "alice":  # the leak costs the parts built on attention too; these bugs cost their own
            own = {part for part, _ in expected}  # and the checks of the parts that run the student's own part
            built_on = {p.name for p in RUBRIC.parts if own & set(p.built_on)}
            assert {part for part, _ in kinds} <= own | built_on, (student, kinds)
        result = read_result(out / f"{student}.json", RUBRIC)
        page = (pages / f"{student}.html").read_text()
        assert f"Isolation: {data['extra_data']['isolation']}</p>" in page and "Isolation: tier " in page
        images = pngs(page)  # each picture once, however many checks saw it
        assert len(images) == len(set(images)) == len({draw(t.figure) for p in result.parts for t in p.tests
                                                       if t.figure is not None})
        assert page == html.student_page(result)  # drawn from the stored result, the page is the same


def test_the_pictures_show_what_the_submission_returned(graded):
    _, out, _, _ = graded
    leak = read_result(out / "alice.json", RUBRIC)
    causal = next(t.figure for p in leak.parts for t in p.tests
                  if t.name == "test_sdpa_causal_has_no_future_dependence")
    assert causal.inputs == ("q", "k", "v") and causal.required == (False, False, True)
    q, k, v = causal.matrices
    assert q == ("10000", "01000", "00100", "00010", "00001")  # output t uses query t alone
    assert k == v == ("11111",) * 5  # the dropped mask: every position sees every key and value
    flipped = read_result(out / "carol.json", RUBRIC)
    curves = next(t.figure for p in flipped.parts for t in p.tests if t.figure is not None)
    series = {s.label: s for s in curves.series}
    recipe = dict(zip(series["recipe, without residuals"].x, series["recipe, without residuals"].y))
    mine = series["yours, with residuals"]  # residual=True computes the plain stack
    assert all(y == pytest.approx(recipe[x], rel=1e-4) for x, y in zip(mine.x, mine.y))


def test_pages_show_no_hidden_source(graded):
    folder, _, pages, _ = graded
    for student in BUGS:
        page = (pages / f"{student}.html").read_text()
        assert leaked_hidden_source(page, ASSIGNMENT, (folder / f"{student}.py").read_text()) == [], student


def test_grade_all_writes_each_students_page_and_the_class_index(graded, tmp_path):
    folder, stored_results, pages, seconds = graded
    out, site = tmp_path / "results", tmp_path / "site"
    shutil.copytree(stored_results, out)  # the same files, already graded: grade-all keeps them
    done = run_cli("grade-all", folder, "-o", out, "--html", site)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("already graded, kept") == 3
    for student in BUGS:
        assert (site / "students" / f"{student}.html").read_text() == (pages / f"{student}.html").read_text()
    index = (site / "index.html").read_text()
    assert "3 submissions" in index and len(pngs(index)) == 1
    for student in BUGS:
        assert f'href="students/{student}.html"' in index
    for expected in EXPECTED.values():
        for part, check in expected:
            assert re.search(rf"<td>{check}</td><td class='num'>1 of 3</td>", index), check
    assert re.search(r"<td>test_causal_mask_values</td><td class='num'>0 of 3</td>", index)
    assert not EXTERNAL.search(index)
    for student in BUGS:
        page = pages / f"{student}.html"
        print(f"{student} ({BUGS[student]}): page {page.stat().st_size / 1000:.0f} kB, graded and drawn in "
              f"{seconds[student]:.1f} s")


def test_the_class_index_lists_the_known_mistakes_most_students_made():
    """Each hint counted once per student, however many checks gave it; hints of passed checks never."""
    def student(*hints: str) -> GradeResult:
        tests = [Score("layer_norm", f"test_{i}", 0.0, 2.0, False, "off", None, (hint,)) for i, hint in
                 enumerate(hints)]
        result = _one_part_failing(tests)[0]
        for part in result.parts[1:]:  # the other parts fail without a hint: the table has room for ten
            part.tests = [dataclasses.replace(t, message="off", hints=()) for t in part.tests]
        return result

    evil = "<script>x</script> as a hint"
    results = [("ann", student(HINT, HINT, HINT)), ("bo", student(HINT, evil)), ("cy", student())]
    passed = next(p for p in results[2][1].parts if p.part.name == "layer_norm")
    passed.tests.append(Score("layer_norm", "test_ok", 2.0, 2.0, True, "", None, ("never shown",)))
    page = html.class_index(ASSIGNMENT, results)
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class='num'>(\d) of 3</td></tr>", page)
    assert ("Layer normalisation", HINT, "2") in rows
    assert ("Layer normalisation", "&lt;script&gt;x&lt;/script&gt; as a hint", "1") in rows and "<script>" not in page
    assert "never shown" not in page


def test_the_page_names_the_written_answers_the_score_leaves_to_the_instructor():
    fresh = result_with({})
    assert "Graded by hand" not in html.student_page(fresh)
    fresh.graded_by_hand = dict(RUBRIC.graded_by_hand)
    page = html.student_page(fresh)
    answers = len(RUBRIC.graded_by_hand)
    assert f"Graded by hand: {answers} written answers ({2 * answers} points), not included in this score" in page
    assert page == html.student_page(from_gradescope(stored(fresh), RUBRIC))


def test_a_hint_that_holds_hint_or_a_line_break_is_shown_once_and_whole():
    """Hints are a list beside the message, never parsed out of it: a hint's own "Hint:" or line break, and a
    message line that reads like a hint, stay where the check put them, on the page drawn at once and on the
    page drawn from the stored result."""
    hint = "Hint: the scale is 1/sqrt(d_k)\n  Hint: not 1/d_k"
    tests = [Score("layer_norm", "test_scaled", 0.0, 2.0, False, "off\n  Hint: part of the message", None, (hint,))]
    result, page = _one_part_failing(tests)
    again = html.student_page(from_gradescope(stored(result), RUBRIC))
    for shown in (page, again):
        assert shown.count('<p class="hint">') == 1 + len(RUBRIC.parts) - 1  # this check's, each other part's
        assert f'<p class="hint"><strong>Hint:</strong> {hint}</p>' in shown
        assert "<pre>off\n  Hint: part of the message</pre>" in shown
    assert again == page


def _set_hints(hints: object, test: int = 1):
    def forge(data: dict) -> None:
        data["extra_data"]["parts"]["layer_norm"]["tests"][test][6] = hints
    return forge


def _set_notices(notices: object):
    def forge(data: dict) -> None:
        data["extra_data"]["notices"] = notices
    return forge


MALFORMED = {
    "hints-not-a-list": _set_hints("look here"),
    "hints-not-texts": _set_hints(["look here", 3]),
    "hint-too-long": _set_hints(["x" * 1001]),
    "too-many-hints": _set_hints([f"hint {i}" for i in range(11)]),
    "hint-with-an-escape": _set_hints(["\x1b[31mred"]),
    "hint-empty": _set_hints([""]),
    "hint-twice": _set_hints(["look here", "look here"]),
    "hints-on-a-passed-test": _set_hints(["look here"], test=0),
    "notices-as-texts": _set_notices(["graded WITHOUT isolation"]),
    "notice-of-no-kind": _set_notices([["trusted", "graded WITHOUT isolation"]]),
    "notice-kind-not-text": _set_notices([[["unisolated"], "x"]]),
    "notice-too-long": _set_notices([["child", "n" * 501]]),
    "notice-with-an-escape": _set_notices([["child", "\x1b]0;title\x07"]]),
    "notice-of-three": _set_notices([["child", "x", "y"]]),
}


@pytest.mark.parametrize("forge", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_result_with_malformed_hints_or_notices_is_refused_in_one_line(forge, tmp_path):
    result = result_with(FIGURES)
    result.load.notices = [Notice(NoticeKind.CHILD, "no cgroup of its own")]
    data = stored(result)
    assert from_gradescope(data, RUBRIC).parts[0].tests[1].hints == ("look here",)  # the unforged one is read
    forge(data)
    path = tmp_path / "alice.json"
    path.write_text(json.dumps(data))
    with pytest.raises(NotAResult) as refused:
        read_result(path, RUBRIC)
    assert str(refused.value).startswith("alice.json: ") and "\n" not in str(refused.value), str(refused.value)


def test_only_the_hosts_unisolated_notice_is_shown_whatever_a_child_wrote():
    """A notice's kind is where it came from: a child that isolated itself and writes the unisolated wording
    gets a notice of kind CHILD, which no report shows as the unisolated one; a child started without
    isolation gets the host's own notice, once, even when it says the same."""
    from autograder.grading.results_json import summary
    from autograder.host.remote import child_notices
    from autograder.protocol import UNISOLATED_NOTICE

    forged = [f"{UNISOLATED} (allowed by the grader): trust me", UNISOLATED_NOTICE]
    assert {n.kind for n in child_notices(forged, isolated=True)} == {NoticeKind.CHILD}
    assert child_notices([UNISOLATED_NOTICE, "RLIMIT_AS could not be set"], isolated=False) == [
        Notice(NoticeKind.UNISOLATED, UNISOLATED_NOTICE), Notice(NoticeKind.CHILD, "RLIMIT_AS could not be set")]
    result = result_with({})
    result.load.notices = child_notices(forged, isolated=True)
    again = from_gradescope(stored(result), RUBRIC)
    assert [n.kind for n in again.load.notices] == [NoticeKind.CHILD, NoticeKind.CHILD]
    for shown in (result, again):
        assert "Notice:" not in summary(shown) and "Notice:" not in html.student_page(shown)
    result.load.notices = child_notices(forged, isolated=False)
    again = from_gradescope(stored(result), RUBRIC)
    for shown in (result, again):
        assert summary(shown).count("Notice: ") == 1 and f"Notice: {UNISOLATED_NOTICE}" in summary(shown)
        assert html.student_page(shown).count('<p class="notice">Notice: ') == 1
