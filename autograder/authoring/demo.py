"""The whole instructor flow with the real nbgrader CLI, on sample submissions, in a scratch course:

generate -> release -> (each student) fetch, fill in, submit -> collect -> autograde -> generate_feedback
-> export, ending in the grade table from nbgrader's SQLite gradebook.

    python -m autograder.authoring.demo [COURSE_DIR]      (default: build/demo-course, recreated)
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.authoring.notebook_sync import REPO_ROOT
from autograder.authoring.samples import write_demo_class

ASSIGNMENT = "transformer_block"
COURSE_ID = "transformer-blocks"


class Course:
    """A scratch nbgrader course driven through nbgrader's own command line, with the repo's config."""

    def __init__(self, root: Path, config_dir: Path = REPO_ROOT) -> None:
        self.root = root.resolve()
        self.config_dir = config_dir  # where nbgrader runs, so the nbgrader_config.py it reads
        self.exchange = self.root / "exchange"
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
        shutil.copytree(REPO_ROOT / "source", self.root / "source")

    def release(self) -> None:
        self.nbgrader("generate_assignment", ASSIGNMENT, "--force")
        self.nbgrader("release_assignment", ASSIGNMENT, "--force")

    def student_submits(self, student: str, notebook: Path) -> None:
        home = self.root / "students" / student
        home.mkdir(parents=True, exist_ok=True)
        self.nbgrader("fetch_assignment", ASSIGNMENT, user=student, cwd=home)
        shutil.copyfile(notebook, home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        # one OS account plays every student here, so the student id is given explicitly
        self.nbgrader("submit", ASSIGNMENT, f"--student={student}", user=student, cwd=home)

    def zip_collect(self, archive: Path) -> None:
        """Submissions downloaded from an LMS as one zip, instead of through the exchange."""
        folder = self.root / "downloaded" / ASSIGNMENT / "archive"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(archive, folder / archive.name)
        self.nbgrader("zip_collect", ASSIGNMENT, "--force")

    def grade(self, students: list[str]) -> Path:
        for student in students:
            self.nbgrader("db", "student", "add", student)
        self.nbgrader("collect", ASSIGNMENT)
        self.nbgrader("autograde", ASSIGNMENT, "--force")
        self.nbgrader("generate_feedback", ASSIGNMENT, "--force")
        grades = self.root / "grades.csv"
        self.nbgrader("export", "--to", str(grades))
        return grades


def grade_table(grades_csv: Path) -> str:
    with grades_csv.open(newline="", encoding="utf-8") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda r: r["student_id"])
    lines = [f"{'student':<10} {'score':>7} {'max':>5}"]
    lines += [f"{r['student_id']:<10} {float(r['score']):>7.2f} {float(r['max_score']):>5.0f}" for r in rows]
    return "\n".join(lines)


def run(course_root: Path) -> Path:
    course = Course(course_root)
    course.create()
    course.release()
    samples = write_demo_class(course.root / "samples")
    for student, notebook in samples.items():
        course.student_submits(student, notebook)
        print(f"{student} submitted", file=sys.stderr)
    grades = course.grade(list(samples))
    return grades


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else REPO_ROOT / "build" / "demo-course"
    grades = run(root)
    print(f"Feedback: {root / 'feedback'}\nGradebook: {root / 'gradebook.db'}\nGrades: {grades}\n")
    print(grade_table(grades))
    return 0


if __name__ == "__main__":
    sys.exit(main())
