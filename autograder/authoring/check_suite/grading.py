"""Every catalogue entry written to a file and graded by the real grader, in a pool of processes: plain data
back (scores, each test's student-facing output, the error ratios each numeric test observed)."""
from __future__ import annotations

import os
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


def _current_test(stem_to_part: dict[str, str]) -> str:
    """'part: test_name' of the hidden test running now, from the variable pytest sets for it."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    path, _, name = current.partition("::")
    return f"{stem_to_part.get(Path(path).stem, Path(path).stem)}: {name}"


def grade_entry(assignment: str, path: str, pictures: bool = True) -> dict[str, Any]:
    """Grade one file through the real grader; plain data back: scores, every test's student-facing output,
    and the largest error ratio (|error| / allowed) each numeric test observed."""
    import torch

    from autograder.judging.checks import comparison
    from autograder.grading.grade import grade_file
    from autograder.grading.results_json import gradescope
    from autograder.grading.rubric import load_rubric
    from autograder.model.limits import Limits

    torch.set_num_threads(1)
    rubric = load_rubric(assignment)
    stem_to_part = {Path(p.suite).stem: p.name for p in rubric.parts}
    ratios: dict[str, float] = {}

    def observe(_what: str, ratio: float) -> None:
        test = _current_test(stem_to_part)
        ratios[test] = max(ratios.get(test, 0.0), ratio)

    comparison.observers.append(observe)
    try:
        result = grade_file(Path(path), rubric, Limits(), pictures)
    finally:
        comparison.observers.remove(observe)
    report = gradescope(result)
    return {"file": Path(path).name, "score": report["score"], "seconds": round(result.seconds, 2),
            "parts": {name: [p["score"], p["max_score"]] for name, p in report["extra_data"]["parts"].items()},
            "tests": [{"name": t["name"], "passed": t["status"] == "passed", "output": t["output"]}
                      for t in report["tests"]],
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
