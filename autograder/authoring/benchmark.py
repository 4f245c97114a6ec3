"""Grading time and memory per submission: the kit's ways of grading a class against nbgrader's own kernel
execution, on the same notebooks in one run.  Prints a table; asserts nothing (timings belong here, not in
tests).

    python -m autograder.authoring.benchmark [N]     (default N = 24 notebooks)
    python -m autograder.authoring.benchmark [N] --ordinary
        an ordinary nbgrader assignment instead (autograder/authoring/ordinary_samples.py): nbgrader's own
        Execute against the kit's sandbox, both through `nbgrader autograde`, and whether their grades agree

The class alternates the reference solution with single-bug submissions from the catalogue of known
mistakes, each as the release notebook with its solution cells filled in.  Every way grades the whole class
into a fresh output folder:

1. nbgrader's default `nbgrader autograde` (kernel execution, visible checks only) on a plain course;
2. the kit through `nbgrader autograde`, one command for the class, as an instructor runs it;
3. `python -m autograder grade FILE`, once per file, as course CI runs it (each command starts cold);
4. the same commands with AUTOGRADER_SERVICE set, graded by `python -m autograder serve` (started, and its
   suites collected, before the clock starts; its memory counts);
5. `python -m autograder grade-all DIR --jobs 2`;
6. `python -m autograder grade-all DIR --scheduler ADDRESS` on a local Dask cluster of two one-thread
   workers (started before the clock starts; their memory counts).

Memory is the peak, over samples every half second, of the proportional set size (Pss) summed over the
command's process tree: shared pages (torch's libraries, mapped by every process) are split among the
processes that map them instead of being counted once per process.  Reading Pss makes the kernel walk
every page table (about 3 ms per torch process), so sampling more often would take CPU from the ways it
measures; the CPU the sampler used is printed with the results.  The floor is the hidden suite's own
computations against the reference module in one warm process: no sandbox, no process start, no imports.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import psutil

from autograder.authoring.demo import Course
from autograder import REPO_ROOT

DEFAULT_COUNT = 24
DEFAULT_ASSIGNMENT = "transformer_block"  # the one the published figures are for
SAMPLE_SECONDS = 0.5
PLAIN_NBGRADER_CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "benchmark"
"""
BIN = Path(sys.executable).parent


# --- memory -------------------------------------------------------------------------------------------


