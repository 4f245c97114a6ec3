"""nbgrader's autograde with the rest of the class graded ahead, in parallel.

nbgrader converts one notebook after another in one process, so grading each one in its turn keeps one core
busy at a time.  On its first notebook, SandboxedGrading starts autograder.grading.ahead on that notebook and
those autograde will convert after it, in autograde's own order and by its own rules (which students, and which it
skips as already autograded): `jobs` processes grade them while nbgrader sanitises, records and writes.  When
autograde reaches a notebook, its grade is used only if it judged exactly the cells nbgrader hands over
(after restoring the locked cells) against exactly this assignment, as reuse_results_from is; otherwise,
and for any notebook that was not graded ahead, SandboxedGrading grades it there and then, as before.  So
grading ahead changes when a grade is made, never what it is.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

from autograder.grading.ahead import spec_line
from autograder.grading.batch import Entry, result_path
from autograder.grading.result import display_name
from autograder.model.limits import Limits


def cores() -> int:
    """The cores this process may run on (the kit runs on Linux, which says)."""
    return len(os.sched_getaffinity(0))


def _will_convert(converter: Any, assignment_id: str, student_id: str) -> bool:
    """nbgrader's BaseConverter.init_destination, read only: whether autograde will convert this submission
    (no autograded copy yet, --force, or a newer submission)."""
    coursedir = converter.coursedir
    if student_id in set(filter(None, coursedir.student_id_exclude.split(","))):
        return False
    dest = coursedir.format_path(coursedir.autograded_directory, student_id, assignment_id)
    if not os.path.exists(dest) or converter.force:
        return True
    new = coursedir.get_existing_timestamp(coursedir.format_path(coursedir.submitted_directory, student_id,
                                                                 assignment_id))
    old = coursedir.get_existing_timestamp(dest)
    return new is not None and old is not None and new > old


def submissions_from(converter: Any, student_id: str, assignment_id: str) -> list[tuple[str, Path]]:
    """(student id, notebook) of `student_id`'s submission of `assignment_id` and every one of that assignment
    autograde will convert after it, in its order (sorted submission folders, as
    BaseConverter.convert_notebooks goes): those of one notebook only, since a result stands for a student's
    one notebook."""
    coursedir = converter.coursedir
    # as nbgrader parsed them: from the submitted folders (the autograde step reads from autograded/)
    pattern = re.compile(coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>.*)",
                                               "(?P<assignment_id>.*)", escape=True))
    chosen, reached = [], False
    for folder in sorted(converter.assignments):
        match = pattern.match(folder)
        if match is None or match["assignment_id"] != assignment_id:  # `autograde "*"`: one rubric each
            continue
        notebooks = converter.assignments[folder]
        if match["student_id"] == student_id:  # being converted: nbgrader has decided
            reached = True
        elif not reached or not _will_convert(converter, match["assignment_id"], match["student_id"]):
            continue
        # a folder without the notebook (autograder.nbgrader.hand_ins) is read in its turn, not ahead
        if len(notebooks) == 1 and os.path.lexists(notebooks[0]):
            chosen.append((match["student_id"], Path(notebooks[0])))
    return chosen


class GradeAhead:
    """One autograder.grading.ahead process and the folder its results go to; which students it has finished
    (graded or not) comes back on its standard output, one line each.  Once every student's result has been
    taken (`result`), the folder is removed: no student's grade stays behind in a long-lived process (the
    formgrader's)."""

    def __init__(self, students: set[str], module: str, spec: Callable[[Path], bytes]) -> None:
        """Starts `python -m module` with `spec(results folder)` as its one line of input."""
        self.students = set(students)
        self.finished: set[str] = set()
        self.taken: set[str] = set()
        self.stopped = False
        self.changed = threading.Condition()
        self.folder = Path(tempfile.mkdtemp(prefix="autograder-ahead-"))
        self.errors = (self.folder / "ahead.log").open("wb")
        try:
            self.process = subprocess.Popen([sys.executable, "-m", module],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)
        except OSError:
            self.errors.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        atexit.register(self.stop)
        self.process.stdin.write(spec(self.folder / "results"))
        self.process.stdin.flush()
        threading.Thread(target=self._listen, daemon=True, name="ahead").start()

    @classmethod
    def of_kit(cls, entries: list[Entry], assignment: str, limits: Limits, jobs: int, course: str | None = None
               ) -> "GradeAhead":
        """The kit's own assignment (of the course at `course`) graded ahead by autograder.grading.ahead."""
        return cls({entry.student for entry in entries}, "autograder.grading.ahead",
                   lambda out: spec_line(assignment, limits, jobs, out, entries, course))

    def _listen(self) -> None:
        for line in self.process.stdout:
            try:
                student = json.loads(line)["finished"]
            except (ValueError, KeyError, TypeError):
                continue
            with self.changed:
                self.finished.add(student)
                self.changed.notify_all()
        with self.changed:
            self.finished.update(self.students)  # it ended: nothing more will come
            self.changed.notify_all()

    @contextlib.contextmanager
    def result(self, student: str) -> Iterator[Path | None]:
        """The result written for `student` once it has been graded ahead (waiting for it), to read inside the
        block; None when the student was not among those graded ahead, or the grading of it failed."""
        if student not in self.students or self.stopped:
            yield None
            return
        with self.changed:
            self.changed.wait_for(lambda: student in self.finished)
        path = result_path(self.folder / "results", student)
        try:
            yield path if path.is_file() else None
        finally:
            self.taken.add(student)
            if self.taken >= self.students:
                self.stop()

    def stop(self) -> None:
        """Ends the process (closing its input tells it to, unless it has finished already) and removes its
        folder."""
        if self.stopped:
            return
        self.stopped = True
        with self.changed:
            finished = self.finished >= self.students
        if not finished:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdin.close()  # a second close does nothing
        self.errors.close()
        shutil.rmtree(self.folder, ignore_errors=True)


