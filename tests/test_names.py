"""Names are data, never markup (issue 23): a student picks the name of the file they hand in, and in nbgrader's
layout the name of their folder, so every writer shows it through autograder.grading.result.display_name (and
grades.csv through csv_cell), and two submissions of one student are refused before anything is graded."""
from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from autograder.authoring.catalogue import load
from autograder.grading.batch import DuplicateSubmissions, Entry, choose, discover, result_path
from autograder.reports import html as html_report
from autograder.reports import junit
from autograder.grading.results_json import gradescope
from autograder.grading.result import GradeResult, csv_cell, display_name, name_of_csv_cell
from conftest import ASSIGNMENT, run_cli

# what a spreadsheet runs as a formula, when a cell starts with it (OWASP, CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# what no terminal line, log or report may hold raw: C0 but the line break, DEL, C1, bidi controls, lone surrogates
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

HOSTILE = {  # file name -> what it tries (a file name cannot hold "/", so the link has none)
    '=HYPERLINK("http:x","y").py': "a formula in grades.csv",
    "@SUM(1+1).py": "a formula starting with @",
    "-2+3.py": "a formula starting with -",
    "\x1b[31mred\x1b]0;title\x07.py": "terminal escapes: a colour and the window's title",
    "rtl<i>\u202egnp.py": "a right-to-left override (and a tag)",
    "new\nline.py": "a line break",
    os.fsdecode(b"caf\xff.py"): "a byte that is not UTF-8",
}


def reference_source() -> str:
    catalogue = load(ASSIGNMENT)
    return catalogue.python_source(catalogue.entry("reference"))


def shown(file_name: str) -> str:
    return display_name(Path(file_name).stem)


# --- display_name and csv_cell, alone ------------------------------------------------------------------------

EVERY_INVISIBLE = ([chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7f, 0xa1)]
                   + list("\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069\ufeff\ufffe\uffff")
                   + [chr(c) for c in range(0xdc80, 0xdd00)] + ["\ud800", "\U000e0001", "\U0010ffff"])


