# The grader's own processes, found without /proc (its parent, its session and group, the pids just below its
# own: the grader, the zygote every student of the batch shares, the supervisor), each given a CPU limit of
# 1 s, 3 open files, the lowest priority, SCHED_IDLE and one CPU; and every process of its uid niced.  The
# next student in the batch (zz-next) must still score 100.
import os, resource
own = os.getpid()
around = {os.getppid(), os.getsid(0), os.getpgid(0), *range(max(2, own - 400), own + 40)} - {own, 0}
tried, reached = 0, []
for pid in sorted(around):
    for name, call in (("RLIMIT_CPU 1", lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (1, 1))),
                       ("RLIMIT_NOFILE 3", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3))),
                       ("nice 19", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                       ("SCHED_IDLE", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
                       ("CPU 0 only", lambda: os.sched_setaffinity(pid, {0}))):
        tried += 1
        try:
            call()
            reached.append("%s on %d" % (name, pid))
        except OSError:
            pass
for which in (os.PRIO_PGRP, os.PRIO_USER):
    tried += 1
    try:
        os.setpriority(which, 0, 19)
        reached.append("nice 19 on %d" % which)
    except OSError:
        pass
raise RuntimeError("SCHEDULER tried %d reached %d: %s" % (tried, len(reached), reached[:4]))
