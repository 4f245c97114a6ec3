"""Generate the student release of each assignment with the real `nbgrader generate_assignment`.

    python -m autograder.authoring.release check [--assignment NAME ...]   # exit 1 if release/<name>/ is stale
    python -m autograder.authoring.release write [--assignment NAME ...]   # regenerate it (default: all)

nbgrader runs in a throwaway course directory holding a copy of the assignment's source and a minimal
nbgrader_config.py, so neither the repository's own nbgrader configuration nor the user's ~/.jupyter can
change the result.

Before nbgrader runs, the source notebook is checked against the assignment's rubric: the autograder writes
each part's verdict into the check cell whose grade_id is the part's name, so a check cell matching no part
(or with other points) would otherwise only show up when students are graded.  Both commands then exit 1
with one line per problem.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable


from autograder.authoring.assignment import Assignment, check_or_write_command
from autograder.grading.rubric import Part, RubricError, load_rubric



def _canonical_json(notebook: dict[str, Any]) -> str:
    # Same layout as nbformat's writer, fixed here so the committed file does not depend on its version.
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class SourceError(ValueError):
    """The source notebook cannot be released as it is; the message is one line per problem."""


def _require_cell_ids(source_notebook: Path) -> None:
    # nbformat invents random ids for cells that have none, which would make every release differ.
    # With ids in the source, nbgrader's output is byte-identical from run to run (it writes no
    # timestamps into the notebook, and --no-db keeps the gradebook out of it).
    cells = json.loads(source_notebook.read_text(encoding="utf-8"))["cells"]
    missing = [index for index, cell in enumerate(cells) if not cell.get("id")]
    if missing:
        raise SourceError(f"{source_notebook}: cells {missing} have no id; give every cell a fixed id")


def rubric_mismatches(notebook: dict[str, Any], parts: Iterable[Part], name: str) -> list[str]:
    """One line per disagreement between the notebook's autograded test cells (nbgrader grade and not
    solution) and the rubric's parts; [] when every part has exactly one such cell, whose grade_id is the
    part's name and whose points are the part's.  Cells graded by hand (grade and solution: written answers)
    are outside the rubric, whatever their points, but may not carry a part's name.  `name` is the notebook
    file the messages name."""
    points = {part.name: float(part.points) for part in parts}
    problems, seen = [], set()
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and meta.get("solution"):  # graded by hand (a written answer): not the rubric's
            if meta.get("grade_id") in points:
                problems.append(f"{name}: grade_id {meta.get('grade_id')!r} is a rubric part, yet its cell is graded "
                                "by hand (grade and solution); a part's verdict needs an autograded test cell")
            continue
        if not meta.get("grade"):
            continue
        grade_id = meta.get("grade_id")
        if grade_id not in points:
            problems.append(f"{name}: grade_id {grade_id!r} matches no rubric part (parts: {', '.join(points)})")
        elif grade_id in seen:
            problems.append(f"{name}: grade_id {grade_id!r} has more than one autograded test cell")
        elif meta.get("points") != points[grade_id]:
            problems.append(f"{name}: grade_id {grade_id!r} has {meta.get('points')} points, "
                            f"the rubric gives {points[grade_id]:g}")
        seen.add(grade_id)
    problems += [f"{name}: rubric part {part!r} has no autograded test cell (grade_id {part!r})"
                 for part in points if part not in seen]
    return problems


def _require_rubric_match(assignment: Assignment, source_notebook: Path | None = None) -> None:
    source_notebook = source_notebook or assignment.source_notebook
    notebook = json.loads(source_notebook.read_text(encoding="utf-8"))
    # skip_when_unchanged is checked against the notebook being released, not the committed release it replaces
    problems = rubric_mismatches(notebook, load_rubric(assignment.name, source_notebook, course=assignment.root).parts,
                                 str(source_notebook))
    if problems:
        raise SourceError("\n".join(problems))


def generate_release(assignment: Assignment, out_dir: str | Path) -> Path:
    """Run nbgrader on the assignment's source/<name>/ and copy the release notebook into out_dir."""
    name = assignment.name
    source_dir = assignment.source_notebook.parent
    _require_cell_ids(assignment.source_notebook)
    _require_rubric_match(assignment)
    with tempfile.TemporaryDirectory(prefix="nbgrader-course-") as tmp:
        course = Path(tmp) / "course"
        shutil.copytree(source_dir, course / "source" / name)
        (course / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n", encoding="utf-8")
        env = dict(os.environ)
        env["JUPYTER_CONFIG_DIR"] = str(Path(tmp) / "jupyter-config")  # empty: ignore ~/.jupyter
        # nbgrader shells out to console scripts of its own environment (e.g. alembic) by bare name.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        result = subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", name, "--no-db", "--force"],
            cwd=course, env=env, capture_output=True, text=True)
        generated = course / "release" / name / assignment.source_notebook.name
        if result.returncode != 0 or not generated.exists():
            raise RuntimeError(f"nbgrader generate_assignment failed (exit {result.returncode}):\n{result.stderr}")
        notebook = json.loads(generated.read_text(encoding="utf-8"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / assignment.source_notebook.name
    target.write_text(_canonical_json(notebook), encoding="utf-8")
    return target


def notebooks_equal(a: str | Path, b: str | Path) -> bool:
    """Same notebook JSON (formatting aside)."""
    return json.loads(Path(a).read_text(encoding="utf-8")) == json.loads(Path(b).read_text(encoding="utf-8"))


def check_or_write(assignment: Assignment, write: bool) -> list[str]:
    """One line per problem with the assignment's release (after `write`, none unless its source is wrong)."""
    committed = assignment.release_notebook
    try:
        if write:
            generate_release(assignment, committed.parent)
            return []
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate_release(assignment, tmp)
            stale = not committed.exists() or not notebooks_equal(fresh, committed)
    except (SourceError, RubricError) as exc:  # a problem in the source or manifest, not a crash: no traceback
        return str(exc).splitlines()
    if stale:
        return [f"{assignment.relative(committed)} is stale: it differs from what nbgrader generates from "
                f"{assignment.relative(assignment.source_notebook.parent)}; run "
                "`python -m autograder.authoring.release write`"]
    return []


def main(argv: list[str] | None = None) -> int:
    return check_or_write_command("python -m autograder.authoring.release", __doc__, argv, check_or_write)


if __name__ == "__main__":
    sys.exit(main())
