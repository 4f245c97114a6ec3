"""Does the hidden suite mean what it says?  Grade an assignment's catalogue of known mistakes and
correct-but-different submissions through the real grader and report the suite's mutation score.

    python -m autograder check-suite [ASSIGNMENT] [--margins] [--reruns N] [--workers W]
    python -m autograder.authoring.check_suite [ASSIGNMENT] ...            (the same)

Every catalogue entry (`assignments/<name>/catalogue/`) is written to a file and graded by
`autograder.grading.grade_file`: sandboxed child, hidden suites, rubric, exactly as a student's file.
A mistake is *caught* when it loses points in its own part; it is *unfair* when it also loses points in a part
that does not build on that part; its *hint* is missing when the failure output of its own part does not
contain the text the entry declares.  A variant *fails* when it gets less than full marks.

Exit status: 0 when every mistake is caught (fairly) and no variant loses a point, 1 otherwise (missing
hints are listed but do not change it; the kit's tests enforce them), 2 for usage errors.

--margins   per hidden test, the worst error ratio (|error| / allowed) of any correct submission and the
            smallest ratio of a mistake that this comparison catches (docs/tolerances.md quotes these).
--reruns N  grade the reference and three buggy entries N times with `python -m autograder grade` under varied
            PYTHONHASHSEED and thread counts, and compare the results.json files byte for byte.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from autograder import REPO_ROOT
from autograder.authoring.assignment import assignment_names
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


# --- grading (in pool workers) -----------------------------------------------------------------------------

def _current_test(stem_to_part: dict[str, str]) -> str:
    """'part: test_name' of the hidden test running now, from the variable pytest sets for it."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    path, _, name = current.partition("::")
    return f"{stem_to_part.get(Path(path).stem, Path(path).stem)}: {name}"


def grade_entry(assignment: str, path: str) -> dict[str, Any]:
    """Grade one file through the real grader; plain data back: scores, every test's student-facing output,
    and the largest error ratio (|error| / allowed) each numeric test observed."""
    import torch

    from autograder.judging.checks import comparison
    from autograder.grading import grade_file
    from autograder.reports.results import gradescope
    from autograder.judging.rubric import load_rubric
    from autograder.host.limits import Limits

    torch.set_num_threads(1)
    rubric = load_rubric(assignment)
    stem_to_part = {Path(p.suite).stem: p.name for p in rubric.parts}
    ratios: dict[str, float] = {}

    def observe(_what: str, ratio: float) -> None:
        test = _current_test(stem_to_part)
        ratios[test] = max(ratios.get(test, 0.0), ratio)

    comparison.observers.append(observe)
    try:
        result = grade_file(Path(path), rubric, Limits())
    finally:
        comparison.observers.remove(observe)
    report = gradescope(result)
    return {"file": Path(path).name, "score": report["score"], "seconds": round(result.seconds, 2),
            "parts": {name: [p["score"], p["max_score"]] for name, p in report["extra_data"]["parts"].items()},
            "tests": [{"name": t["name"], "passed": t["status"] == "passed", "output": t["output"]}
                      for t in report["tests"]],
            "cell_errors": [f"{e.get('type')}: {str(e.get('message'))[:120]}" for e in result.load.cell_errors],
            "ratios": ratios}


def _grade_star(args: tuple[str, str]) -> dict[str, Any]:
    return grade_entry(*args)


