"""python -m autograder: one module per verb (`grade`, `grade_all`, `serve`, `lms`; check-suite, similarity and
export live with their tools), parsed and dispatched by `main`, which turns a UsageError into one line and
exit status 2 in one place."""


class UsageError(Exception):
    """A command cannot run as asked (a missing file, a clash of outputs, no sandbox): each line is printed as
    `python -m autograder: error: LINE`, nothing is graded, and the exit status is 2."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines
