"""The client of the warm grading service (autograder.commands.serve): `python -m autograder grade`, when
AUTOGRADER_SERVICE names a socket, sends its arguments there instead of grading.  It imports neither torch nor
pytest, nor the server, so it costs a few tenths of a second."""
from __future__ import annotations

import os
import signal
import socket
import sys
import time

from autograder import protocol
from autograder.model.interrupts import Terminated, raise_terminated

VARIABLE = "AUTOGRADER_SERVICE"
REQUEST_SECONDS = 10.0  # to send a request, or to answer a stop



def grade_through(path: str, argv: list[str]) -> int | None:
    """The exit status of `grade argv` run by the service at `path`, its output printed here; None (after a
    one-line notice) when there is no usable service and this process should grade by itself."""
    def unusable(why: str) -> None:
        print(f"python -m autograder: no grading service at {path} ({why}); grading here", file=sys.stderr)

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(REQUEST_SECONDS)
        sock.connect(path)
        protocol.send(sock, {"argv": argv, "cwd": os.getcwd(), "assignment": os.environ.get("AUTOGRADER_ASSIGNMENT")})
        sock.settimeout(None)
    except OSError as exc:
        sock.close()
        return unusable(exc.strerror or type(exc).__name__)
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        try:
            reply, _ = protocol.recv(sock, max_payload=0)  # as long as grading takes: the service keeps the limits
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM here: the service stops the grading and says so
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
            protocol.send(sock, {"stop": stop})
            reply, _ = protocol.recv(sock, time.monotonic() + REQUEST_SECONDS, max_payload=0)
    except (OSError, EOFError, protocol.ProtocolError, protocol.Timeout) as exc:
        print(f"python -m autograder: the grading service at {path} stopped answering ({type(exc).__name__}); "
              "whether it wrote a grade is unknown", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    if type(reply.get("refused")) is str:
        return unusable(reply["refused"])
    code, out, err = reply.get("code"), reply.get("stdout"), reply.get("stderr")
    if type(code) is not int or type(out) is not str or type(err) is not str:
        print(f"python -m autograder: malformed answer from the grading service at {path}", file=sys.stderr)
        return 1
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code
