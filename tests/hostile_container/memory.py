# Six processes of 900 MB each, together far over the submission's memory: each a fresh interpreter (so that
# no process's own address-space limit stops it), or the forked process itself where exec is refused.  Each
# says on a pipe when it holds its memory, and the cell waits for that, so the bound is crossed before grading
# goes on, however slowly the machine starts them.
import os, select, sys, time
HOG = ("import os, sys, time\nhog = b'x' * (900 << 20)\nos.write(int(sys.argv[1]), b'!')\ntime.sleep(60)")
read, write = os.pipe()
os.set_inheritable(write, True)
started = 0
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(sys.executable, [sys.executable, "-c", HOG, str(write), "__TOKEN__"])
        except BaseException:
            pass
        try:
            hog = b"x" * (900 << 20)
            os.write(write, b"!")
            time.sleep(60)
        finally:
            os._exit(0)
    started += 1
os.close(write)
holding, deadline = 0, time.monotonic() + 8
while holding < started and time.monotonic() < deadline:
    if select.select([read], [], [], max(deadline - time.monotonic(), 0))[0]:
        chunk = os.read(read, 16)
        if not chunk:
            break
        holding += len(chunk)
raise RuntimeError("MEMORY %d started, %d holding" % (started, holding))