def run_catalogue(assignment: str, *, workers: int = DEFAULT_WORKERS, names: list[str] | None = None,
                  folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """Write every catalogue entry (or those named) to `folder` and grade them with a pool of `workers`
    processes; {entry name: grade_entry result}."""
    catalogue = load_catalogue(assignment)
    entries = [e for e in catalogue.entries() if names is None or e.name in names]
    own_folder = folder is None
    folder = Path(tempfile.mkdtemp(prefix="autograder-catalogue-")) if folder is None else folder
    try:
        paths = {e.name: str(catalogue.write(e, folder)) for e in entries}  # raises if an entry has rotted
        # notebooks load slowest: start them first so the pool finishes evenly
        order = sorted(entries, key=lambda e: not e.notebook)
        jobs = [(assignment, paths[e.name]) for e in order]
        if workers <= 1:
            graded = [_grade_star(job) for job in jobs]
        else:
            context = multiprocessing.get_context("spawn")  # never fork a process that has torch loaded
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                graded = list(pool.map(_grade_star, jobs, chunksize=1))
        by_name = {e.name: g for e, g in zip(order, graded)}
        return {e.name: by_name[e.name] for e in entries}
    finally:
        if own_folder:
            shutil.rmtree(folder, ignore_errors=True)


# --- verdicts ----------------------------------------------------------------------------------------------

def lost_parts(result: dict[str, Any]) -> set[str]:
    return {name for name, (score, maximum) in result["parts"].items() if score < maximum}


def verdict(catalogue: Catalogue, entry: Any, result: dict[str, Any]) -> dict[str, Any]:
    """What is wrong with the suite as far as this entry shows (empty lists and True/None when nothing)."""
    lost = lost_parts(result)
    if entry.part is None:
        return {"kind": "variant", "ok": not lost, "failed_tests": [t for t in result["tests"] if not t["passed"]]}
    own_failures = [t["output"] for t in result["tests"] if not t["passed"] and t["name"].startswith(f"{entry.part}: ")]
    caught = entry.part in lost
    unfair = sorted(lost - catalogue.may_cost(entry.part))
    hint_shown = None if entry.hint is None else any(entry.hint in text for text in own_failures)
    return {"kind": "mistake", "caught": caught, "unfair": unfair, "hint_shown": hint_shown,
            "ok": caught and not unfair}


# --- reporting ---------------------------------------------------------------------------------------------

def summarise(assignment: str, results: dict[str, dict[str, Any]], seconds: float, workers: int) -> tuple[str, bool]:
    catalogue = load_catalogue(assignment)
    entries = {e.name: e for e in catalogue.entries() if e.name in results}
    verdicts = {name: verdict(catalogue, e, results[name]) for name, e in entries.items()}
    mistakes = [e for e in entries.values() if e.part is not None]
    variants = [e for e in entries.values() if e.part is None]
    caught = [e for e in mistakes if verdicts[e.name]["caught"]]
    lines = [f"{assignment}: hidden suite graded on {len(mistakes)} known mistakes and {len(variants)} correct "
             f"submissions through the sandboxed grader ({seconds:.0f} s, {workers} workers)",
             f"mutation score: {len(caught)} / {len(mistakes)} mistakes caught"]
    parts = list(catalogue.built_on)
    for part in parts:
        mine = [e for e in mistakes if e.part == part]
        missed = [e.name for e in mine if not verdicts[e.name]["caught"]]
        lines.append(f"  {part:<22} {len(mine) - len(missed):>3} / {len(mine)}"
                     + (f"   missed: {', '.join(missed)}" if missed else ""))
    unfair = [(e.name, verdicts[e.name]["unfair"]) for e in mistakes if verdicts[e.name]["unfair"]]
    lines.append("unfair (a bug costing a part that does not build on its own): "
                 + ("none" if not unfair else "; ".join(f"{n} cost {', '.join(u)}" for n, u in unfair)))
    failed = [e for e in variants if not verdicts[e.name]["ok"]]
    lines.append(f"correct submissions with full marks: {len(variants) - len(failed)} / {len(variants)}")
    for e in failed:
        lines.append(f"  WRONGLY FAILED {e.name} ({results[e.name]['score']:g} points):")
        for test in verdicts[e.name]["failed_tests"][:5]:
            lines.append(f"    {test['name']}: {test['output'].splitlines()[0][:200] if test['output'] else ''}")
    declared = [e for e in mistakes if e.hint is not None]
    no_hint = [e.name for e in declared if not verdicts[e.name]["hint_shown"]]
    lines.append(f"specific hints shown: {len(declared) - len(no_hint)} / {len(declared)} declared "
                 f"({len(mistakes)} mistakes)" + (f"; missing: {', '.join(no_hint)}" if no_hint else ""))
    ok = not failed and all(v["ok"] for v in verdicts.values() if v["kind"] == "mistake")
    return "\n".join(lines), ok


def margins(assignment: str, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per hidden test with numeric comparisons: the worst |error| / allowed ratio of any correct submission,
    and the smallest ratio among the mistakes that test catches numerically (ratio > 1)."""
    catalogue = load_catalogue(assignment)
    order = [e for e in catalogue.entries() if e.name in results]  # ties go to the earliest entry (the reference)
    tests = sorted({t for r in results.values() for t in r["ratios"]})
    rows = []
    for test in tests:
        legit = [(results[e.name]["ratios"][test], -i, e.name) for i, e in enumerate(order)
                 if e.kind == "variant" and test in results[e.name]["ratios"]]
        caught = [(results[e.name]["ratios"][test], i, e.name) for i, e in enumerate(order)
                  if e.kind == "mistake" and results[e.name]["ratios"].get(test, 0.0) > 1.0]
        worst = (lambda m: (m[0], m[2]))(max(legit)) if legit else (float("nan"), "")
        smallest = (lambda m: (m[0], m[2]))(min(caught)) if caught else (float("nan"), "")
        rows.append({"test": test, "worst_legit": worst[0], "worst_legit_entry": worst[1],
                     "smallest_bug": smallest[0], "smallest_bug_entry": smallest[1], "bugs_caught": len(caught),
                     "margin": smallest[0] / worst[0] if legit and caught and worst[0] > 0 else float("nan")})
    return rows


def weakest_catches(assignment: str, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per part: the worst ratio of any correct submission in that part's tests, and the mistake of that part
    whose STRONGEST numeric catch (largest ratio over all tests) is smallest, i.e. the bug closest to
    escaping the whole suite if tolerances grew.  Mistakes caught only by exceptions, types or structure
    checks have no ratio and are counted separately."""
    catalogue = load_catalogue(assignment)
    order = [e for e in catalogue.entries() if e.name in results]
    rows = []
    for part in catalogue.built_on:
        legit = [(ratio, -i, e.name) for i, e in enumerate(order) if e.kind == "variant"
                 for test, ratio in results[e.name]["ratios"].items() if test.startswith(f"{part}: ")]
        strongest = []
        exact = 0
        for e in catalogue.entries():
            if e.part != part or e.name not in results:
                continue
            ratios = [v for v in results[e.name]["ratios"].values() if v > 1.0]
            if ratios:
                strongest.append((max(ratios), e.name))
            else:
                exact += 1
        worst = (lambda m: (m[0], m[2]))(max(legit)) if legit else (float("nan"), "")
        weakest = min(strongest) if strongest else (float("nan"), "")
        rows.append({"part": part, "worst_legit": worst[0], "worst_legit_entry": worst[1],
                     "weakest_bug": weakest[0], "weakest_bug_entry": weakest[1], "numeric": len(strongest),
                     "exact": exact})
    return rows


def format_weakest(rows: list[dict[str, Any]]) -> str:
    lines = ["| part | worst correct (ratio) | weakest numeric catch: its largest ratio | caught numerically "
             "/ by exceptions, types or structure |", "|---|---|---|---|"]
    for r in rows:
        bug = f"{r['weakest_bug']:.3g} ({r['weakest_bug_entry']})" if r["numeric"] else "-"
        lines.append(f"| {r['part']} | {r['worst_legit']:.2g} ({r['worst_legit_entry']}) | {bug} | "
                     f"{r['numeric']} / {r['exact']} |")
    return "\n".join(lines)


def format_margins(rows: list[dict[str, Any]]) -> str:
    lines = ["| test | worst correct (ratio) | smallest caught bug (ratio) | bugs caught | gap |",
             "|---|---|---|---|---|"]
    for r in rows:
        bug = (f"{r['smallest_bug']:.3g} ({r['smallest_bug_entry']})" if r["bugs_caught"] else "-")
        gap = f"{r['margin']:.2g}x" if r["margin"] == r["margin"] else "-"
        lines.append(f"| {r['test']} | {r['worst_legit']:.2g} ({r['worst_legit_entry']}) | {bug} | "
                     f"{r['bugs_caught']} | {gap} |")
    return "\n".join(lines)


# --- determinism through the CLI ---------------------------------------------------------------------------

def rerun_conditions(count: int) -> list[dict[str, str]]:
    """Environment changes for each rerun: the grader's hash seed and its torch / OpenMP thread count."""
    seeds = ["0", "1", "4242"]
    return [{"PYTHONHASHSEED": seeds[i] if i < len(seeds) else str(10_000 + 7 * i),
             "OMP_NUM_THREADS": str(1 + i % 2), "MKL_NUM_THREADS": str(1 + i % 2)} for i in range(count)]


def _cli_grade(job: tuple[str, int, Path, Path, dict[str, str], str]) -> str:
    """One `python -m autograder grade` run; an error line, or "" when it exited 0."""
    name, i, path, out, changes, assignment = job
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--assignment", assignment,
                           "-o", str(out)], cwd=REPO_ROOT,
                          env={**os.environ, **changes}, capture_output=True, text=True, timeout=600)
    return "" if done.returncode == 0 else f"{name} run {i}: exit {done.returncode}: {done.stderr[-300:]}"


