"""Grading time per submission, the kit against nbgrader's own kernel execution, on the same notebooks in
one run.  Prints medians and ratios; asserts nothing (timings belong here, not in tests).

    python -m autograder.benchmark [N]     (default N = 10 notebooks)
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.demo import ASSIGNMENT, Course
from autograder.samples import UNBIASED_VARIANCE, student_notebook, write_notebook

PLAIN_NBGRADER_CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "benchmark"
"""


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _submit_directly(course: Course, student: str, notebook: Path) -> None:
    target = course.root / "submitted" / student / ASSIGNMENT
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, target / f"{ASSIGNMENT}.ipynb")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    count = int(argv[0]) if argv else 10
    work = Path(tempfile.mkdtemp(prefix="autograder-benchmark-"))
    notebooks = [write_notebook(student_notebook([UNBIASED_VARIANCE] if i % 2 else []), work / f"s{i:02d}.ipynb")
                 for i in range(count)]
    students = [p.stem for p in notebooks]

    kit_course = Course(work / "kit")
    plain_course = Course(work / "plain", config_dir=work / "plain")
    for course in (kit_course, plain_course):
        course.create()
        if course is plain_course:
            (course.root / "nbgrader_config.py").write_text(PLAIN_NBGRADER_CONFIG.format(root=str(course.root)))
        course.nbgrader("generate_assignment", ASSIGNMENT, "--force")
        for student, notebook in zip(students, notebooks):
            course.nbgrader("db", "student", "add", student)
            _submit_directly(course, student, notebook)

    timings: dict[str, list[float]] = {"kit CLI (python -m autograder grade)": [],
                                       "kit through nbgrader autograde": [],
                                       "nbgrader autograde, default kernel execution": []}
    names = list(timings)
    for student, notebook in zip(students, notebooks):
        out = work / f"{student}.json"
        timings[names[0]].append(_timed(lambda: subprocess.run(
            [sys.executable, "-m", "autograder", "grade", str(notebook), "-o", str(out)], check=True,
            capture_output=True)))
        timings[names[1]].append(_timed(lambda: kit_course.nbgrader(
            "autograde", ASSIGNMENT, f"--student={student}", "--force")))
        timings[names[2]].append(_timed(lambda: plain_course.nbgrader(
            "autograde", ASSIGNMENT, f"--student={student}", "--force")))

    baseline = statistics.median(timings[names[2]])
    print(f"{count} notebooks, median seconds per submission (each a separate command, as course CI runs them)")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:<48} {median:6.2f} s   x{median / baseline:4.2f} of nbgrader's default")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