def pss_bytes(pid: int) -> int:
    """The process's proportional set size, 0 when it is gone or unreadable."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:  # exited between listing and reading, or another user's process
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def tree_pids(roots: Iterable[int]) -> set[int]:
    pids = set()
    for root in roots:
        try:
            pids.add(root)
            pids.update(child.pid for child in psutil.Process(root).children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return pids


def tree_pss(roots: Iterable[int]) -> int:
    return sum(pss_bytes(pid) for pid in tree_pids(roots))


@dataclass
class Sample:
    seconds: float  # since sampling started
    pss: int        # bytes, summed over the trees
    done: int       # submissions graded so far, as `progress` counted them


class MemorySampler:
    """Samples the summed Pss of process trees in a thread until stopped.  The roots are read at every
    sample, so processes started later (one command after another) are followed."""

    def __init__(self, roots: Callable[[], Iterable[int]], progress: Callable[[], int] = lambda: 0,
                 interval: float = SAMPLE_SECONDS) -> None:
        self.roots = roots
        self.progress = progress
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = 0.0
        self.cpu_seconds = 0.0  # the sampler's own, so that its cost on the measured ways is known

    def __enter__(self) -> MemorySampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            started = time.thread_time()
            self.sample()
            self.cpu_seconds += time.thread_time() - started
            if self._stop.wait(self.interval):
                break
        self.sample()  # once more when the way has ended: its last results, which steady_rate reads

    def sample(self) -> None:
        pss = tree_pss(self.roots())
        self.samples.append(Sample(time.monotonic() - self._started, pss, self.progress()))

    @property
    def peak(self) -> int:
        return max((s.pss for s in self.samples), default=0)

    def steady_rate(self, total: int) -> tuple[float, float] | None:
        """(seconds until the first result was seen, seconds per submission from then until the last): the
        start-up of a long-running grader apart from its rate.  Within one sampling interval."""
        first = next((s.seconds for s in self.samples if s.done >= 1), None)
        last = next((s.seconds for s in self.samples if s.done >= total), None)
        if first is None or last is None or total < 2 or last <= first:
            return None
        return first, (last - first) / (total - 1)

    def peak_while(self, graded_below: int) -> tuple[int, int]:
        """Peaks while fewer than `graded_below` submissions were graded, and after."""
        first = [s.pss for s in self.samples if s.done < graded_below]
        second = [s.pss for s in self.samples if s.done >= graded_below]
        return max(first, default=0), max(second, default=0)


# --- running commands -----------------------------------------------------------------------------------


@dataclass
class Way:
    name: str
    seconds: float = 0.0  # wall time for the whole class
    peak: int = 0         # bytes
    skipped: str = ""     # why the way did not run
    halves: tuple[int, int] | None = None
    commands: list[float] = field(default_factory=list)  # wall time of each command
    sampler_cpu: float = 0.0  # CPU seconds the memory sampler took while this way ran
    # (seconds until the first result, seconds per submission after it), read off the sampler's progress
    steady: tuple[float, float] | None = None


def run_measured(command: Sequence[str], sampler_roots: list[int], log: Path, *, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> float:
    """Runs one command to completion while the sampler follows it (through `sampler_roots`); returns its
    wall time."""
    with log.open("ab") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler_roots.append(process.pid)
        code = process.wait()
        seconds = time.perf_counter() - started
        sampler_roots.remove(process.pid)
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(map(str, command))} failed (exit {code}):\n{tail}")
    return seconds


def measure(way: Way, commands: list[Sequence[str]], log: Path, *, cwd: Path | None = None,
            env: dict[str, str] | None = None, also: Sequence[int] = (),
            progress: Callable[[], int] = lambda: 0, class_size: int = 0) -> Way:
    """Runs the commands one after another; `also` are processes (a cluster) whose memory counts too."""
    roots: list[int] = []
    with MemorySampler(lambda: [*roots, *also], progress) as sampler:
        for command in commands:
            way.commands.append(run_measured(command, roots, log, cwd=cwd, env=env))
    way.seconds, way.peak, way.sampler_cpu = sum(way.commands), sampler.peak, sampler.cpu_seconds
    if class_size:
        way.halves = sampler.peak_while((class_size + 1) // 2)
        way.steady = sampler.steady_rate(class_size)
    return way


def json_results(folder: Path) -> Callable[[], int]:
    return lambda: sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0


# --- the class -------------------------------------------------------------------------------------------


def write_class(folder: Path, count: int, assignment: str = DEFAULT_ASSIGNMENT) -> list[Path]:
    """`count` notebooks: the reference and single-bug submissions (each from another part) in turn."""
    from autograder.authoring.catalogue import REFERENCE, EveryPart, load
    from autograder.authoring.samples import write_notebook

    catalogue = load(assignment)
    mistakes = [e for e in catalogue.entries() if e.part is not None and not isinstance(e.part, EveryPart)]
    by_part: dict[str, list] = {}
    for entry in mistakes:
        by_part.setdefault(entry.part, []).append(entry)
    spread = [group[i] for i in range(max(map(len, by_part.values()))) for group in by_part.values()
              if i < len(group)]  # one mistake of each part, then the next of each, ...
    chosen = [REFERENCE if i % 2 == 0 else spread[(i // 2) % len(spread)] for i in range(count)]
    return [write_notebook(catalogue.notebook(entry), folder / f"s{i:03d}-{entry.name}.ipynb")
            for i, entry in enumerate(chosen)]


def nbgrader_course(root: Path, notebooks: list[Path], plain: bool, assignment: str) -> Course:
    """A course whose submitted/ holds the class: nbgrader's own configuration, or the kit's."""
    course = Course(root, assignment, config_dir=root) if plain else Course(root, assignment)
    course.create()
    if plain:
        (root / "nbgrader_config.py").write_text(PLAIN_NBGRADER_CONFIG.format(root=str(course.root)))
    course.nbgrader("generate_assignment", assignment, "--force")
    for notebook in notebooks:
        target = course.root / "submitted" / notebook.stem / assignment
        target.mkdir(parents=True)
        shutil.copyfile(notebook, target / f"{assignment}.ipynb")
    return course


def nbgrader_way(name: str, root: Path, notebooks: list[Path], plain: bool, log: Path, assignment: str) -> Way:
    course = nbgrader_course(root, notebooks, plain, assignment)
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    return measure(Way(name), [command], log, cwd=course.config_dir, env=course.env)


def grade_all_supports(flag: str) -> bool:
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-all", "--help"], capture_output=True,
                          text=True)
    return flag in done.stdout


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to each, in order; then wait, and SIGKILL whatever is still running after 30 s."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class DaskCluster:
    """`dask scheduler` and `workers` x `dask worker --nthreads 1`, on this machine, for one way."""

    def __init__(self, folder: Path, workers: int = 2) -> None:
        self.folder = folder
        self.workers = workers
        self.processes: list[subprocess.Popen] = []
        self.address = ""

    def __enter__(self) -> DaskCluster:
        self.folder.mkdir(parents=True)
        scheduler_file = self.folder / "scheduler.json"
        env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
        log = (self.folder / "cluster.log").open("ab")
        # a free port rather than 8786: another cluster may be running on this machine
        common = ["--host", "127.0.0.1", "--no-dashboard", "--scheduler-file", str(scheduler_file)]
        self.processes.append(subprocess.Popen([str(BIN / "dask"), "scheduler", "--port", "0", *common],
                                               cwd=REPO_ROOT, env=env, stdout=log, stderr=log))
        for _ in range(self.workers):  # workers grade with the checkout they run in
            self.processes.append(subprocess.Popen([str(BIN / "dask"), "worker", "--nthreads", "1", *common],
                                                   cwd=REPO_ROOT, env=env, stdout=log, stderr=log))
        log.close()
        # the clock starts once every worker has joined, so start-up is not counted as grading
        wait = (f"from distributed import Client\n"
                f"with Client(scheduler_file={str(scheduler_file)!r}, timeout=120) as client:\n"
                f"    client.wait_for_workers({self.workers}, timeout=120)\n")
        done = subprocess.run([sys.executable, "-c", wait], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            self.__exit__()
            raise RuntimeError(f"the Dask cluster did not start:\n{done.stderr[-2000:]}")
        self.address = json.loads(scheduler_file.read_text())["address"]
        return self

    def __exit__(self, *exc: object) -> None:
        stop(list(reversed(self.processes)))  # workers first, so none reconnects to a new scheduler

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]


class GradingService:
    """`python -m autograder serve` on a private socket, for one way; ready before the clock starts."""

    def __init__(self, folder: Path, assignment: str) -> None:
        self.folder, self.assignment = folder, assignment
        self.socket = folder / "service.sock"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> GradingService:
        self.folder.mkdir(mode=0o700, parents=True)
        log = self.folder / "service.log"
        with log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "autograder", "serve", "--socket", str(self.socket),
                                             "--assignment", self.assignment], cwd=REPO_ROOT, stdout=out, stderr=out)
        deadline = time.monotonic() + 120
        while b"ready" not in log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"the grading service did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        stop([self.process] if self.process is not None else [])

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "AUTOGRADER_SERVICE": str(self.socket)}


# --- the floor ---------------------------------------------------------------------------------------------


def floor_seconds(repeats: int, assignment: str = DEFAULT_ASSIGNMENT) -> list[float]:
    """The hidden suites against the reference module, in this process; the first run warms it up."""
    import torch

    from autograder.judging.judge import run_suite
    from autograder.grading.rubric import load_rubric
    from autograder.model.submission import ModuleSubmission
    import importlib

    reference = importlib.import_module(f"solutions.{assignment}")

    torch.set_num_threads(1)  # as grading does
    rubric = load_rubric(assignment)
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        outcomes = run_suite(rubric.suite_files(), ModuleSubmission(reference), rubric.part_names)
        times.append(time.perf_counter() - started)
        failed = [o.name for o in outcomes if not o.passed]
        if failed or not outcomes:
            raise RuntimeError(f"the reference fails its own suite: {failed[:3]}")
    return times[1:]


def measure_floor(repeats: int, assignment: str) -> list[float]:
    """floor_seconds in a fresh process that can import the reference (`solutions` is not installed)."""
    code = f"import json; from autograder.authoring.benchmark import floor_seconds; print(json.dumps(floor_seconds({repeats}, {assignment!r})))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"measuring the floor failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- results ---------------------------------------------------------------------------------------------


def scores_from_folder(folder: Path) -> dict[str, float]:
    return {p.stem: json.loads(p.read_text())["score"] for p in folder.glob("*.json")}


def scores_from_gradebook(course: Course) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(course.env["AUTOGRADER_DB_URL"]) as gradebook:
        return {s.student.id: s.score for s in gradebook.assignment_submissions(course.assignment)}


def _mb(value: int) -> str:
    return f"{value / 2**20:,.0f} MB"


def floor_per_submission(floor: list[float], cores: int) -> float:
    """The floor on the machine's cores: the median of one core's runs, shared among the cores (0 when none)."""
    return statistics.median(floor) / cores if floor and cores else 0.0


def format_table(ways: list[Way], count: int, floor: list[float] = (), cores: int = 1) -> str:
    """Seconds per submission, how many times faster than the first way (nbgrader's default), how many times
    the floor on `cores` cores (floor_per_submission) it takes, peak memory."""
    baseline = ways[0].seconds / count if ways and ways[0].seconds else 0.0
    least = floor_per_submission(list(floor), cores)
    width = max(len(w.name) for w in ways)
    lines = [f"{'way':<{width}}  {'s/submission':>12}  {'x faster':>8}  {'x floor':>7}  {'peak memory (Pss)':>17}"]
    for way in ways:
        if way.skipped:
            lines.append(f"{way.name:<{width}}  skipped: {way.skipped}")
            continue
        per = way.seconds / count
        ratio = f"x{baseline / per:.2f}" if baseline and per else "-"
        above = f"x{per / least:.2f}" if least else "-"
        lines.append(f"{way.name:<{width}}  {per:>12.2f}  {ratio:>8}  {above:>7}  {_mb(way.peak):>17}")
    return "\n".join(lines)


def format_notes(ways: list[Way], floor: list[float], count: int, cores: int = 1) -> str:
    lines = []
    for way in ways:
        if way.halves and not way.skipped:
            first, second = way.halves
            lines.append(f"{way.name}: peak {_mb(first)} while grading the first half of the class, "
                         f"{_mb(second)} for the second half")
    baseline = ways[0].seconds / count if ways and ways[0].seconds and count else 0.0
    for way in ways:
        if way.steady and not way.skipped:
            first, rate = way.steady
            ratio = f" (x{baseline / rate:.2f} against the first way)" if baseline and rate else ""
            lines.append(f"{way.name}: first result after {first:.1f} s (start-up), then {rate:.2f} s per "
                         f"submission{ratio}")
    for way in ways:
        if len(way.commands) > 1 and not way.skipped:
            lines.append(f"{way.name}: one command {way.commands[0]:.2f} s wall (the first); "
                         f"median {statistics.median(way.commands):.2f} s, min {min(way.commands):.2f} s")
    measured = [w for w in ways if w.seconds and not w.skipped]
    if measured:
        share = max(w.sampler_cpu / w.seconds for w in measured)
        lines.append(f"memory sampling took at most {share:.1%} of one core's time during a way")
    if floor:
        lines.append(f"floor (the hidden suites' own computations on the reference, one warm process, "
                     f"{len(floor)} runs): min {min(floor):.2f} s, median {statistics.median(floor):.2f} s "
                     f"per submission on one core, {floor_per_submission(floor, cores):.2f} s on {cores} (the "
                     "table's 'x floor')")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from autograder.authoring.assignment import assignment_names

    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("count", nargs="?", type=int, default=DEFAULT_COUNT, metavar="N", help="notebooks (default 24)")
    parser.add_argument("--assignment", default=DEFAULT_ASSIGNMENT, choices=assignment_names())
    parser.add_argument("--ordinary", action="store_true",
                        help="an ordinary nbgrader assignment instead: nbgrader's own Execute against the kit's sandbox")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("N must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="autograder-benchmark-"))
    try:
        return _run_ordinary(work, args.count) if args.ordinary else _run(work, args.count, args.assignment)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(work: Path, count: int, assignment: str) -> int:
    notebooks = write_class(work / "class", count, assignment)
    log = work / "commands.log"
    kit = [sys.executable, "-m", "autograder"]
    ways: list[Way] = []
    print(f"{count} notebooks ({(count + 1) // 2} reference, {count // 2} with one bug each)", file=sys.stderr)

    ways.append(nbgrader_way("nbgrader autograde, default kernel execution", work / "plain", notebooks, True, log, assignment))
    ways.append(nbgrader_way("kit through nbgrader autograde", work / "kit", notebooks, False, log, assignment))
    out = work / "out-grade"
    ways.append(measure(Way("kit: python -m autograder grade FILE, per file"),
                        [[*kit, "grade", str(n), "--assignment", assignment, "-o", str(out / f"{n.stem}.json")] for n in notebooks], log,
                        cwd=REPO_ROOT))
    out = work / "out-served"
    served = Way("kit: grade FILE per file, through `serve`")
    try:
        with GradingService(work / "service", assignment) as service:
            measure(served, [[*kit, "grade", str(n), "--assignment", assignment, "-o", str(out / f"{n.stem}.json")]
                             for n in notebooks], log, cwd=REPO_ROOT, env=service.env, also=[service.process.pid])
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        served.skipped = f"failed ({str(exc).splitlines()[0][:80]})"
        shutil.rmtree(out, ignore_errors=True)
    ways.append(served)
    out = work / "out-jobs"
    ways.append(measure(Way("kit: grade-all --jobs 2"), [[*kit, "grade-all", str(work / "class"), "--assignment", assignment, "-o", str(out),
                                                          "--jobs", "2"]], log, cwd=REPO_ROOT,
                        progress=json_results(out), class_size=count))
    dask = Way("kit: grade-all --scheduler (Dask, 2 workers)")
    if not grade_all_supports("--scheduler"):
        dask.skipped = "this grade-all has no --scheduler option"
    else:
        out = work / "out-dask"
        try:
            with DaskCluster(work / "dask") as cluster:
                measure(dask, [[*kit, "grade-all", str(work / "class"), "--assignment", assignment, "-o", str(out), "--scheduler",
                                cluster.address]], log, cwd=REPO_ROOT, also=cluster.pids, progress=json_results(out),
                        class_size=count)
        except RuntimeError as exc:  # the newest way: its failure should not cost the other rows
            print(exc, file=sys.stderr)
            dask.skipped = f"failed ({str(exc).splitlines()[0][:80]})"
            shutil.rmtree(out, ignore_errors=True)
    ways.append(dask)
    floor = measure_floor(5, assignment)

    print(f"\n{count} notebooks, one run of each way, seconds per submission (wall time of the whole class / {count})")
    cores = len(os.sched_getaffinity(0))
    print(format_table(ways, count, floor, cores))
    print(format_notes(ways, floor, count, cores))
    print(_agreement(work, assignment))
    return 0


def ordinary_course(root: Path, count: int, kit: bool) -> Course:
    """A course of the ordinary assignment (autograder.authoring.ordinary_samples) whose submitted/ holds `count`
    students, handing in its class's answers in turn (but the one that loops until its timeout, which would
    time the timeout): with nbgrader's own configuration, or the same with the kit enabled."""
    from autograder.authoring import ordinary_samples

    course = Course(root, ordinary_samples.ASSIGNMENT, config_dir=root)
    root.mkdir(parents=True)
    config = PLAIN_NBGRADER_CONFIG.format(root=str(course.root))
    if kit:
        config += "from autograder.nbgrader.course import enable\nenable(c)\n"
    (root / "nbgrader_config.py").write_text(config)
    course.env["AUTOGRADER_DB_URL"] = f"sqlite:///{course.root / 'gradebook.db'}"
    ordinary_samples.write_source(course.root)
    course.nbgrader("generate_assignment", course.assignment, "--force")
    handed_in = ordinary_samples.write_submissions(course.root, course.root / "release" / course.assignment /
                                                   f"{course.assignment}.ipynb")
    variants = sorted(set(handed_in) - {"erin"})
    for i in range(count):
        source = course.root / "submitted" / variants[i % len(variants)]
        shutil.copytree(source, course.root / "submitted" / f"s{i:03d}")
    for student in handed_in:
        shutil.rmtree(course.root / "submitted" / student)
    return course