def determinism_entries(catalogue: Catalogue) -> tuple[str, ...]:
    """The entries the manifest names for reruns; none is an error, since reruns would check nothing."""
    if not catalogue.determinism:
        raise CheckSuiteError(f"{catalogue.assignment.relative(catalogue.assignment.manifest)} names no "
                              "[catalogue] determinism entries, so --reruns would check nothing")
    return catalogue.determinism


def determinism(assignment: str, reruns: int, *, workers: int = DEFAULT_WORKERS, folder: Path | None = None
                ) -> tuple[dict[str, bool], list[str]]:
    """Grade the named entries `reruns` times each through `python -m autograder grade` under
    `rerun_conditions`; ({entry: its results.json files are byte-identical and every run exited 0}, report
    lines)."""
    from concurrent.futures import ThreadPoolExecutor

    catalogue = load_catalogue(assignment)
    names = determinism_entries(catalogue)
    entries = [e for e in catalogue.entries() if e.name in names]
    own_folder = folder is None
    folder = Path(tempfile.mkdtemp(prefix="autograder-reruns-")) if folder is None else folder
    try:
        sources = {e.name: catalogue.write(e, folder / "sources") for e in entries}
        jobs = []
        for i, changes in enumerate(rerun_conditions(reruns)):
            run_dir = folder / f"run{i:02d}"
            run_dir.mkdir(parents=True, exist_ok=True)
            for name, source in sources.items():
                copy = run_dir / source.name  # the same file name every run: results.json names the submission
                shutil.copyfile(source, copy)
                jobs.append((name, i, copy, run_dir / f"{name}.json", changes, assignment))
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            errors = list(pool.map(_cli_grade, jobs))
        lines = [e for e in errors if e]
        same = {}
        for name in sources:
            mine = [(job, error) for job, error in zip(jobs, errors) if job[0] == name]
            outputs = [job[3] for job, _ in mine]
            digests = [hashlib.sha256(out.read_bytes()).hexdigest() if out.exists() else "missing" for out in outputs]
            first = json.loads(outputs[0].read_text()) if outputs[0].exists() else {"score": "?"}
            same[name] = len(set(digests)) == 1 and "missing" not in digests and not any(e for _, e in mine)
            lines.append(f"  {name:<34} score {first['score']}: {reruns} results.json "
                         + ("byte-identical" if same[name] else f"DIFFERENT ({len(set(digests))} distinct)"))
        conditions = rerun_conditions(reruns)
        seeds = sorted({c["PYTHONHASHSEED"] for c in conditions}, key=int)
        threads = sorted({c["OMP_NUM_THREADS"] for c in conditions})
        header = (f"determinism: {reruns} reruns through `python -m autograder grade` (PYTHONHASHSEED in "
                  f"{', '.join(seeds)}; grader process started with OMP/MKL threads {' and '.join(threads)}, pinned "
                  "to 1 while grading)")
        return same, [header, *lines]
    finally:
        if own_folder:
            shutil.rmtree(folder, ignore_errors=True)


