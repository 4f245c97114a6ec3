"""run_autograder's trusted half: it runs the grader (autograder/platforms/gradescope_run.py) and is the only one
that writes ROOT/results/results.json.

    python -m autograder.platforms.gradescope_supervisor --root /autograder --assignment NAME --visibility WHEN
        --max-score POINTS --timeout SECONDS [--allow-unisolated]

The submission runs inside the grader's process tree.  Isolated, it sees neither this process nor the results
folder.  Graded without the sandbox (--allow-unisolated, on a machine that refuses one), only a uid stands between
them.  So that the result kept is always one the grader wrote:

- Each run draws a token (secrets.token_hex) and hands it to the grader on a pipe, so it is in no environment,
  argument or file.  The grader writes its results.json, token inside, to an unnamed file whose descriptor only
  it and this process hold.  Before grading it makes itself non-dumpable, so no process of its uid can open its
  descriptors or read its memory.
- Run as root (as on Gradescope), grading without the sandbox runs the grader under a uid of its own, on a copy
  of the kit and the submission that this uid may read but not change.  The submission runs as that uid too, so
  it can neither signal this process nor write ROOT/results, which is root's (0755).  With the sandbox, the
  grader stays root and each child gets a uid and namespaces of its own.
- This process is a child subreaper: whatever grading started stays below it, daemons that left their session
  included.  Once the grader has ended, all of it is killed, and only then is anything written.
- A result is kept when the grader exited 0 and the result carries the token.  Otherwise the result is a 0 that
  says why.  The file written is read back and checked once more at the very end.

Run by an ordinary user (outside Gradescope), the grader and the submission run as that user, and the token and
the subreaper are all that protect the result.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autograder.host.sandbox import isolation_refused
from autograder.grading.results_json import VISIBILITIES, fenced, write_json_atomic

PR_SET_CHILD_SUBREAPER = 36
GRADER_UID_BASE = 1 << 29  # + this process's pid: a uid no other grading has (sandboxes get 2**30 + their pid)
KILL_AFTER = 10.0          # seconds a grader stopped by SIGTERM has to close its sandboxes before SIGKILL
SWEEP_SECONDS = 10.0       # seconds to kill what grading left behind
NOT_YOURS = ("This is a fault of the grading setup, not of your notebook: your instructor can see the details in "
             "the autograder log.")
SEE_LOG = "Your instructor can see the details in the autograder log."
NOT_THE_GRADERS = "results.json was not written by the grader"


def log(message: str) -> None:
    print(f"run_autograder: {message}", flush=True)


# --- this process and the results folder -----------------------------------------------------------------

def become_subreaper() -> None:
    """Orphans of the grading (a double-forked daemon) become this process's children, not init's, so that
    `end_descendants` finds them."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def guard_results_folder(results: Path) -> None:
    """ROOT/results root's and 0755, and ROOT writable by its owner only: a submission graded under another uid
    can neither write, replace nor rename anything there."""
    results.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(results, 0, 0)
    results.chmod(0o755)
    results.parent.chmod(results.parent.stat().st_mode & 0o7755)


# --- the grader --------------------------------------------------------------------------------------------

def special_files(folder: str, names: list[str]) -> list[str]:
    """What copytree must skip: FIFOs, sockets and devices, which it would block on or fail to copy."""
    return [name for name in names if not (os.path.islink(path := os.path.join(folder, name))
                                           or os.path.isfile(path) or os.path.isdir(path))]


def staged(root: Path, uid: int) -> Path:
    """What a grader running as `uid` reads (the kit in source/, the submission in submission/), copied where
    that uid may read it but not change it: root's files in a folder that only root and `uid`'s group may enter.
    home/ is the one place the grader may write to."""
    stage = Path(tempfile.mkdtemp(prefix="autograder-grading-"))
    for name in ("source", "submission"):
        shutil.copytree(root / name, stage / name, symlinks=True, ignore=special_files)
    for where, _, files in os.walk(stage):
        os.chmod(where, 0o755)
        for name in files:
            if not os.path.islink(os.path.join(where, name)):  # chmod would change what the link names
                os.chmod(os.path.join(where, name), 0o644)
    home = stage / "home"
    home.mkdir(mode=0o700)
    os.chown(home, uid, uid)
    os.chown(stage, 0, uid)
    stage.chmod(0o750)
    return stage