def _run_ordinary(work: Path, count: int) -> int:
    ways: list[Way] = []
    courses = {}
    for name, kit in (("ordinary assignment: nbgrader autograde, nbgrader's Execute", False),
                      ("ordinary assignment: nbgrader autograde with the kit (sandboxed)", True)):
        course = courses[kit] = ordinary_course(work / ("kit" if kit else "plain"), count, kit)
        command = [sys.executable, "-m", "nbgrader", "autograde", course.assignment, "--force", "--create"]
        ways.append(measure(Way(name), [command], work / "commands.log", cwd=course.root, env=course.env))
    print(f"\n{count} notebooks of an ordinary nbgrader assignment, one run of each way, seconds per submission")
    print(format_table(ways, count))
    plain, kit = scores_from_gradebook(courses[False]), scores_from_gradebook(courses[True])
    print("grades: the two ways agree on every submission" if plain == kit else
          f"grades DIFFER: {sorted(s for s in plain if plain[s] != kit.get(s))}")
    return 0


def _agreement(work: Path, assignment: str) -> str:
    """The kit's ways must give every student the same grade; a difference is printed, not hidden."""
    by_way = {"nbgrader": scores_from_gradebook(Course(work / "kit", assignment))}
    for name in ("out-grade", "out-served", "out-jobs", "out-dask"):
        if (work / name).is_dir():
            by_way[name] = scores_from_folder(work / name)
    reference = by_way["out-grade"]
    differing = {name: sorted(s for s in scores.keys() | reference.keys()
                              if abs(scores.get(s, -1) - reference.get(s, -1)) > 1e-3)
                 for name, scores in by_way.items()}
    differing = {name: students for name, students in differing.items() if students}
    if not differing:
        return f"grades: the kit's {len(by_way)} ways agree on every submission"
    return "grades DIFFER between the kit's ways: " + "; ".join(f"{k}: {v}" for k, v in differing.items())


if __name__ == "__main__":
    sys.exit(main())
