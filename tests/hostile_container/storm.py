# A fork storm, stopped at 1000 processes so that an uncontained one does not take the machine down: each
# child sleeps for a minute.
import os, time
forked = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    forked += 1
raise RuntimeError("FORKED %d" % forked)