# --- command line ------------------------------------------------------------------------------------------

def run(assignment: str, *, show_margins: bool = False, reruns: int = 0, workers: int = DEFAULT_WORKERS,
        json_out: Path | None = None) -> int:
    try:
        if reruns:  # before the long part, so that a run that cannot do what it was asked stops at once
            determinism_entries(load_catalogue(assignment))
        started = time.monotonic()
        results = run_catalogue(assignment, workers=workers)
        seconds = time.monotonic() - started
        text, ok = summarise(assignment, results, seconds, workers)
    except (CheckSuiteError, CatalogueError) as exc:
        print(f"python -m autograder check-suite: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    if show_margins:
        print("\nmargins (ratio = max |error| / allowed error of a comparison; < 1 passes):")
        print(format_margins(margins(assignment, results)))
        print("\nper part (a bug is caught by its largest ratio; the weakest such bug is the first to escape if "
              "tolerances grew):")
        print(format_weakest(weakest_catches(assignment, results)))
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if reruns:
        same, lines = determinism(assignment, reruns, workers=workers)
        print("\n" + "\n".join(lines))
        ok = ok and all(same.values())
    return 0 if ok else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignment", nargs="?", help="assignment to check (default: every assignment)")
    parser.add_argument("--margins", action="store_true", help="print the tolerance margins per hidden test")
    parser.add_argument("--reruns", type=int, default=0, metavar="N",
                        help="also grade the assignment's determinism entries N times each through the CLI and "
                             "compare their results.json byte for byte")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="grading processes (default 2)")
    parser.add_argument("--json", type=Path, help="write every entry's grading result to this file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.check_suite", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run_from_arguments(parser.parse_args(argv))


def run_from_arguments(args: argparse.Namespace) -> int:
    names = [args.assignment] if args.assignment else assignment_names()
    if args.json and len(names) > 1:
        print("python -m autograder check-suite: error: --json needs one assignment", file=sys.stderr)
        return 2
    codes = [run(name, show_margins=args.margins, reruns=args.reruns, workers=max(args.workers, 1),
                 json_out=args.json) for name in names]
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())