# this process's grading ahead, by autograde run (nbgrader's converter); None for a run that has none
_runs: weakref.WeakKeyDictionary[Any, GradeAhead | None] = weakref.WeakKeyDictionary()


def grade_ahead(converter: Any, student_id: str, assignment_id: str, rubric: str, limits: Limits, jobs: int,
                log: Callable[[str], None], reusable: Callable[[str], bool] = lambda student: False
                ) -> GradeAhead | None:
    """The grading ahead of this autograde run, decided on its first notebook (`student_id`'s of
    `assignment_id`): that one and those of the assignment that come after it, graded against `rubric`, but
    for the students whose grade is `reusable` from elsewhere.  None when there are fewer than two (nothing
    to gain), `jobs` < 1, `converter` is not nbgrader's, or the process cannot start."""
    try:
        return _runs[converter]
    except (KeyError, TypeError):  # TypeError: not an object a weak reference can hold (not nbgrader's)
        pass
    ahead = None
    if jobs >= 1 and all(hasattr(converter, name) for name in ("assignments", "coursedir", "force")):
        root = Path(converter.coursedir.root) / converter.coursedir.submitted_directory
        entries = [Entry(display_name(student), notebook, root)
                   for student, notebook in submissions_from(converter, student_id, assignment_id)
                   if not reusable(display_name(student))]
        if len(entries) >= 2:
            jobs = min(jobs, len(entries))
            try:
                ahead = GradeAhead.of_kit(entries, rubric, limits, jobs, str(converter.coursedir.root))
                log(f"grading {len(entries)} submissions ahead, {jobs} at a time")
            except OSError as exc:  # each notebook is graded in its turn, as without
                log(f"could not grade ahead ({type(exc).__name__}: {exc}): each notebook is graded in its turn")
    try:
        _runs[converter] = ahead
    except TypeError:
        pass
    return ahead
