"""Result formats for other platforms: JUnit XML, PrairieLearn's results.json and GitHub Classroom's base64
result.  The real command line writes them all at once, and each agrees with results.json on the total and
on every part; no text from a submission breaks a format; grade-all writes one JUnit file for the class, from
fresh and reused results alike; a bad output path stops the run with exit 2 before anything is graded."""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import junitparser
import pytest

from autograder.authoring.samples import student_notebook, write_notebook
from autograder.grading.rubric import Part, PartScore, load_rubric
from autograder.grading.rubric import TestScore as CheckScore  # not a test class
from autograder.reports import formats, github_classroom, junit, prairielearn
from autograder.grading.result import GradeResult
from conftest import ASSIGNMENT, REPO, UNBIASED_VARIANCE, run_cli

CLOSE = 1e-3  # results.json rounds each test's score to 4 decimals
BASE64_LINE = re.compile(r"[A-Za-z0-9+/]+={0,2}\n")
# what XML 1.0 cannot hold; ET.fromstring refuses most of it, and this catches the rest
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
HOSTILE = ("nul\x00 bell\x07 \x1b[31mred\x1b[0m lone\ud800 byte\udcff <tag attr=\"x\">&amp; ]]> "
           "\ufffe\uffff bidi\u202e cr\r\nend")


# --- one correct and one one-bug submission, graded once through the real command line, every flag at once ---

@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("formats")
    graded = {}
    for name, mutations in {"correct": [], "one_bug": [UNBIASED_VARIANCE]}.items():
        notebook = write_notebook(student_notebook(ASSIGNMENT, mutations), folder / f"{name}.ipynb")
        files = {"results": folder / f"{name}.results.json", "junit": folder / f"{name}.xml",
                 "prairielearn": folder / f"{name}.pl.json", "github_classroom": folder / f"{name}.b64"}
        done = run_cli("grade", notebook, "-o", files["results"], "--junit", files["junit"],
                       "--prairielearn", files["prairielearn"], "--github-classroom", files["github_classroom"])
        assert done.returncode == 0, done.stderr[-3000:]
        graded[name] = files
    return graded


@pytest.fixture(params=["correct", "one_bug"])
def student(request, graded) -> tuple[dict, dict[str, Path]]:
    files = graded[request.param]
    return json.loads(files["results"].read_text()), files


def expected_parts(results: dict) -> dict[str, float]:
    return {name: part["score"] for name, part in results["extra_data"]["parts"].items()}


def assert_close(got: dict[str, float], expected: dict[str, float]) -> None:
    assert got.keys() == expected.keys()
    for name in expected:
        assert abs(got[name] - expected[name]) <= CLOSE, (name, got[name], expected[name])


def junit_checks(path: Path) -> list[tuple[str, junitparser.TestCase, dict[str, float]]]:
    """(suite name, testcase, its numeric properties) of every testcase, parsed the way CI servers do."""
    checks = []
    for suite in junitparser.JUnitXml.fromfile(str(path)):
        for case in suite:
            properties = {p.name: float(p.value) for p in case.child(junitparser.Properties)}
            checks.append((suite.name, case, properties))
    return checks


def junit_totals(checks) -> tuple[dict[str, float], dict[str, float]]:
    points, maxima = defaultdict(float), defaultdict(float)
    for _, case, properties in checks:
        points[case.classname] += properties["points"]
        maxima[case.classname] += properties["max_points"]
    return dict(points), dict(maxima)


def test_junit_agrees_with_results_json(student):
    results, files = student
    checks = junit_checks(files["junit"])
    points, maxima = junit_totals(checks)
    assert_close(points, expected_parts(results))
    assert_close(maxima, {n: p["max_score"] for n, p in results["extra_data"]["parts"].items()})
    assert abs(sum(points.values()) - results["score"]) <= CLOSE
    by_name = {t["name"]: t for t in results["tests"]}
    assert sorted(f"{case.classname}: {case.name}" for _, case, _ in checks) == sorted(by_name)
    for _, case, _ in checks:
        stored = by_name[f"{case.classname}: {case.name}"]
        assert case.is_passed == (stored["status"] == "passed")
        if not case.is_passed:
            [failure] = case.result
            assert failure.text == stored["output"] and failure.message  # what students are told
    suite = next(iter(junitparser.JUnitXml.fromfile(str(files["junit"]))))
    properties = {p.name: p.value for p in suite.properties()}
    assert float(properties["score"]) == results["score"] and float(properties["max_score"]) == 100


