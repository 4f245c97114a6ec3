# Six processes of 900 MB each, together far over the submission's memory: each a fresh interpreter (so that
# no process's own address-space limit stops it), or the forked process itself where exec is refused.
import os, sys, time
HOG = "import time\nhog = b'x' * (900 << 20)\ntime.sleep(60)"
started = 0
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(sys.executable, [sys.executable, "-c", HOG, "__TOKEN__"])
        except BaseException:
            pass
        try:
            hog = b"x" * (900 << 20)
            time.sleep(60)
        finally:
            os._exit(0)
    started += 1
time.sleep(3)
raise RuntimeError("MEMORY %d started" % started)
