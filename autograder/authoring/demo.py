"""The whole instructor flow with the real nbgrader CLI, on sample submissions, in a scratch course:

generate -> release -> (each student) fetch, fill in, submit -> collect -> autograde -> generate_feedback
-> export, ending in the grade table from nbgrader's SQLite gradebook.  Then the same in a course of an
instructor's own (course101): its own nbgrader_config.py with the kit's two lines, an ordinary nbgrader
assignment (ps1) and four parts of transformer_block added under the course's id (hw5), side by side.

    python -m autograder.authoring.demo [COURSE_DIR] [--assignment NAME ...]
        (default: build/demo-course/<name>, recreated, for every assignment)
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder import REPO_ROOT
from autograder.authoring.assignment import assignment_names
from autograder.authoring.samples import demo_class_work, write_demo_class
from autograder.grading.rubric import load_rubric

COURSE_ID = "transformer-blocks"


class Course:
    """A scratch nbgrader course for one assignment, driven through nbgrader's own command line, with the
    repo's config."""

    def __init__(self, root: Path, assignment: str, config_dir: Path = REPO_ROOT) -> None:
        self.root = root.resolve()
        self.assignment = assignment
        self.config_dir = config_dir  # where nbgrader runs, so the nbgrader_config.py it reads
        self.exchange = self.root / "exchange"
        self.autograde_log = ""  # what nbgrader autograde said last (a line per student, with its isolation)
        # nbgrader runs the `alembic` program by name: the environment's bin folder must be on PATH
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        self.env = {**os.environ, "PATH": path, "AUTOGRADER_COURSE_ROOT": str(self.root),
                    "AUTOGRADER_COURSE_ID": COURSE_ID, "NBGRADER_EXCHANGE": str(self.exchange),
                    "AUTOGRADER_DB_URL": f"sqlite:///{self.root / 'gradebook.db'}"}

    def nbgrader(self, *args: str, user: str | None = None, cwd: Path | None = None) -> str:
        env = self.env
        # nbgrader reads nbgrader_config.py from its working directory: the instructor's commands run from
        # the repository (the course's config); a student's run in their own folder, told only the exchange
        student = [f"--Exchange.root={self.exchange}", f"--CourseDirectory.course_id={COURSE_ID}"] if user else []
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args, *student], cwd=cwd or self.config_dir, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout + done.stderr

    def create(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.exchange.mkdir(parents=True)
        self.exchange.chmod(0o777)
        shutil.copytree(REPO_ROOT / "source" / self.assignment, self.root / "source" / self.assignment)

    def release(self) -> None:
        self.nbgrader("generate_assignment", self.assignment, "--force")
        self.nbgrader("release_assignment", self.assignment, "--force")

    def student_submits(self, student: str, notebook: Path) -> None:
        home = self.root / "students" / student
        home.mkdir(parents=True, exist_ok=True)
        self.nbgrader("fetch_assignment", self.assignment, user=student, cwd=home)
        shutil.copyfile(notebook, home / self.assignment / f"{self.assignment}.ipynb")
        # one OS account plays every student here, so the student id is given explicitly
        self.nbgrader("submit", self.assignment, f"--student={student}", user=student, cwd=home)

    def zip_collect(self, archive: Path) -> None:
        """Submissions downloaded from an LMS as one zip, instead of through the exchange."""
        folder = self.root / "downloaded" / self.assignment / "archive"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(archive, folder / archive.name)
        self.nbgrader("zip_collect", self.assignment, "--force")

    def add_students(self, students: list[str]) -> None:
        roster = self.root / "students.csv"  # one import, not one nbgrader start-up (seconds) per student
        with roster.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([["id"], *([s] for s in students)])
        self.nbgrader("db", "student", "import", str(roster))

    def grade(self, students: list[str], feedback: bool = True) -> Path:
        self.add_students(students)
        self.nbgrader("collect", self.assignment)
        self.autograde_log = self.nbgrader("autograde", self.assignment, "--force")
        if feedback:  # drawing the feedback pages is the slow part; grades do not need it
            self.nbgrader("generate_feedback", self.assignment, "--force")
        grades = self.root / "grades.csv"
        self.nbgrader("export", "--to", str(grades))
        return grades


def grade_table(grades_csv: Path, work: dict[str, str] | None = None) -> str:
    """nbgrader's exported grades, with what each student handed in when `work` says."""
    with grades_csv.open(newline="", encoding="utf-8") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda r: r["student_id"])
    if work:  # a gradebook shared by several assignments lists every student under each
        rows = [r for r in rows if r["student_id"] in work]
    work = work or {}
    lines = [f"{'student':<10} {'score':>7} {'max':>5}" + ("  handed in" if work else "")]
    lines += [f"{r['student_id']:<10} {float(r['score']):>7.2f} {float(r['max_score']):>5.0f}"
              + (f"  {work.get(r['student_id'], '')}" if work else "") for r in rows]
    return "\n".join(lines)