def test_prairielearn_agrees_with_results_json(student):
    results, files = student
    data = json.loads(files["prairielearn"].read_text())
    assert data["gradable"] is True and 0 <= data["score"] <= 1
    assert abs(data["score"] - results["score"] / results["max_score"]) <= CLOSE / 100
    points = defaultdict(float)
    for test in data["tests"]:
        points[test["name"].split(": ", 1)[0]] += test["points"]
    assert_close(dict(points), expected_parts(results))
    assert abs(sum(t["max_points"] for t in data["tests"]) - results["max_score"]) <= CLOSE
    assert len(data["tests"]) == len(results["tests"])
    failed = {t["name"] for t in data["tests"] if t["points"] < t["max_points"]}
    assert failed == {t["name"] for t in results["tests"] if t["status"] == "failed"}
    assert all(t["message"] for t in data["tests"] if t["name"] in failed)


def test_github_classroom_agrees_with_results_json(student, tmp_path):
    results, files = student
    content = files["github_classroom"].read_text()
    assert BASE64_LINE.fullmatch(content), content[:200]
    # the workflow's step: its output line is exactly what the reporter decodes
    github_output = tmp_path / "github_output"
    subprocess.run(["bash", "-c", f'echo "result=$(cat {files["github_classroom"]})" >> "{github_output}"'],
                   check=True)
    [line] = github_output.read_text().splitlines()
    data = json.loads(base64.b64decode(line.removeprefix("result="), validate=True).decode("utf-8"))
    assert data["version"] == 1 and data["max_score"] == results["max_score"]
    rubric = load_rubric(ASSIGNMENT)
    assert len(data["tests"]) == len(rubric.parts)  # one per part, in the rubric's order
    assert_close({p.name: t["score"] for p, t in zip(rubric.parts, data["tests"])}, expected_parts(results))
    assert abs(sum(t["score"] for t in data["tests"]) - results["score"]) <= CLOSE  # what Classroom records
    full = results["score"] == results["max_score"]
    assert data["status"] == ("pass" if full else "fail")
    for part, test in zip(rubric.parts, data["tests"]):
        earned = results["extra_data"]["parts"][part.name]["score"]
        assert test["name"].startswith(part.title) and test["line_no"] == 0
        assert test["status"] == ("pass" if earned == part.points else "fail")


def test_the_one_bug_loses_points_in_every_format(graded):
    """The agreement tests above would pass for two identical results: these are not."""
    bug = json.loads(graded["one_bug"]["results"].read_text())
    assert bug["extra_data"]["parts"]["layer_norm"]["score"] < 20 and bug["score"] < 100
    points, _ = junit_totals(junit_checks(graded["one_bug"]["junit"]))
    assert points["layer_norm"] < 20
    assert json.loads(graded["one_bug"]["prairielearn"].read_text())["score"] < 1
    data = json.loads(base64.b64decode(graded["one_bug"]["github_classroom"].read_text()))
    assert data["status"] == "fail" and data["tests"][0]["status"] == "fail" and data["tests"][0]["score"] < 20


# --- each writer on a hand-built result ------------------------------------------------------------------

FIRST = Part("first", "First <part> & co", 3.0, "test_first.py")
SECOND = Part("second", "Second", 2.0, "test_second.py", forbidden_ops=("*layer_norm*",))  # what it asks to build


def hand_built(*, forbidden: tuple[str, ...] = ("layer_norm",)) -> GradeResult:
    """First part: one check passed, one failed with a hostile message; second part: its check passed but the
    part used torch's own implementation, so it earned nothing."""
    first = PartScore(FIRST, 2.0, [CheckScore("first", "test_ok", 2.0, 2.0, True, ""),
                                   CheckScore("first", f"test_hostile[{HOSTILE}]", 0.0, 1.0, False, HOSTILE)], ())
    second = PartScore(SECOND, 0.0 if forbidden else 2.0,
                       [CheckScore("second", "test_used", 0.0 if forbidden else 2.0, 2.0, True, "")], forbidden)
    return GradeResult(submission=f"stu\udce9dent{HOSTILE}.ipynb", sha256="0" * 64, assignment="demo",
                       parts=[first, second], max_score=5.0)


def unreadable(reason: str) -> GradeResult:
    result = hand_built(forbidden=())
    result.unreadable = reason
    for part in result.parts:
        part.score = 0.0
        part.tests = [CheckScore(t.part, t.name, 0.0, t.max_score, False, f"could not be judged: {reason}")
                      for t in part.tests]
    return result


