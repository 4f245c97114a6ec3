"""A warm grading service: one trusted process that has imported torch and the judge, collected the hidden
suites and started its zygote once, and then grades one `python -m autograder grade` after another.

    python -m autograder serve --socket PATH                              (left running)
    AUTOGRADER_SERVICE=PATH python -m autograder grade FILE -o results.json   (as often as needed)

The command line, seeing AUTOGRADER_SERVICE, sends its arguments, working directory and AUTOGRADER_ASSIGNMENT
over the socket instead of grading; the service runs the command line's own `grade` on them in its process
(same checks, outputs, messages and exit status) and sends back what it printed and the exit status.  One
request at a time.  The client imports neither torch nor pytest, so it costs a few tenths of a second.

Trust: the socket is in a folder only its owner may enter, and the service answers its own user only
(SO_PEERCRED).  It grades with the engine it started with: when the engine's files have changed since, it
refuses, and the client grades by itself (an edited suite or rubric is picked up as the warm judge always
does).  A client stopped by Ctrl-C or SIGTERM asks the service to stop that grading exactly as the signal
would have stopped the command line (no grade written); a client that vanishes is treated as SIGTERM.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import socket
import stat
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from autograder import protocol
from autograder.commands import UsageError
from autograder.commands.service_client import REQUEST_SECONDS, VARIABLE
from autograder.grading.result import display_name
from autograder.model.interrupts import Terminated, raise_terminated

HELP = f"keep a warm grader running: `grade` commands run with {VARIABLE}=SOCKET are graded by it"
MAX_ARGUMENTS = 200
STOPS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


class ServiceError(Exception):
    """The service cannot start here (socket folder not private, another service listening, ...)."""


def _listen(path: Path) -> socket.socket:
    folder = path.parent
    try:
        info = folder.stat()
    except OSError as exc:
        raise ServiceError(f"{folder}: {exc.strerror}") from None
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise ServiceError(f"{folder}: the socket's folder must be this user's own and private (chmod 700)")
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ServiceError(f"{path}: exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise ServiceError(f"{path}: a grading service already listens there")
        except OSError:
            path.unlink()  # left by a service that ended without removing it
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(16)
    return listener


def _peer_uid(conn: socket.socket) -> int:
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


def _request(conn: socket.socket) -> tuple[list[str], str, str | None]:
    """(argv, working directory, AUTOGRADER_ASSIGNMENT) of a well-formed `grade` request; ValueError otherwise."""
    header, _ = protocol.recv(conn, time.monotonic() + REQUEST_SECONDS, max_payload=0)
    argv, cwd, assignment = header.get("argv"), header.get("cwd"), header.get("assignment")
    if (type(argv) is not list or not 0 < len(argv) <= MAX_ARGUMENTS or not all(type(a) is str for a in argv)
            or type(cwd) is not str or not (assignment is None or type(assignment) is str)):
        raise ValueError("malformed request")
    if argv[0] != "grade":
        raise ValueError("the service runs `grade` only")
    return argv, cwd, assignment


class _Stopper:
    """Turns a client's stop request into the exception its signal would have raised in the command line, in
    the main thread, and only while that client's grading runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.grading = False
        self.signum: int | None = None
        self.main = threading.main_thread().ident

    def handle(self, signum: int, frame: Any) -> None:  # the SIGUSR1 handler
        if not self.grading or self.signum is None:
            return  # a stop that arrived as the grading ended: the grade stands
        self.grading = False
        if self.signum == signal.SIGTERM:
            raise Terminated()
        raise KeyboardInterrupt()

    def watch(self, conn: socket.socket) -> None:
        """Waits for the client's stop request, or its going away (as SIGTERM)."""
        try:
            header, _ = protocol.recv(conn, max_payload=0)
            signum = STOPS.get(header.get("stop"), signal.SIGTERM)
        except (OSError, EOFError, protocol.ProtocolError, protocol.Timeout):
            signum = signal.SIGTERM
        with self.lock:
            if self.grading:
                self.signum = signum
                signal.pthread_kill(self.main, signal.SIGUSR1)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self.signum = None
        self.grading = True
        try:
            yield
        finally:
            with self.lock:
                self.grading = False


