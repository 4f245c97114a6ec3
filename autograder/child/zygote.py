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

One zygote can serve several grading processes (grade-all's workers): the grader that started it sends
{"attach": true} with one end of a new control socket, and hands the other end to a worker, which then asks
for children on it like the grader would.  Each control socket hears only of its own children, and when one
closes, its children are killed; when the first one closes, everything ends.
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Iterable

PR_SET_PDEATHSIG = 1
MAX_CONTROL_BYTES = 1 << 20


def parent_death_signal() -> None:
    """SIGKILL this process when its parent dies: a zygote outliving its grader, or a child outliving its
    zygote, would go on running with no one to stop it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _send(control: socket.socket, message: dict) -> None:
    control.send(json.dumps(message).encode())  # one datagram: the socket is SOCK_SEQPACKET


def _reap(owners: dict[int, socket.socket]) -> None:
    while owners:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control = owners.pop(pid)
        try:
            _send(control, {"exited": pid, "status": status})
        except OSError:
            pass  # the grading process that asked for it is gone


def _kill_all(children: Iterable[int]) -> None:
    for pid in children:
        for kill in (os.killpg, os.kill):  # the group once the child has called setsid(), the child before
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _preload(modules: Iterable[str]) -> None:
    """Imports what the grader says this child's assignment reaches lazily (the rubric's `preload`), once: every
    later child inherits it.  One that fails to import is left for the child to fail on, where it is reported."""
    missing = [name for name in modules if name not in sys.modules]
    for name in missing:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the child meets the same error in its own time, and says so
            traceback.print_exc()
    if missing:
        from autograder.child import forbidden, provenance

        provenance.neutralise_private(forbidden.refuse_route)  # what they imported of torch's private code too
        gc.freeze()  # as prepare() does: out of the collector's sight, shared with every child


def _spawn(request: dict, fds: list[int]) -> int:
    from autograder.child import forbidden

    _preload(request["spawn"].get("preload", ()))
    forbidden_ops = request["spawn"].get("forbidden_ops", ())
    forbidden.kernel_plan(tuple(sorted(forbidden_ops)))  # inherited by the child
    forbidden.python_plan(forbidden_ops)  # so is this, after the preload: worked out from what the child holds
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
    return pid


def serve(first: socket.socket) -> None:
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up pipe hears of every exit
    controls = [first]
    owners: dict[int, socket.socket] = {}  # child pid -> the control socket that asked for it
    try:
        while True:
            ready, _, _ = select.select([*controls, wake_read], [], [])
            if wake_read in ready:
                while True:
                    try:
                        if not os.read(wake_read, 4096):
                            break
                    except BlockingIOError:
                        break
                _reap(owners)
            for control in (c for c in controls if c in ready):
                data, fds, _, _ = socket.recv_fds(control, MAX_CONTROL_BYTES, 4)
                if not data:
                    if control is first:
                        return  # the grader that started it is gone
                    controls.remove(control)
                    _kill_all(pid for pid, owner in owners.items() if owner is control)
                    control.close()
                    continue
                request = json.loads(data)
                if request.get("attach") and control is first and len(fds) == 1:
                    controls.append(socket.socket(fileno=fds[0]))
                    continue
                if "spawn" not in request:
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = _spawn(request, fds)
                owners[pid] = control
                for fd in fds:
                    os.close(fd)
                try:
                    _send(control, {"pid": pid})
                except OSError:  # asked for by a grading process that is gone since
                    _kill_all([pid])
    finally:
        _kill_all(owners)


def main() -> None:
    """argv: the control socket's descriptor, and the grader's {"hidden": [...], "imports": [...]} (the
    bootstrap already made sys.path the kit's root and those import folders)."""
    control = socket.socket(fileno=int(sys.argv[1]))
    parent_death_signal()
    from autograder.child.serve import prepare

    seen = json.loads(sys.argv[2])
    # torch and every module a child needs, imported once here instead of once per submission
    prepare(tuple(seen["hidden"]), tuple(seen["imports"]))
    _send(control, {"ready": os.getpid()})
    serve(control)


if __name__ == "__main__":
    main()