def start_grader(args: argparse.Namespace, root: Path, uid: int | None, allow_unisolated: bool,
                 token_fd: int, results_fd: int) -> subprocess.Popen:
    """The grader, on `root` (holding source/ and submission/), as `uid` when one is given."""
    kit = root / "source"
    command = [sys.executable, "-m", "autograder.platforms.gradescope_run", "--root", str(root),
               "--assignment", args.assignment, "--visibility", args.visibility,
               "--token-fd", str(token_fd), "--results-fd", str(results_fd)]
    command += ["--allow-unisolated"] if allow_unisolated else []
    env = {**os.environ, "PYTHONPATH": str(kit)}  # the kit in the zip, whatever else the interpreter has
    prepared = Path(sys.prefix) / "autograder-cache"  # what setup.sh computed once for every submission
    if prepared.is_dir():
        env.setdefault("AUTOGRADER_CACHE", str(prepared))
    identity: dict[str, Any] = {}
    if uid is not None:
        # its home is the one place it may write; no user site-packages the submission could plant code in
        env.update(HOME=str(root / "home"), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
        identity = {"user": uid, "group": uid, "extra_groups": []}
    return subprocess.Popen(command, cwd=kit, env=env, stdin=subprocess.DEVNULL, pass_fds=(token_fd, results_fd),
                            **identity)


def how_it_ended(code: int) -> str:
    if code >= 0:
        return f"it stopped with exit status {code}"
    try:
        return f"it was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"it was killed by signal {-code}"


def wait_for(grader: subprocess.Popen, timeout: int) -> str | None:
    """None when the grader exited 0, else why it did not finish (the student's words; the log has the rest)."""
    try:
        code = grader.wait(timeout)
    except subprocess.TimeoutExpired:
        grader.terminate()  # SIGTERM: the grader closes its sandboxes and writes no grade
        try:
            grader.wait(KILL_AFTER)
        except subprocess.TimeoutExpired:
            grader.kill()
            grader.wait()
        log(f"stopped the grader after {timeout} seconds")
        return f"grading did not finish within {timeout} seconds. {NOT_YOURS}"
    if code == 0:
        return None
    log(f"the grader did not finish: {how_it_ended(code)}")
    return f"the grader did not finish: {how_it_ended(code)}. {SEE_LOG}"


def run_grader(args: argparse.Namespace, root: Path, uid: int | None, allow_unisolated: bool,
               token: str) -> tuple[str | None, bytes]:
    """Runs the grader to its end; returns (None, or why it did not finish; what it wrote as results.json)."""
    token_read, token_write = os.pipe()
    os.write(token_write, token.encode())  # 64 bytes: far less than a pipe holds, so this never blocks
    os.close(token_write)
    # unnamed (O_TMPFILE): reachable only through this process's descriptor and the grader's
    with tempfile.TemporaryFile() as written:
        try:
            grader = start_grader(args, root, uid, allow_unisolated, token_read, written.fileno())
        except (OSError, subprocess.SubprocessError) as exc:
            log(f"the grader could not start: {exc}")
            return f"the grader could not start. {NOT_YOURS}", b""
        finally:
            os.close(token_read)
        why = wait_for(grader, args.timeout)
        written.seek(0)
        return why, written.read()


# --- what grading left behind ------------------------------------------------------------------------------

def descendants() -> list[int]:
    """Every living process below this one; orphans of the grading are among them (this is their subreaper)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]  # after the command's name, which may hold anything
        if state not in ("Z", "X"):
            children.setdefault(int(ppid), []).append(int(entry.name))
    found, todo = [], [os.getpid()]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def reap() -> None:
    """Waits for this process's ended children, which include the grading's orphans."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def end_descendants() -> None:
    """Kills every process grading left behind, until none is left: one may fork while this looks."""
    deadline = time.monotonic() + SWEEP_SECONDS
    while (left := descendants()) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        reap()
    reap()  # none left alive: the zombies are all this process's children now
    if left:
        log(f"{len(left)} processes of the grading did not die within {SWEEP_SECONDS:g} s: {left[:10]}")


# --- the result ----------------------------------------------------------------------------------------------

def not_graded(args: argparse.Namespace, reason: str, seconds: float, token: str) -> dict[str, Any]:
    """results.json for a run without a grade: 0 points, and why (as gradescope_run.not_graded words it)."""
    return {"score": 0, "max_score": args.max_score, "execution_time": round(seconds, 2),
            "output": fenced(f"Not graded: {reason}"), "output_format": "md", "visibility": args.visibility,
            "stdout_visibility": "hidden", "tests": [],
            "extra_data": {"assignment": args.assignment, "not_graded": reason, "run_token": token}}


def verified(written: bytes, token: str) -> dict[str, Any] | None:
    """The grader's results.json when it carries this run's token, else None."""
    try:
        report = json.loads(written)
    except ValueError:
        return None
    extra = report.get("extra_data") if isinstance(report, dict) else None
    mark = extra.get("run_token") if isinstance(extra, dict) else None
    return report if isinstance(mark, str) and hmac.compare_digest(mark, token) else None


def holds(path: Path, report: dict[str, Any]) -> bool:
    """Whether `path` still says exactly `report` (which carries the token)."""
    try:
        return json.loads(path.read_bytes()) == report
    except (OSError, ValueError):
        return False


def graded(args: argparse.Namespace, token: str, started: float) -> dict[str, Any]:
    """Runs the grader, kills what it left, and returns its result, or a 0 that says why there is none."""
    uid, stage = None, None
    allow_unisolated = args.allow_unisolated and os.geteuid() != 0  # a root grader never runs a submission bare
    if os.geteuid() == 0 and args.allow_unisolated and (refused := isolation_refused()):
        uid, allow_unisolated = GRADER_UID_BASE + os.getpid(), True
        log(f"this machine allows no sandbox ({refused}): the grader runs as uid {uid}, on a copy of the kit "
            "and the submission that it cannot change")
    try:
        if uid is not None:
            stage = staged(args.root, uid)
        why, written = run_grader(args, stage or args.root, uid, allow_unisolated, token)
    except OSError as exc:  # the copy, the pipe or the unnamed file
        log(f"the grader could not start: {exc}")
        why, written = f"the grader could not start. {NOT_YOURS}", b""
    finally:
        end_descendants()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
    if why is None and (report := verified(written, token)) is not None:
        return report
    if why is None:
        log(f"the grader exited 0, but what it wrote ({len(written)} bytes) does not carry this run's token")
        why = NOT_THE_GRADERS
    return not_graded(args, why, time.monotonic() - started, token)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.platforms.gradescope_supervisor",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/autograder"),
                        help="Gradescope's folder, holding source/, submission/ and results/")
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--visibility", choices=VISIBILITIES, default="visible")
    parser.add_argument("--max-score", type=float, required=True, help="the points of a 0 written here")
    parser.add_argument("--timeout", type=int, default=540, help="seconds the grader may run")
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="grade without the sandbox where this machine refuses one (every result says so)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    token = secrets.token_hex(32)
    results = args.root / "results" / "results.json"
    guard_results_folder(results.parent)
    become_subreaper()
    report = graded(args, token, started)
    write_json_atomic(results, report)
    if not holds(results, report):  # nothing of the grading is left to write it; checked all the same
        log("results.json changed after it was written: replaced by a 0")
        write_json_atomic(results, not_graded(args, NOT_THE_GRADERS, time.monotonic() - started, token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