@contextlib.contextmanager
def _as_client(cwd: str, assignment: str | None) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The client's working directory and assignment, and its printed output captured, for one request."""
    here = os.getcwd()
    previous = os.environ.get("AUTOGRADER_ASSIGNMENT")
    out, err = io.StringIO(), io.StringIO()
    os.chdir(cwd)
    if assignment is None:
        os.environ.pop("AUTOGRADER_ASSIGNMENT", None)
    else:
        os.environ["AUTOGRADER_ASSIGNMENT"] = assignment
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        os.chdir(here)
        if previous is None:
            os.environ.pop("AUTOGRADER_ASSIGNMENT", None)
        else:
            os.environ["AUTOGRADER_ASSIGNMENT"] = previous


def _serve_one(conn: socket.socket, run: Callable[[list[str]], int], stopper: _Stopper, started_with: bytes,
               log: Callable[[str], None]) -> None:
    from autograder.model.code_version import package_digest

    if _peer_uid(conn) != os.getuid():
        log("refused a connection from another user")
        return
    try:
        argv, cwd, assignment = _request(conn)
    except (ValueError, OSError, EOFError, protocol.ProtocolError, protocol.Timeout) as exc:
        log(f"refused a request ({exc or type(exc).__name__})")
        with contextlib.suppress(OSError):
            protocol.send(conn, {"refused": str(exc) or type(exc).__name__})
        return
    if package_digest() != started_with:
        log("refused a request: the engine changed since the service started; restart it")
        protocol.send(conn, {"refused": "the kit's engine changed since the service started; restart it"})
        return
    began = time.monotonic()
    watcher = threading.Thread(target=stopper.watch, args=(conn,), daemon=True, name="client-watcher")
    with _as_client(cwd, assignment) as (out, err):
        with stopper.running():
            watcher.start()
            try:
                code = run(argv)
            except SystemExit as exc:  # argparse refusing the arguments: one line on stderr, exit 2
                code = exc.code if type(exc.code) is int else 1
            except KeyboardInterrupt:  # a stop that landed outside the command line's own handling
                code = 128 + (stopper.signum or signal.SIGINT)
            except Exception as exc:  # noqa: BLE001 - the kit's own bug: said to this client, the service goes on
                print(f"python -m autograder: internal error ({type(exc).__name__}: {exc})", file=sys.stderr)
                code = 1
    log(f"grade {' '.join(display_name(arg) for arg in argv[1:])}: exit {code} in {time.monotonic() - began:.1f} s")
    with contextlib.suppress(OSError):
        protocol.send(conn, {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
        conn.shutdown(socket.SHUT_RDWR)
    watcher.join(timeout=REQUEST_SECONDS)
    if code == 128 + signal.SIGTERM and stopper.signum is None:
        raise Terminated()  # the SIGTERM was the service's own: it stops, after answering


def serve(path: Path, assignments: list[str], log: Callable[[str], None], grade: Callable[[list[str]], int]) -> int:
    """Runs until SIGTERM or Ctrl-C, answering each client's request with `grade` (the command line's own
    entry point, given by it); the socket is removed on the way out."""
    from autograder.host.sandbox import Zygote
    from autograder.model.code_version import package_digest

    listener = _listen(path)
    try:
        started_with = package_digest()
        Zygote.shared()  # torch on both sides at once
        from autograder.judging.judge import collect
        from autograder.grading.rubric import load_rubric

        for name in assignments:  # collected now rather than at the first request
            collect(load_rubric(name).suite_files())
        stopper = _Stopper()
        signal.signal(signal.SIGUSR1, stopper.handle)
        signal.signal(signal.SIGTERM, raise_terminated)
        log(f"grading service ready at {path}")
        while True:
            conn, _ = listener.accept()
            with conn:
                _serve_one(conn, grade, stopper, started_with, log)
    except KeyboardInterrupt:
        log("grading service stopped")
        return 0
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            path.unlink()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", type=Path, default=os.environ.get(VARIABLE) or None,
                        help=f"where to listen, in a folder only you may enter (default: ${VARIABLE})")
    parser.add_argument("--assignment", action="append", default=[], dest="assignments", metavar="ASSIGNMENT",
                        help="collect this assignment's suites at start (repeatable; others are collected when "
                             "first graded)")


def run(args: argparse.Namespace) -> int:
    from autograder.commands.main import main  # what the service runs for each request: the command line itself
    from autograder.grading.rubric import RubricError, load_rubric

    if args.socket is None:
        raise UsageError(f"serve needs --socket or ${VARIABLE}")
    os.environ.pop(VARIABLE, None)  # the service grades by itself, never through itself
    try:
        for name in args.assignments:
            load_rubric(name)
        return serve(args.socket, args.assignments, lambda line: print(line, file=sys.stderr, flush=True), main)
    except (RubricError, ServiceError) as exc:
        raise UsageError(str(exc)) from None
