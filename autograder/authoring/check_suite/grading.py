"""Every catalogue entry written to a file and graded by the real grader, in a pool of processes: plain data
back (scores, each test's part, message, hints and student-facing output, the error ratios each numeric test
observed), read from the result model."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from autograder.authoring.catalogue import Catalogue, CatalogueError
from autograder.authoring.catalogue import load as catalogue_of

DEFAULT_WORKERS = 2


class CheckSuiteError(Exception):
    pass


def load_catalogue(assignment: str) -> Catalogue:
    try:
        return catalogue_of(assignment)
    except CatalogueError as exc:
        raise CheckSuiteError(str(exc)) from None


def grade_entry(assignment: str, path: str, pictures: bool = True) -> dict[str, Any]:
    """Grade one file through the real grader; plain data back (JSON's, for --json), read from the result
    model: scores, every test's part, name, message, hints and student-facing output, and the largest error
    ratio (|error| / allowed) each numeric test observed, {part: {test: ratio}}."""
    import torch

    from autograder.judging import judge
    from autograder.judging.checks import comparison
    from autograder.grading.grade import grade_file
    from autograder.grading.results_json import MAX_OUTPUT_CHARS, check_message, message_text, rounded
    from autograder.grading.rubric import load_rubric
    from autograder.model.limits import Limits

    torch.set_num_threads(1)
    rubric = load_rubric(assignment)
    ratios: dict[str, dict[str, float]] = {}

    def observe(_what: str, ratio: float) -> None:
        running = judge.running_check()
        if running is not None:
            part, test = running
            mine = ratios.setdefault(part, {})
            mine[test] = max(mine.get(test, 0.0), ratio)

    comparison.observers.append(observe)
    try:
        # every check, own-parts checks too: the catalogue judges what they tell apart (same scores either way)
        result = grade_file(Path(path), rubric, Limits(), pictures, every_check=True)
    finally:
        comparison.observers.remove(observe)
    return {"file": Path(path).name, "score": result.score, "seconds": round(result.seconds, 2),
            "parts": {p.part.name: [rounded(p.score), p.part.points] for p in result.parts},
            "tests": [{"part": p.part.name, "name": t.name, "passed": t.earned_all,
                       "message": message_text(t.message), "hints": list(t.hints),
                       "output": check_message(p, t, MAX_OUTPUT_CHARS)}
                      for p in result.parts for t in p.tests],
            "cell_errors": [f"{e.get('type')}: {str(e.get('message'))[:120]}" for e in result.load.cell_errors],
            "ratios": ratios}


def _grade_star(args: tuple[str, str, bool]) -> dict[str, Any]:
    return grade_entry(*args)


def run_catalogue(assignment: str, *, workers: int = DEFAULT_WORKERS, names: list[str] | None = None,
                  folder: Path | None = None, pictures: bool = True) -> dict[str, dict[str, Any]]:
    """Write every catalogue entry (or those named) to `folder` and grade them with a pool of `workers`
    processes; {entry name: grade_entry result}.  `pictures`: as grade_file's."""
    catalogue = load_catalogue(assignment)
    entries = [e for e in catalogue.entries() if names is None or e.name in names]
    own_folder = folder is None
    folder = Path(tempfile.mkdtemp(prefix="autograder-catalogue-")) if folder is None else folder
    try:
        paths = {e.name: str(catalogue.write(e, folder)) for e in entries}  # raises if an entry has rotted
        # notebooks load slowest: start them first so the pool finishes evenly
        order = sorted(entries, key=lambda e: not e.notebook)
        jobs = [(assignment, paths[e.name], pictures) for e in order]
        if workers <= 1:
            graded = [_grade_star(job) for job in jobs]
        else:
            from autograder.grading.batch import worker_pool

            with worker_pool(workers) as pool:
                graded = list(pool.map(_grade_star, jobs, chunksize=1))
        by_name = {e.name: g for e, g in zip(order, graded)}
        return {e.name: by_name[e.name] for e in entries}
    finally:
        if own_folder:
            shutil.rmtree(folder, ignore_errors=True)