def run(course_root: Path, assignment: str) -> Path:
    course = Course(course_root, assignment)
    course.create()
    course.release()
    samples = write_demo_class(assignment, course.root / "samples")
    for student, notebook in samples.items():
        course.student_submits(student, notebook)
        print(f"{assignment}: {student} submitted", file=sys.stderr)
    return course.grade(list(samples))


COURSE_CONFIG = """c = get_config()
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.root = {root!r}
c.Exchange.root = {exchange!r}
c.Execute.timeout = 10
# the kit, in a course of the instructor's own (docs/instructors.md, "Adding the kit to your course")
from autograder.nbgrader.course import enable
enable(c)
"""
SHORT_ID = "hw5"
SHORT_PARTS = "layer_norm,attention,multi_head_attention,transformer_block"


def run_course_of_its_own(root: Path) -> dict[str, tuple[Path, dict[str, str]]]:
    """An instructor's own course (its own nbgrader_config.py with the kit's two lines) holding an ordinary
    nbgrader assignment (ps1) and four parts of transformer_block added as hw5, both graded by one nbgrader;
    returns assignment -> (grades.csv, what each student handed in)."""
    from autograder.authoring import ordinary_samples

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    os.environ["AUTOGRADER_COURSE_ROOT"] = str(root.resolve())  # this process's catalogue lookups: the course's
    exchange = root / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    (root / "nbgrader_config.py").write_text(COURSE_CONFIG.format(course_id=COURSE_ID, root=str(root.resolve()),
                                                                  exchange=str(exchange)))
    ordinary_samples.write_source(root)
    done = subprocess.run([sys.executable, "-m", "autograder", "add-assignment", "transformer_block", "--as", SHORT_ID,
                           "--parts", SHORT_PARTS, "--course", str(root)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"add-assignment failed: {done.stderr[-2000:]}")
    graded = {}
    for assignment in (ordinary_samples.ASSIGNMENT, SHORT_ID):
        course = Course(root, assignment, config_dir=root)
        course.env.pop("AUTOGRADER_DB_URL")  # the course's own gradebook, as its config says
        course.nbgrader("generate_assignment", assignment, "--force")
        if assignment == SHORT_ID:
            course.release()
            for student, notebook in write_demo_class(assignment, root / "samples").items():
                course.student_submits(student, notebook)
            work = demo_class_work(assignment)
            course.add_students(list(work))
            course.nbgrader("collect", assignment)
        else:
            work = ordinary_samples.write_submissions(root, root / "release" / assignment / f"{assignment}.ipynb")
            course.add_students(list(work))
        course.nbgrader("autograde", assignment, "--force")
        course.nbgrader("generate_feedback", assignment, "--force")
        grades = root / f"grades-{assignment}.csv"
        course.nbgrader("export", "--to", str(grades), "--assignment", assignment)
        graded[assignment] = grades, work
    return graded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.demo", description=__doc__.split("\n")[0])
    parser.add_argument("course_dir", nargs="?", type=Path, default=REPO_ROOT / "build" / "demo-course")
    parser.add_argument("--assignment", action="append", choices=assignment_names(),
                        help="only this assignment (repeatable; default: all)")
    args = parser.parse_args(argv)
    for assignment in args.assignment or assignment_names():
        root = args.course_dir / assignment
        grades = run(root, assignment)
        print(f"{assignment}\nFeedback: {root / 'feedback'}\nGradebook: {root / 'gradebook.db'}\nGrades: {grades}\n")
        print(grade_table(grades, demo_class_work(assignment)))
        rubric = load_rubric(assignment)
        if rubric.points_by_hand:  # nbgrader's max counts the written answers, which wait for the formgrader
            print(f"(max: the autograded {rubric.max_score:g} and {rubric.points_by_hand:g} points of written answers, "
                  "graded by hand in nbgrader's formgrader)")
        print()
    if not args.assignment:
        root = args.course_dir / "course101"
        for assignment, (grades, work) in run_course_of_its_own(root).items():
            kind = "ordinary nbgrader assignment" if assignment != SHORT_ID else \
                f"transformer_block's {SHORT_PARTS.replace(',', ', ')}, added as {SHORT_ID}"
            print(f"{root.name}: {assignment} ({kind})\nGrades: {grades}\n")
            print(grade_table(grades, work))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
