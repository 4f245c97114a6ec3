# Memory past the submission's limit, every way a process can hold it: six forked processes of 512 MB each
# (the filter refuses new processes), memfds of 16 MB never mapped (refused: no address space counts them),
# then six threads of 512 MB each in its one address space, which RLIMIT_AS bounds before memory is taken.
import os, threading
started = 0
for _ in range(6):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        hog = b"x" * (512 << 20)
        os._exit(0)
    started += 1
memfds = []
for _ in range(192):
    try:
        fd = os.memfd_create("hoard")
        os.ftruncate(fd, 16 << 20)
        os.pwrite(fd, b"x" * (16 << 20), 0)
        memfds.append(fd)
    except OSError:
        break
held = []
def take():
    try:
        held.append(b"x" * (512 << 20))
    except MemoryError:
        pass
threads = []
for _ in range(6):
    thread = threading.Thread(target=take)
    try:  # a thread's stack is address space too: past RLIMIT_AS, no new thread starts
        thread.start()
        threads.append(thread)
    except RuntimeError:
        break
for thread in threads:
    thread.join()
raise RuntimeError("MEMORY %d started, %d memfds, %d threads holding" % (started, len(memfds), len(held)))
