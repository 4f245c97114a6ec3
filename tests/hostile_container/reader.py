# Reads what the grader keeps under /autograder (the hidden suites and the rubric in its checkout, the other
# submissions), directly and through other processes' /proc/PID/root, /proc/PID/cwd and open files.  The
# engine (/autograder/source/autograder) is the one part the sandbox may read.
import glob, os
mine = ("/proc/self/", "/proc/thread-self/", "/proc/%d/" % os.getpid())
read = []
for pattern in ("/autograder/**", "/proc/*/root/autograder/**", "/proc/*/cwd/assignments/**", "/proc/*/fd/*"):
    for path in glob.glob(pattern, recursive=True):
        if "/autograder/source/autograder/" in path or path.startswith(mine) or not os.path.isfile(path):
            continue  # the engine, its own files, and what is not a file (a pipe would block)
        try:
            with open(path, "rb") as handle:
                if handle.read(1):
                    read.append(path)
        except OSError:
            pass
raise RuntimeError("READ %d %s" % (len(read), " ".join(sorted(read)[:6])))
