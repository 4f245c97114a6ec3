# Leaves what a grade must not: its supervisor blinded where the kernel lets it (no descriptor left: what a
# prlimit on it can do), a setsid daemon, a fork-only daemon and spinners in sessions of their own, and a
# scratch folder nested deeper than a recursive walk goes, with every permission taken away, its own included.
import os, resource, time


def make_unremovable(top, outside):
    """Folders nested past any recursive walk, every mode taken away from the bottom up, the top last."""
    os.chdir(top)
    os.makedirs("a/b/c")
    open("a/b/c/f", "w").write("x")
    os.symlink(outside, "a/out")  # a link out, to a folder a careless walk would chmod or empty
    os.mkfifo("a/fifo")
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    open("bottom", "w").write("x")
    os.chmod("bottom", 0)
    for _ in range(1500):
        os.chdir("..")
        os.chmod("d", 0)
    for path, mode in (("a/b/c/f", 0), ("a/b/c", 0), ("a/b", 0o200), ("a", 0o1000), (".", 0)):
        os.chmod(path, mode)
    return "made"


# --- what the submission does (tests/test_scratch.py takes only the function above)
blinded = "no supervisor in reach"
if os.getppid() > 1:  # tier 2's supervisor (tier 1's is outside the sandbox's PID namespace)
    try:
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (0, 0))
        blinded = "supervisor blinded"
    except OSError as exc:
        blinded = "prlimit refused: " + exc.strerror
started = 0


def fork():
    """os.fork, or None where the sandbox refuses new processes (its seccomp filter: one process per sandbox)."""
    global started
    try:
        pid = os.fork()
    except OSError:
        return None
    started += pid != 0
    return pid


for session in (True, False):  # a setsid daemon, and a fork-only one
    if fork() == 0:
        if session:
            os.setsid()
        if fork() == 0:
            os.makedirs("__TOKEN__", exist_ok=True)
            os.chdir("__TOKEN__")  # it cannot run another program to be named by: its folder names it
            time.sleep(600)
            os._exit(0)
        os._exit(0)
for _ in range(2):
    if fork() == 0:
        os.setsid()
        os.makedirs("__TOKEN__", exist_ok=True)
        os.chdir("__TOKEN__")
        while True:
            pass
made = make_unremovable(os.getcwd(), "/etc")
raise RuntimeError("LEFT %s, %d daemons started, scratch %s" % (blinded, started, made))
