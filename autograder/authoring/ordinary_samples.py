"""An ordinary nbgrader assignment, as instructors write them, and a class of submissions to it: what the demo
and the tests grade beside the kit's own assignments, with and without the kit.

`ps1` has two answers in solution cells (`squares(n)`, and `mean_of(path)`, which reads a data file of the
assignment folder), locked test cells with visible asserts and hidden tests, a test cell that gives partial
credit (its last expression is the points earned), and a written answer graded by hand.  The class holds the
ways students hand it in: correct, wrong, raising, printing a lot, looping forever, a test cell deleted, a cell's
type changed, and one that tries to read the gradebook, another student's notebook and the instructor's source.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

ASSIGNMENT = "ps1"
DATA_FILE = "numbers.txt"
DATA = "3\n4\n5\n"  # mean 4.0

INTRO = "# Problem set 1\n\nTwo small functions, graded by the test cells below them."
SQUARES = '''def squares(n):
    """The squares of 1..n, in order."""
    ### BEGIN SOLUTION
    return [i * i for i in range(1, n + 1)]
    ### END SOLUTION'''
SQUARES_TESTS = '''assert squares(1) == [1]
assert squares(3) == [1, 4, 9]
### BEGIN HIDDEN TESTS
assert squares(10) == [i * i for i in range(1, 11)]
assert squares(0) == []
### END HIDDEN TESTS'''
MEAN = f'''def mean_of(path):
    """The mean of the numbers in the file at `path`, one per line."""
    ### BEGIN SOLUTION
    values = [float(line) for line in open(path) if line.strip()]
    return sum(values) / len(values)
    ### END SOLUTION'''
MEAN_TESTS = f'''assert mean_of("{DATA_FILE}") == 4.0'''
PARTIAL_TESTS = '''# one point for each size squares gets right: nbgrader takes the last expression as the points earned
earned = 0.0
for n in (2, 5):
    try:
        earned += float(squares(n) == [i * i for i in range(1, n + 1)])
    except Exception:
        pass
earned'''
WRITTEN = "Why does `squares(0)` return an empty list?\n\nYOUR ANSWER HERE"


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
          points: float | None = None) -> dict[str, Any]:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def source_notebook() -> dict[str, Any]:
    """source/ps1/ps1.ipynb: what the instructor writes."""
    def code(text: str, meta: dict) -> dict:
        return {"cell_type": "code", "execution_count": None, "metadata": meta, "outputs": [], "source": text}

    def markdown(text: str, meta: dict) -> dict:
        return {"cell_type": "markdown", "metadata": meta, "source": text}

    cells = [
        markdown(INTRO, {}),
        code(SQUARES, _meta("squares", solution=True)),
        code(SQUARES_TESTS, _meta("squares_tests", grade=True, locked=True, points=2)),
        code(MEAN, _meta("mean", solution=True)),
        code(MEAN_TESTS, _meta("mean_tests", grade=True, locked=True, points=1)),
        code(PARTIAL_TESTS, _meta("partial_tests", grade=True, locked=True, points=2)),
        markdown("Why does `squares(0)` return an empty list?\n\n"
                 "Because range(1, 1) is empty.", _meta("why_empty", grade=True, solution=True, points=1)),
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def write_source(course_root: Path) -> Path:
    """The assignment's source folder: the notebook and its data file."""
    folder = course_root / "source" / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DATA_FILE).write_text(DATA, encoding="utf-8")
    path = folder / f"{ASSIGNMENT}.ipynb"
    path.write_text(json.dumps(source_notebook(), indent=1), encoding="utf-8")
    return path


# --- the class ----------------------------------------------------------------------------------------------

def _answer(nb: dict, grade_id: str, text: str) -> None:
    next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)["source"] = text


def _correct(nb: dict) -> None:
    _answer(nb, "squares", "def squares(n):\n    return [i * i for i in range(1, n + 1)]")
    _answer(nb, "mean", "def mean_of(path):\n    values = [float(x) for x in open(path).read().split()]\n"
                        "    return sum(values) / len(values)")
    _answer(nb, "why_empty", "range(1, 1) holds no number.")


def _wrong(nb: dict) -> None:
    _correct(nb)
    _answer(nb, "squares", "def squares(n):\n    return [i * i for i in range(n)]")  # off by one


def _printing(nb: dict) -> None:
    _correct(nb)
    _answer(nb, "squares", "for i in range(20000):\n    print('line', i)\n\n"
                           "def squares(n):\n    return [i * i for i in range(1, n + 1)]")


def _looping(nb: dict) -> None:
    _correct(nb)
    _answer(nb, "mean", "while True:\n    pass")


def _deleted_test(nb: dict) -> None:
    _wrong(nb)
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != "squares_tests"]


def _changed_type(nb: dict) -> None:
    _wrong(nb)
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "squares_tests")
    cell.update(cell_type="markdown")
    cell.pop("outputs", None)
    cell.pop("execution_count", None)


# what the hostile student tries, each in a try: printing whatever it reaches
PRYING = '''import glob, os
reached = []
for pattern in ("../../../gradebook.db", "../../../source/ps1/ps1.ipynb", "../../*/ps1/ps1.ipynb",
                "{course}/gradebook.db", "{course}/source/ps1/ps1.ipynb", "{course}/submitted/*/ps1/ps1.ipynb"):
    for path in glob.glob(pattern):
        try:
            reached.append(path + ": " + open(path, "rb").read(4000).decode("utf-8", "replace"))
        except OSError as exc:
            pass
try:
    open("{course}/planted.txt", "w").write("written by a student")
    reached.append("wrote planted.txt")
except OSError:
    pass
print("REACHED", len(reached))
for text in reached:
    print(text)
'''


def hostile(course_root: Path) -> Callable[[dict], None]:
    def pry(nb: dict) -> None:
        _correct(nb)
        cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                "source": PRYING.replace("{course}", str(course_root))}
        nb["cells"].insert(2, cell)
    return pry


def class_work(course_root: Path) -> dict[str, tuple[str, Callable[[dict], None]]]:
    """student -> (what they handed in, how the release became it)."""
    return {
        "alice": ("correct", _correct),
        "bob": ("wrong: squares is off by one", _wrong),
        "carol": ("the release untouched: raises NotImplementedError", lambda nb: None),
        "dave": ("correct, printing 20,000 lines", _printing),
        "erin": ("squares right, mean_of's cell loops forever", _looping),
        "frank": ("wrong, and the squares test cell deleted", _deleted_test),
        "grace": ("wrong, and the squares test cell made markdown", _changed_type),
        "mallory": ("correct, and tries to read the gradebook, the source and classmates' notebooks",
                    hostile(course_root)),
    }


def write_submissions(course_root: Path, release: Path) -> dict[str, str]:
    """submitted/<student>/ps1/ps1.ipynb (and the data file) for each student of class_work, made from the
    release notebook; returns student -> what they handed in."""
    released = json.loads(release.read_text(encoding="utf-8"))
    work = class_work(course_root)
    for student, (_, change) in work.items():
        nb = copy.deepcopy(released)
        change(nb)
        folder = course_root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
        (folder / DATA_FILE).write_text(DATA, encoding="utf-8")
    return {student: what for student, (what, _) in work.items()}
