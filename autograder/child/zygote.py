"""The warm untrusted side: one process that has imported torch and the child's code, and forks a fresh child
for each submission.

Started by autograder.host.sandbox (one per grading process) as `python -I -u -c ...` with one control socket.  It
never runs student code, never imports the hidden suites or the solutions, and holds nothing of any
submission: the cells reach each child over that child's own socket after the fork.  Children are forked from
this process only, never from one another, so what one submission did is invisible to the next.  Each child
then isolates itself exactly as a freshly started one would (autograder.child.serve), before its first student line.

The control socket carries, grader to zygote, {"spawn": config} with the child's socket and output pipe as
attached descriptors; zygote to grader, {"pid": n} for each spawn and {"exited": n, "status": s} when a child
ends (the zygote is its parent and reaps it).  When the grader goes away the zygote kills its children and
exits.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import sys
import traceback

PR_SET_PDEATHSIG = 1
MAX_CONTROL_BYTES = 1 << 20


def parent_death_signal() -> None:
    """SIGKILL this process when its parent dies: a zygote outliving its grader, or a child outliving its
    zygote, would go on running with no one to stop it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _send(control: socket.socket, message: dict) -> None:
    control.send(json.dumps(message).encode())  # one datagram: the socket is SOCK_SEQPACKET


def _reap(control: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(control, {"exited": pid, "status": status})


def _kill_all(children: set[int]) -> None:
    for pid in children:
        for kill in (os.killpg, os.kill):  # the group once the child has called setsid(), the child before
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def serve(control: socket.socket) -> None:
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up pipe hears of every exit
    children: set[int] = set()
    try:
        while True:
            ready, _, _ = select.select([control, wake_read], [], [])
            if wake_read in ready:
                while True:
                    try:
                        if not os.read(wake_read, 4096):
                            break
                    except BlockingIOError:
                        break
                _reap(control, children)
            if control not in ready:
                continue
            data, fds, _, _ = socket.recv_fds(control, MAX_CONTROL_BYTES, 4)
            if not data:
                return  # the grader is gone
            request = json.loads(data)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = 70
                try:
                    from autograder.child.serve import start_forked

                    start_forked(request["spawn"], fds)
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:  # noqa: BLE001 - said on the child's own output, which the judge keeps
                    traceback.print_exc()
                finally:
                    os._exit(code)
            children.add(pid)
            for fd in fds:
                os.close(fd)
            _send(control, {"pid": pid})
    finally:
        _kill_all(children)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    parent_death_signal()
    from autograder.child.serve import prepare

    prepare()  # torch and every module a child needs, imported once here instead of once per submission
    _send(control, {"ready": os.getpid()})
    serve(control)


if __name__ == "__main__":
    main()
