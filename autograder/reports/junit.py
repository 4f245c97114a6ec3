"""JUnit XML, which CI servers (GitLab, Jenkins, GitHub's test reporters) show as test results.

One <testsuite> per submission, one <testcase> per hidden check: classname is the part, name the check.  A
check that did not earn its whole share has a <failure> carrying what students are told; its points and
maximum are <properties> of the testcase, the submission's score and maximum those of the testsuite.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

from autograder.protocol import one_line
from autograder.grading.results_json import MAX_LINE_CHARS, check_message, summary, write_text_atomic
from autograder.grading.result import GradeResult, display_name

# what XML 1.0 cannot hold even escaped; cleaned text has none of them, and this makes sure of it
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MAX_NAME_CHARS = 255


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _number(value: float) -> str:
    return str(round(float(value), 6))


def _properties(parent: ET.Element, values: dict[str, str]) -> None:
    properties = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=_xml(value))


def testsuite(name: str, result: GradeResult) -> ET.Element:
    """The <testsuite> of one submission, named `name` (a student, or the submitted file)."""
    tests = [(part, test) for part in result.parts for test in part.tests]
    failures = sum(not test.earned_all for _, test in tests)
    suite = ET.Element("testsuite", name=_xml(display_name(name, MAX_NAME_CHARS)), tests=str(len(tests)),
                       failures=str(failures), errors="0", skipped="0", time=f"{result.seconds:.3f}")
    _properties(suite, {"assignment": one_line(result.assignment, MAX_NAME_CHARS),
                        "submission": display_name(result.submission, MAX_NAME_CHARS),
                        "submission_sha256": result.sha256, "score": _number(result.score),
                        "max_score": _number(result.max_score)})
    for part, test in tests:
        case = ET.SubElement(suite, "testcase", classname=_xml(one_line(part.part.name, MAX_NAME_CHARS)),
                             name=_xml(one_line(test.name, MAX_NAME_CHARS)))
        _properties(case, {"points": _number(test.score), "max_points": _number(test.max_score)})
        if not test.earned_all:
            message = check_message(part, test)
            if result.unreadable:  # every check failed for the same reason: say it first
                headline, kind = f"not graded: {one_line(result.unreadable, MAX_LINE_CHARS)}", "not graded"
            else:
                headline = one_line(message.split("\n", 1)[0], MAX_LINE_CHARS)  # the whole text is the body
                kind = "forbidden" if part.forbidden else "failed"
            failure = ET.SubElement(case, "failure", message=_xml(headline), type=kind)
            failure.text = _xml(message)
    ET.SubElement(suite, "system-out").text = _xml(summary(result))
    return suite


def document(assignment: str, suites: list[ET.Element]) -> str:
    root = ET.Element("testsuites", name=_xml(one_line(assignment, MAX_NAME_CHARS)))
    for counter in ("tests", "failures", "errors", "skipped"):
        root.set(counter, str(sum(int(s.get(counter, "0")) for s in suites)))
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(result: GradeResult, path: Path) -> None:
    write_text_atomic(path, document(result.assignment, [testsuite(result.submission, result)]))


def write_batch(assignment: str, results: Iterable[tuple[str, GradeResult]], path: Path) -> None:
    write_text_atomic(path, document(assignment, [testsuite(student, result) for student, result in results]))
