# Goes for the suites' stored references (autograder/judging/cache.py: AUTOGRADER_CACHE, the grader's
# ~/.cache/autograder, a Gradescope image's <venv>/autograder-cache): lists, reads, overwrites and plants entries
# wherever a grader in this container keeps them.
import glob, os, sys
folders = {"/root/.cache/autograder", "/.cache/autograder", os.path.join(sys.prefix, "autograder-cache"),
           *glob.glob("/home/*/.cache/autograder"), *glob.glob("/tmp/*/.cache/autograder")}
reached = []
for folder in sorted(folders):
    try:
        reached += ["list " + folder] if os.listdir(folder) else []
    except OSError:
        pass
    for entry in glob.glob(os.path.join(folder, "references-*")):
        for what, mode in (("read", "rb"), ("overwrite", "r+b")):
            try:
                with open(entry, mode) as handle:
                    handle.read(1)
                reached.append(what + " " + entry)
            except OSError:
                pass
    try:
        with open(os.path.join(folder, "references-planted.pt"), "wb") as handle:
            handle.write(b"planted")
        reached.append("plant " + folder)
    except OSError:
        pass
raise RuntimeError("REACHED %d %s" % (len(reached), " ".join(reached[:6])))