def full_marks() -> GradeResult:
    result = hand_built(forbidden=())
    result.parts[0].score = 3.0
    result.parts[0].tests[1] = CheckScore("first", "test_fixed", 1.0, 1.0, True, "")
    return result


def assert_clean_text(text: str) -> None:
    assert not NOT_XML.search(text) and not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e\ud800-\udfff]", text)


def test_junit_survives_hostile_text(tmp_path):
    path = tmp_path / "junit.xml"
    junit.write(hand_built(), path)
    text = path.read_bytes().decode("utf-8")  # UTF-8 throughout: no lone surrogate reached the file
    assert_clean_text(text)
    ET.fromstring(text.encode("utf-8"))  # well-formed
    checks = junit_checks(path)
    [suite_name] = {suite for suite, _, _ in checks}
    assert suite_name.startswith("stu\\xe9dent")  # the file name's byte, escaped
    assert "\\x1b[31mred" in suite_name and "bidi\\u202e" in suite_name  # its controls too: visibly
    cases = {case.name: (case, properties) for _, case, properties in checks}
    hostile, properties = next(v for k, v in cases.items() if k.startswith("test_hostile"))
    [failure] = hostile.result
    assert '<tag attr="x">&amp; ]]>' in failure.text and failure.type == "failed"  # text, not markup
    assert "\n" not in failure.message and properties == {"points": 0.0, "max_points": 1.0}
    used, properties = cases["test_used"]
    [failure] = used.result
    assert failure.type == "forbidden" and "torch's own implementation was used (layer_norm)" in failure.text
    assert properties == {"points": 0.0, "max_points": 2.0}
    assert cases["test_ok"][0].is_passed and cases["test_ok"][1] == {"points": 2.0, "max_points": 2.0}
    assert os.listdir(tmp_path) == ["junit.xml"]  # written atomically: no temporary file left behind


def test_junit_lists_every_check_of_an_unreadable_submission_failed_with_the_reason(tmp_path):
    path = tmp_path / "junit.xml"
    junit.write(unreadable(f"not a notebook {HOSTILE}"), path)
    assert_clean_text(path.read_bytes().decode("utf-8"))
    checks = junit_checks(path)
    assert [case.classname for _, case, _ in checks] == ["first", "first", "second"]
    for _, case, properties in checks:
        [failure] = case.result
        assert failure.type == "not graded" and failure.message.startswith("not graded: not a notebook nul\ufffd")
        assert "could not be judged: not a notebook" in failure.text and properties["points"] == 0


def test_prairielearn_score_is_a_fraction_and_text_is_clean(tmp_path):
    path = tmp_path / "results.json"
    prairielearn.write(hand_built(), path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["gradable"] is True and data["score"] == pytest.approx(2 / 5)
    assert [t["points"] for t in data["tests"]] == [2.0, 0.0, 0.0]
    assert [t["max_points"] for t in data["tests"]] == [2.0, 1.0, 2.0]
    assert data["tests"][0]["message"] == "" and "torch's own implementation" in data["tests"][2]["message"]
    assert '<tag attr="x">&amp; ]]>' in data["tests"][1]["message"]
    for text in [data["output"], *(t["message"] + t["name"] for t in data["tests"])]:
        assert_clean_text(text)
    assert prairielearn.results(full_marks())["score"] == 1.0
    empty = GradeResult("s.ipynb", "", "demo", [], max_score=0.0)  # a rubric worth nothing: 0, not a crash
    assert prairielearn.results(empty)["score"] == 0.0


def test_prairielearn_marks_an_unreadable_submission_not_gradable():
    data = prairielearn.results(unreadable("not a notebook"))
    assert data["gradable"] is False and "score" not in data and "tests" not in data
    assert data["message"] == "Not graded: not a notebook" and data["format_errors"] == ["not a notebook"]


def test_prairielearn_stays_under_its_size_limit():
    long = "\U0001f600\u00e9" * 30_000  # characters JSON escapes as 6 or 12 bytes
    many = PartScore(FIRST, 0.0, [CheckScore("first", f"t{i}", 0.0, 0.01, False, long) for i in range(300)], ())
    size = len(json.dumps(prairielearn.results(GradeResult("s", "", "demo", [many], 3.0)), indent=1))
    assert size < 1_000_000


def decoded(result: GradeResult) -> dict:
    encoded = github_classroom.encode(result)
    assert BASE64_LINE.fullmatch(encoded + "\n")
    return json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))