@pytest.mark.parametrize("char", EVERY_INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_or_invisible_character_is_shown_as_a_visible_escape(char):
    name = f"a{char}b"
    text = display_name(name)
    assert text.isprintable() and text.isascii() and not CONTROL.search(text)
    assert text.startswith("a\\") and text.endswith("b") and len(text) > 3
    assert display_name(text) == text  # a writer may show a name that is already shown
    text.encode("utf-8")


def test_printable_names_are_shown_as_they_are():
    for name in ("alice", "José Núñez", "王小明", "o'brien", "=x", "a\\b", "emoji 🎓"):
        assert display_name(name) == name


def test_a_byte_that_is_not_utf8_shows_as_as_text_shows_it():
    assert display_name(os.fsdecode(b"caf\xe9")) == "caf\\xe9"  # the results of earlier runs keep their names


def test_distinct_names_that_show_alike_are_one_student_and_refused(tmp_path):
    """The only names that show alike are an escape's spelling and the character itself: they name one student
    (one result file), so grade-all refuses them, and the refusal tells the two files apart."""
    (tmp_path / "a\x1b.py").write_text("")
    (tmp_path / "a\\x1b.py").write_text("")
    entries = discover(tmp_path, ASSIGNMENT)
    assert [e.student for e in entries] == ["a\\x1b", "a\\x1b"]
    with pytest.raises(DuplicateSubmissions) as info:
        choose(entries)
    [line] = info.value.lines
    assert not CONTROL.search(line)
    assert "'a\\x1b.py'" in line and "'a\\\\x1b.py'" in line  # as bytes: distinct


def test_names_of_the_hostile_class_stay_distinct():
    names = list(HOSTILE) + ["red.py", "new line.py", "caf.py", "=HYPERLINK.py", "'=HYPERLINK(\"http:x\",\"y\").py"]
    cells = [csv_cell(shown(n)) for n in names]
    assert len(set(cells)) == len(names)


@pytest.mark.parametrize("start", [*FORMULA_STARTS, "'"])
def test_csv_cells_that_a_spreadsheet_would_run_are_quoted_and_read_back(start):
    cell = csv_cell(f"{start}cmd|' /C calc'!A0")
    assert cell.startswith("'") and not cell.startswith(FORMULA_STARTS)
    assert name_of_csv_cell(cell) == f"{start}cmd|' /C calc'!A0"
    assert csv_cell("alice") == name_of_csv_cell("alice") == "alice"


def test_a_name_too_long_for_a_file_name_keeps_a_distinct_result_file(tmp_path):
    long_a, long_b = "\\x1b" * 80 + "a", "\\x1b" * 80 + "b"  # what 80 escape characters show as
    paths = {result_path(tmp_path, long_a), result_path(tmp_path, long_b)}
    assert len(paths) == 2 and all(len(os.fsencode(p.name)) <= 255 for p in paths)
    assert result_path(tmp_path, "alice") == tmp_path / "alice.json"


# --- every writer, fed a hand-built result ------------------------------------------------------------------

def hostile_result(file_name: str) -> GradeResult:
    return GradeResult(submission=display_name(file_name), sha256="0" * 64, assignment="demo", parts=[],
                       max_score=0.0)


@pytest.mark.parametrize("file_name", list(HOSTILE), ids=list(HOSTILE.values()))
def test_writers_show_a_hostile_name_as_text(file_name):
    student, result = shown(file_name), hostile_result(file_name)
    assert gradescope(result)["extra_data"]["submission"] == display_name(file_name)
    xml = junit.document("demo", [junit.testsuite(student, result)])
    assert not CONTROL.search(xml.replace("\n", "")) and not NOT_XML.search(xml)
    [suite] = ET.fromstring(xml.encode("utf-8"))
    assert suite.get("name") == student
    page, index = html_report.student_page(result), html_report.class_index("demo", [(student, result)])
    for text in (page, index):
        assert not CONTROL.search(text.replace("\n", ""))
        assert "<i>" not in text and '"http:x"' not in text
    assert html.escape(student, quote=True) in index and html.escape(display_name(file_name)) in page


# --- grade-all on a class of hostile names -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    folder, out, site = root / "class", root / "out", root / "site"
    folder.mkdir()
    source = reference_source()
    for index, name in enumerate(HOSTILE):
        # the formula one is graded in full; the others are refused at once (empty), which still writes every row
        (folder / name).write_text(source if index == 0 else "")
    done = run_cli("grade-all", folder, "-o", out, "--junit", root / "class.xml", "--html", site)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, out, site, done


def test_grades_csv_cells_never_start_a_formula(hostile_class):
    root, out, _, _ = hostile_class
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"), newline="")))
    assert len(rows) == 1 + len(HOSTILE)
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), row
            assert not CONTROL.search(cell), row
    students = {row[0]: row for row in rows[1:]}
    assert set(students) == {csv_cell(shown(n)) for n in HOSTILE}
    assert students["'=HYPERLINK(\"http:x\",\"y\")"][1] == "100"
    for cell in students:  # each row leads back to its result
        assert result_path(out, name_of_csv_cell(cell)).is_file()


def test_nothing_printed_holds_a_control_character(hostile_class):
    _, _, _, done = hostile_class
    assert "\x1b" not in done.stdout + done.stderr
    for stream in (done.stdout, done.stderr):
        assert not CONTROL.search(stream), [line for line in stream.splitlines() if CONTROL.search(line)]
    assert "\\x1b[31mred\\x1b]0;title\\x07: 0 / 100" in done.stderr
    assert "new\\nline: 0 / 100" in done.stderr and "rtl<i>\\u202egnp: 0 / 100" in done.stderr
    assert "caf\\xff: 0 / 100" in done.stderr


def test_result_files_and_their_submission_field_are_clean(hostile_class):
    _, out, _, _ = hostile_class
    for name in HOSTILE:
        path = result_path(out, shown(name))
        assert not CONTROL.search(path.name)
        raw = path.read_bytes().decode("utf-8")  # UTF-8: no lone surrogate
        data = json.loads(raw)
        assert data["extra_data"]["submission"] == display_name(name)
        assert not CONTROL.search(data["extra_data"]["submission"]) and not CONTROL.search(data["output"])


def test_junit_parses_and_holds_no_control_character(hostile_class):
    root, _, _, _ = hostile_class
    text = (root / "class.xml").read_bytes().decode("utf-8")
    assert not NOT_XML.search(text) and not CONTROL.search(text.replace("\n", "").replace("\t", ""))
    suites = ET.fromstring(text.encode("utf-8"))
    assert sorted(s.get("name") for s in suites) == sorted(shown(n) for n in HOSTILE)
    submissions = {p.get("value") for s in suites for p in s.iter("property") if p.get("name") == "submission"}
    assert submissions == {display_name(n) for n in HOSTILE}


def test_html_pages_escape_names(hostile_class):
    _, _, site, _ = hostile_class
    index = (site / "index.html").read_text(encoding="utf-8")
    pages = sorted((site / html_report.STUDENTS).iterdir())
    assert len(pages) == len(HOSTILE)
    for text in [index, *(p.read_text(encoding="utf-8") for p in pages)]:
        assert not CONTROL.search(text.replace("\n", ""))
        assert "<i>" not in text and '"http:x"' not in text
    for name in HOSTILE:
        assert html.escape(shown(name), quote=True) in index
    assert "=HYPERLINK(&quot;http:x&quot;,&quot;y&quot;)" in index and "rtl&lt;i&gt;\\u202egnp" in index


# --- two submissions of one student --------------------------------------------------------------------------

def duplicate_class(folder: Path) -> None:
    folder.mkdir()
    source = reference_source()
    (folder / "alice.py").write_text(source)
    (folder / "alice.ipynb").write_text("alice's notebook is not a notebook")  # unreadable: 0 points
    (folder / "bob.py").write_text("")
    os.utime(folder / "alice.py", (1_000_000_000, 1_000_000_000))  # the script is older


def test_two_submissions_of_one_student_are_refused_before_grading(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "out"
    duplicate_class(folder)
    done = run_cli("grade-all", folder, "-o", out, "--html", tmp_path / "site")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "student alice" in line and "alice.ipynb" in line and "alice.py" in line and "--duplicates" in line
    assert done.stdout == "" and not out.exists() and not (tmp_path / "site").exists()  # nothing graded


@pytest.mark.parametrize("rule,graded,score", [("py", "alice.py", "100"), ("ipynb", "alice.ipynb", "0"),
                                               ("newest", "alice.ipynb", "0")])
def test_the_duplicates_flag_grades_the_one_its_rule_picks(tmp_path, rule, graded, score):
    folder, out = tmp_path / "class", tmp_path / "out"
    duplicate_class(folder)
    done = run_cli("grade-all", folder, "-o", out, "--duplicates", rule)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"alice: 2 submissions (alice.ipynb, alice.py): graded {graded} (--duplicates {rule})" in done.stderr
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    assert [row[:2] for row in rows[1:]] == [["alice", score], ["bob", "0"]]
    assert json.loads((out / "alice.json").read_text())["extra_data"]["submission"] == graded


def test_names_that_differ_only_in_case_or_normalisation_are_one_student(tmp_path):
    names = ["Carol.py", "carol.ipynb", unicodedata.normalize("NFC", "José.py"),
             unicodedata.normalize("NFD", "José.ipynb"), "dave.py"]
    entries = [Entry(display_name(Path(n).stem), tmp_path / n, tmp_path) for n in names]
    with pytest.raises(DuplicateSubmissions) as info:
        choose(entries)
    assert len(info.value.lines) == 2
    assert "Carol.py" in info.value.lines[0] and "carol.ipynb" in info.value.lines[0]
    kept = choose(entries, "py", log=lambda line: None)
    assert [e.path.name for e in kept] == ["Carol.py", names[2], "dave.py"]


def test_a_student_folder_and_a_file_of_the_same_name_are_one_student(tmp_path):
    (tmp_path / "erin.ipynb").write_text("")
    (tmp_path / "erin" / ASSIGNMENT).mkdir(parents=True)
    (tmp_path / "erin" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text("")
    with pytest.raises(DuplicateSubmissions) as info:
        choose(discover(tmp_path, ASSIGNMENT))
    [line] = info.value.lines
    assert "erin.ipynb" in line and f"erin/{ASSIGNMENT}/{ASSIGNMENT}.ipynb" in line
