"""A prying ordinary notebook run in the kit's sandbox, wherever this script runs (this VM as root or as an
ordinary user, under tests/docker_like.py, inside the containers of tests/test_containers.py):

    python ordinary_probe.py OUT.json [KIT_CHECKOUT]

It lays out a course as nbgrader does (gradebook.db, the instructor's source/, a classmate's submission, each
holding a secret), then runs one notebook's cells through autograder.host.notebook_run with the student's own
data file beside it: a cell that reads the data file, and the demo's prying cell (ordinary_samples.PRYING),
which tries the secrets by their absolute paths and by the paths relative to where nbgrader would run it, and
to write next to the gradebook.  OUT.json says what the cells printed, whether the course changed, and the isolation.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

SECRET = "SECRET-OF-THE-COURSE"


def main() -> None:
    out = Path(sys.argv[1])
    if len(sys.argv) > 2:
        sys.path.insert(0, sys.argv[2])
    from autograder.authoring.ordinary_samples import PRYING  # what the demo's prying student tries
    from autograder.host.notebook_run import run_notebook, staged_files
    from autograder.model.limits import Limits

    course = Path(tempfile.mkdtemp(prefix="ordinary-course-"))
    for relative in ("gradebook.db", "source/ps1/ps1.ipynb", "submitted/bob/ps1/ps1.ipynb"):
        (course / relative).parent.mkdir(parents=True, exist_ok=True)
        (course / relative).write_text(SECRET)
    own = course / "submitted" / "mallory" / "ps1"
    own.mkdir(parents=True)
    (own / "numbers.txt").write_text("3\n4\n5\n")
    staging, _ = staged_files([own])
    cells = ["print(open('numbers.txt').read().split())",
             PRYING.replace("{course}", str(course))]
    try:
        run = run_notebook(cells, Limits(cell_timeout=20), staging)
    finally:
        shutil.rmtree(staging)  # nothing of the grader's left behind (test_containers looks)
    printed = ["".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream") for cell in run.cells]
    errors = [o["ename"] for cell in run.cells for o in cell.outputs if o["output_type"] == "error"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"printed": printed, "errors": errors, "isolation": run.isolation, "died": run.died,
                               "planted": (course / "planted.txt").exists(), "uid": os.getuid(),
                               "notices": [n.text for n in run.notices]}))
    shutil.rmtree(course)


if __name__ == "__main__":
    main()