def test_github_classroom_one_test_per_part_with_partial_credit(tmp_path):
    path = tmp_path / "result.b64"
    github_classroom.write(hand_built(), path)
    assert BASE64_LINE.fullmatch(path.read_text())
    data = json.loads(base64.b64decode(path.read_text()).decode("utf-8"))
    assert data["status"] == "fail" and data["max_score"] == 5.0
    assert [(t["score"], t["max_score"], t["status"]) for t in data["tests"]] == [(2.0, 3.0, "fail"),
                                                                                  (0.0, 2.0, "fail")]
    first, second = data["tests"]
    assert first["name"] == "First <part> & co: 2 / 3 points" and "1 of 2 checks failed" in first["message"]
    assert "torch's own implementation was used (layer_norm)" in second["message"]
    for text in [data["message"], *(t["message"] + t["name"] for t in data["tests"])]:
        assert_clean_text(text)
    passed = decoded(full_marks())
    assert passed["status"] == "pass" and [t["status"] for t in passed["tests"]] == ["pass", "pass"]
    assert sum(t["score"] for t in passed["tests"]) == passed["max_score"] == 5.0


def test_github_classroom_reports_an_unreadable_submission_as_an_error():
    data = decoded(unreadable("not a notebook"))
    assert data["status"] == "error" and sum(t["score"] for t in data["tests"]) == 0
    assert all(t["status"] == "error" and t["message"] == "Not graded: not a notebook" for t in data["tests"])


def test_github_classroom_fits_in_one_environment_variable():
    long = "\U0001f600" * 50_000  # 4 bytes each in UTF-8
    parts = [PartScore(Part(f"p{i}", long, 1.0, "t.py"), 0.0,
                       [CheckScore(f"p{i}", f"t{j}{long}", 0.0, 0.1, False, long) for j in range(10)], ())
             for i in range(20)]
    encoded = github_classroom.encode(GradeResult(long, "", "demo", parts, 20.0, unreadable=""))
    assert len("GRADE_RESULTS=" + encoded) < 128 * 1024  # Linux's limit on one environment string


# --- grade-all: one JUnit file for the class, from fresh and reused results ---------------------------------

def test_grade_all_junit_has_one_testsuite_per_submission_fresh_or_reused(tmp_path):
    folder, out, xml = tmp_path / "class", tmp_path / "out", tmp_path / "class.xml"
    folder.mkdir()
    (folder / "ann.ipynb").write_text("ann handed in no notebook")  # unreadable: graded at once
    # a JUnit file may go in the -o folder that grade-all creates
    assert run_cli("grade-all", folder, "-o", out, "--junit", out / "first.xml").returncode == 0
    assert [suite.name for suite in junitparser.JUnitXml.fromfile(str(out / "first.xml"))] == ["ann"]
    (folder / os.fsdecode(b"b\xe9n.ipynb")).write_bytes(b"not a notebook either")
    done = run_cli("grade-all", folder, "-o", out, "--junit", xml)
    assert done.returncode == 0, done.stderr
    assert "ann: already graded, kept" in done.stderr  # ann's suite comes from the earlier run's result
    suites = {suite.name: suite for suite in junitparser.JUnitXml.fromfile(str(xml))}
    assert sorted(suites) == ["ann", "b\\xe9n"]
    for student, suite in suites.items():
        stored = json.loads((out / f"{student}.json").read_text())
        cases = list(suite)
        assert len(cases) == len(stored["tests"]) == suite.tests == suite.failures
        reason = stored["extra_data"]["unreadable"]
        assert reason and all(case.result[0].message == f"not graded: {reason}" for case in cases)
        points, maxima = junit_totals([(student, case, {p.name: float(p.value) for p in
                                                         case.child(junitparser.Properties)}) for case in cases])
        assert_close(points, expected_parts(stored))
        assert abs(sum(maxima.values()) - stored["max_score"]) <= CLOSE


# --- bad output paths: exit 2 with one line, before anything is graded ---------------------------------------

@pytest.mark.parametrize("flag", [fmt.flag for fmt in formats.FORMATS])
def test_an_output_file_in_a_missing_folder_is_a_usage_error(tmp_path, flag):
    submission = tmp_path / "s.ipynb"
    submission.write_text("not a notebook")
    target = tmp_path / "missing" / "out.file"
    done = run_cli("grade", submission, "-o", tmp_path / "r.json", flag, target)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"argument {flag}: {target}: folder {target.parent} does not exist" in line
    assert not (tmp_path / "r.json").exists()  # nothing was graded


def test_an_output_file_that_is_a_folder_is_a_usage_error(tmp_path):
    done = run_cli("grade", tmp_path / "s.ipynb", "-o", tmp_path / "r.json", "--prairielearn", tmp_path)
    assert done.returncode == 2 and f"{tmp_path}: is a folder, not a file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_grade_all_junit_in_a_missing_folder_is_a_usage_error(tmp_path):
    (tmp_path / "class").mkdir()
    done = run_cli("grade-all", tmp_path / "class", "-o", tmp_path / "out", "--junit", tmp_path / "no" / "c.xml")
    assert done.returncode == 2 and "--junit" in done.stderr and "does not exist" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_two_outputs_to_the_same_file_is_a_usage_error(tmp_path):
    submission = tmp_path / "s.ipynb"
    submission.write_text("not a notebook")
    done = run_cli("grade", submission, "-o", tmp_path / "r.json", "--prairielearn", tmp_path / "r.json")
    assert done.returncode == 2 and "given to both -o and --prairielearn" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.json").exists()


def test_every_flag_is_in_help_and_in_the_readme():
    # the flags' reference is the instructors' page now (the README points to it)
    grade, grade_all = run_cli("grade", "--help").stdout, run_cli("grade-all", "--help").stdout
    reference = (REPO / "docs" / "instructors.md").read_text()
    for fmt in formats.FORMATS:
        assert fmt.flag in grade and (fmt.flag in grade_all) == fmt.batch and f"`{fmt.flag}" in reference


def test_every_writer_shows_a_checks_hints_after_its_message(tmp_path):
    """Hints are a list beside the message: each text format shows them as the one renderer writes them
    (TestScore.shown_text), results.json's output and nbgrader's cells as `  Hint: ...` lines after the
    message, JUnit, PrairieLearn and GitHub Classroom the same text."""
    from autograder.grading.results_json import gradescope
    from autograder.nbgrader.plugin import _part_feedback

    result = hand_built(forbidden=())
    failed = CheckScore("first", "test_hinted", 0.0, 1.0, False, "off by 0.5", None,
                        ("the scale is 1/sqrt(d_k)", "not 1/d_k"))
    result.parts[0].tests.append(failed)
    assert failed.shown_text == "off by 0.5\n  Hint: the scale is 1/sqrt(d_k)\n  Hint: not 1/d_k"
    output = next(t["output"] for t in gradescope(result)["tests"] if t["name"] == "first: test_hinted")
    assert output == failed.shown_text
    junit.write(result, tmp_path / "junit.xml")
    [(case, _)] = [(c, p) for _, c, p in junit_checks(tmp_path / "junit.xml") if c.name == "test_hinted"]
    assert failed.shown_text in case.result[0].text
    pl = prairielearn.results(result)
    assert any(t["message"] == failed.shown_text for t in pl["tests"])
    classroom = decoded(result)["tests"][0]["message"]
    assert "off by 0.5   Hint: the scale is 1/sqrt(d_k)   Hint: not 1/d_k" in classroom
    assert f"[FAIL] test_hinted: {failed.shown_text}" in _part_feedback(result.parts[0], result)


def test_a_hint_is_named_once_per_part_and_wrapped_short():
    """One bug failing several checks of a part with the same advice: the text reports (nbgrader's cell, GitHub
    Classroom) give the hint with the first check and point up to it from the others; another part's same words
    are given again; a long hint is wrapped to lines of at most HINT_WIDTH characters."""
    from autograder.grading.rubric import HINT_WIDTH
    from autograder.nbgrader.plugin import _part_feedback

    result = hand_built(forbidden=())
    long_hint = "deal the targets round robin, " * 8
    for part in result.parts[:2]:
        part.tests += [CheckScore(part.part.name, f"test_same_{i}", 0.0, 1.0, False, f"off {i}", None,
                                  ("the scale is 1/sqrt(d_k)", long_hint.strip()) if i < 2 else ("other",))
                       for i in range(3)]
    for part in result.parts[:2]:
        shown = _part_feedback(part, result)
        assert shown.count("Hint: the scale is 1/sqrt(d_k)") == 1 and shown.count("Hint: deal the targets") == 1
        assert shown.count("Hint: the same as above, in this part") == 1 and shown.count("Hint: other") == 1
        assert all(len(line) <= HINT_WIDTH for line in shown.split("\n") if line.lstrip().startswith(("Hint", "deal")))
        assert shown.index("off 0") < shown.index("the scale") < shown.index("off 1") < shown.index("same as above")
    classroom = decoded(result)["tests"][0]["message"]
    assert classroom.count("the scale is 1/sqrt(d_k)") == 1 and classroom.count("the same as above") == 1
