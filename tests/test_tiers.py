"""The isolation's two tiers, observed from inside the sandbox.

Tier 2 (Landlock, seccomp, a uid of its own, a supervisor) is what holds in a default Docker or Podman
container; here it is exercised on any machine by grading under a seccomp filter that refuses namespaces and
mounts as Docker's default profile does (tests/docker_like.py), as root and as an ordinary user.  Real
containers are in tests/test_containers.py.  The memory bound on the whole submission and the allow-listed
view of the file system are checked in both tiers.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from autograder import REPO_ROOT as ROOT
from conftest import processes_mentioning
from tests.test_sandbox import _ordinary_user

DOCKER_LIKE = [sys.executable, str(ROOT / "tests" / "docker_like.py")]


@pytest.fixture(autouse=True, scope="module")
def interpreter_readable_by_every_uid():
    """A root grader's sandbox has a uid of its own, which must read the interpreter: a Python installed
    below /root (mode 0700 on Debian) is searchable after this, as one installed in /usr or /opt is."""
    _ordinary_user()
TIERS = {"namespaces": [], "landlock": DOCKER_LIKE}

PROBE = r'''
import errno, os, signal, socket, time

def probe(grader, checkout):
    found = {"uid": os.getuid(), "cwd": os.getcwd()}
    for name, path in [("solutions", checkout + "/solutions/transformer_block.py"),
                       ("rubric", checkout + "/assignments/transformer_block/rubric.toml"),
                       ("grader_cmdline", f"/proc/{grader}/cmdline"), ("hostname", "/etc/hostname")]:
        try:
            open(path).read(1)
            found["read " + name] = True
        except OSError:
            found["read " + name] = False
    try:
        os.listdir(checkout + "/assignments")
        found["list hidden"] = True
    except OSError:
        found["list hidden"] = False
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9))
        found["network"] = True
    except OSError as exc:
        found["network"] = exc.errno not in (errno.EPERM, errno.EACCES, errno.ENETUNREACH)
    try:
        os.kill(grader, 0)
        found["signal grader"] = True
    except OSError:
        found["signal grader"] = False
    import subprocess, sys
    try:
        subprocess.run([sys.executable, "-c", "pass"])
        found["run a program"] = True
    except OSError:
        found["run a program"] = False
    for target in ("/tmp/planted-" + str(grader), checkout + "/planted"):
        try:
            open(target, "w").write("x")
        except OSError:
            pass
    open("scratch", "w").write("its own folder is writable")
    found["scratch"] = open("scratch").read() == "its own folder is writable"
    return found

def leave(token):
    """A daemon that leaves its session and the process tree's group, then a fork storm: the filter refuses
    every new process (one process per sandbox), and should one be started, it must not outlive grading."""
    try:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.makedirs(token, exist_ok=True)
                os.chdir(token)  # it cannot run another program to be named by: its folder names it
                time.sleep(120)
            os._exit(0)
    except OSError:
        pass
    forked = 0
    for _ in range(1000):
        try:
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            forked += 1
        except OSError:
            break
    try:
        os.kill(-1, signal.SIGKILL)  # everything this uid may signal
    except OSError:
        pass
    return forked
'''

DRIVER = """
import json, os, sys
from autograder.host.remote import RemoteSubmission
from autograder.model.limits import Limits
from autograder import REPO_ROOT
s = RemoteSubmission([sys.argv[1]], Limits(processes=32), [])
found = s.call("probe", os.getpid(), str(REPO_ROOT))
forked = s.call("leave", sys.argv[2])
print(json.dumps({"found": found, "forked": forked, "isolation": s.report.isolation, "notices": s.report.notices}))
s.close()
"""




@pytest.mark.parametrize("user", ["root", "ordinary user"])
def test_tier_2_contains_what_tier_1_contains(user):
    prefix, uid = _ordinary_user() if user == "ordinary user" else ([], None)
    token = f"daemon-{uuid.uuid4().hex}"
    done = subprocess.run([*prefix, *DOCKER_LIKE, sys.executable, "-c", DRIVER, PROBE, token],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]  # the grader survived kill(-1, SIGKILL) from inside
    report = json.loads(done.stdout.strip().splitlines()[-1])
    found = report["found"]
    assert report["isolation"] == "tier 2 (Landlock, seccomp)"
    if uid is None:
        assert found["uid"] >= 1 << 30  # a uid of its own
    else:
        assert found["uid"] == uid
    assert not any(found[f"read {what}"] for what in ("solutions", "rubric", "grader_cmdline", "hostname"))
    assert not found["list hidden"] and not found["network"] and not found["signal grader"]
    assert not found["run a program"] and found["scratch"]
    assert not (ROOT / "planted").exists() and not list(Path("/tmp").glob("planted-*"))
    assert report["forked"] == 0  # one process per sandbox: the filter refuses fork
    time.sleep(0.5)
    assert processes_mentioning(token) == [], "a setsid() daemon outlived its grading"


# What native code past the child's audit hook would ask the kernel, in each tier as it is entered for a child
NATIVE = r"""
import ctypes, json, sys, tempfile
from autograder.child import box
from autograder.host.sandbox import hidden_folders, import_folders
grader, tier = int(sys.argv[1]), int(sys.argv[2])
box.isolate({"tier": tier, "workdir": tempfile.mkdtemp(prefix="autograder-native-"), "processes": 16,
             "hidden": hidden_folders(), "imports": import_folders(), "rlimits": {}, "scratch_mb": 1})
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = {"unshare": libc.unshare(0x10000000) == 0, "ptrace grader": libc.ptrace(16, grader, 0, 0) == 0,
         # Landlock's own calls (create_ruleset asking the ABI version, restrict_self on no ruleset): a
         # submission neither probes nor stacks a domain, whatever the tier
         "landlock": [libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)) >= 0 or ctypes.get_errno(),
                      libc.syscall(446, ctypes.c_int(-1), ctypes.c_uint32(0)) >= 0 or ctypes.get_errno()]}
print(json.dumps(found), flush=True)
program = sys.executable.encode()
libc.execve(program, (ctypes.c_char_p * 4)(program, b"-c", b"print('ran another program')", None), None)
print(json.dumps({"execve errno": ctypes.get_errno()}))
"""


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", TIERS)
def test_the_kernel_refuses_new_namespaces_tracing_and_other_programs(tier, user):
    from autograder.child.isolation import LANDLOCK_TIER, NAMESPACES_TIER

    prefix, _ = _ordinary_user() if user == "ordinary user" else ([], None)
    number = NAMESPACES_TIER if tier == "namespaces" else LANDLOCK_TIER
    done = subprocess.run([*prefix, *TIERS[tier], sys.executable, "-c", NATIVE, str(os.getpid()), str(number)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [{"unshare": False, "ptrace grader": False, "landlock": [1, 1]}, {"execve errno": 1}], done.stdout


def _grade(prefix: list[str], submission: Path, out: Path, cwd: Path = ROOT, python: str = sys.executable) -> dict:
    done = subprocess.run([*prefix, python, "-m", "autograder", "grade", str(submission), "--assignment",
                           "transformer_block", "-o", str(out)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


MEMORY_HOG = '''
def hog():
    import os, resource, threading
    # six processes of 900 MB each, every one under the address-space limit, together far over it: the
    # filter refuses every new process; six threads of one process share its address space, which
    # RLIMIT_AS bounds before any of their memory is taken
    forks = 0
    for _ in range(6):
        try:
            if os.fork() == 0:
                block = b"x" * (900 << 20)
                os._exit(0)
            forks += 1
        except OSError:
            pass
    held = []
    def take():
        try:
            held.append(b"x" * (900 << 20))  # written, so resident
        except MemoryError:
            pass
    threads = [threading.Thread(target=take) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    return f"MEMORY forks={forks} blocks={len(held)} peak={peak}"
raise RuntimeError(hog())
'''


@pytest.mark.parametrize("tier", TIERS)
def test_memory_bounds_the_whole_submission_before_it_is_taken(tier, tmp_path):
    import re

    hog = tmp_path / "hog.py"
    hog.write_text((ROOT / "solutions" / "transformer_block.py").read_text() + "\n" + MEMORY_HOG)
    results = _grade(TIERS[tier], hog, tmp_path / "r.json")
    found = re.search(r"MEMORY forks=(\d+) blocks=(\d+) peak=(\d+)", results["output"])
    assert found, results["output"][:2000]
    forks, blocks, peak = map(int, found.groups())
    assert forks == 0 and 1 <= blocks <= 2  # the bound took some memory, and refused the rest
    assert peak < 2048  # never over the limit, not even for a moment
    assert results["score"] == 100  # refused allocations cost the submission nothing else


LOCATIONS = ["/opt", "/srv", "/usr/local", str(Path.home()), tempfile.gettempdir()]

LOOK = """
import os
def look(checkout, base):
    seen = {}
    for path in (checkout + "/solutions/transformer_block.py", checkout + "/assignments/transformer_block/rubric.toml",
                 checkout + "/source/transformer_block/transformer_block.ipynb"):
        try:
            seen[path] = open(path).read(20)
        except OSError:
            pass
    for folder in (base, checkout, checkout + "/assignments", checkout + "/solutions"):
        try:
            seen[folder] = [name for name in os.listdir(folder) if name not in ("autograder", ".venv")]
        except OSError:
            pass
    return seen
"""

VIEW = """
import json, os, sys
from autograder.host.remote import RemoteSubmission
from autograder.model.limits import Limits
from autograder import REPO_ROOT
s = RemoteSubmission([sys.argv[1]], Limits(), [])
print(json.dumps({"seen": s.call("look", str(REPO_ROOT), os.path.dirname(str(REPO_ROOT))),
                  "isolation": s.report.isolation}))
s.close()
"""


def _install_course(base: Path) -> Path:
    """A copy of the course under `base`, with a virtual environment inside it (whose site-packages point at
    this one's, to spare installing torch again)."""
    checkout = base / f"course-{uuid.uuid4().hex[:8]}"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(".venv", ".git", "build", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(checkout / ".venv")], check=True)
    packages = next((checkout / ".venv" / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    (packages / "this-kit.pth").write_text(ours + "\n")
    return checkout


@pytest.mark.parametrize("tier,location", [*(("namespaces", loc) for loc in LOCATIONS),
                                           ("landlock", "/opt"), ("landlock", "/usr/local")])
def test_the_sandbox_sees_an_allow_list_wherever_the_course_lives(tier, location):
    """Whatever folder holds the course and its virtual environment, the sandbox sees neither the course's
    files nor what lies beside it: only the environment, the engine and the interpreter."""
    checkout = _install_course(Path(location))
    try:
        done = subprocess.run([*TIERS[tier], str(checkout / ".venv" / "bin" / "python"), "-c", VIEW, LOOK],
                              cwd=checkout, capture_output=True, text=True, timeout=300,
                              env={"PATH": os.environ["PATH"]})
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["isolation"].startswith("tier 1" if tier == "namespaces" else "tier 2")
        seen = report["seen"]
        # no file could be read; folders hold nothing but the mount points leading to the engine and the
        # environment (tier 1), or cannot be listed at all (tier 2)
        assert set(seen) <= {str(checkout.parent), str(checkout), f"{checkout}/assignments", f"{checkout}/solutions"}
        # ... and to the interpreter and the environment the course's was made from (this checkout's, which
        # may itself live in that folder: a clone in /tmp)
        on_the_way = {checkout.name} | {p.name for p in [*Path(sys.base_prefix).parents, ROOT, *ROOT.parents]
                                        if p.parent == checkout.parent}
        assert set(seen.get(str(checkout.parent), [])) <= on_the_way, seen  # the folders leading to what it needs
        assert all(seen[folder] == [] for folder in seen if folder != str(checkout.parent)), seen
    finally:
        shutil.rmtree(checkout, ignore_errors=True)


def test_a_refusal_caused_by_apparmor_names_apparmor(tmp_path, monkeypatch):
    """Ubuntu 24.04 refuses unprivileged user namespaces through AppArmor with a bare EPERM: the refusal
    says so, instead of leaving the instructor with [Errno 1]."""
    from autograder.child import isolation

    switch = tmp_path / "apparmor_restrict_unprivileged_userns"
    switch.write_text("1\n")
    monkeypatch.setattr(isolation, "APPARMOR_USERNS", str(switch))
    said = isolation._apparmor_says("unshare user and other namespaces", 1)
    assert "AppArmor" in said and str(switch) in said
    switch.write_text("0\n")
    assert isolation._apparmor_says("unshare user and other namespaces", 1) == ""


# The last cell reports what the child sees by raising: its message (200 characters at most) is stored in
# results.json's cell_errors, so the child compares and reports only the differences
LOOK_AROUND = '''
import json, os, sys
unexpected = [p for p in sys.path if p not in IMPORTS] + [p for p in IMPORTS if p not in sys.path]
readable = []
for path in FILES:  # opened: Landlock does not answer access()
    try:
        open(path).read(1)
        readable.append(path)
    except OSError:
        pass
listed = []
for folder in FOLDERS:
    try:
        listed += [name for name in os.listdir(folder) if name not in ON_THE_WAY]
    except OSError:
        pass
raise RuntimeError("SEEN " + json.dumps([unexpected, readable, listed])[:190])
'''


@pytest.fixture(scope="module")
def course_folder():
    """A course's folder outside the checkout, readable by the ordinary user: its gradebook, a submission."""
    course = Path(tempfile.mkdtemp(prefix="course-"))
    (course / "gradebook.db").write_text("the grades")
    (course / "submitted").mkdir()
    for folder in (course, course / "submitted"):
        folder.chmod(0o777)
    yield course
    shutil.rmtree(course, ignore_errors=True)


# each tier, user and start twice, in four grades: the view and the import path are worked out alike in
# both tiers, which only enforce them differently (test_the_sandbox_sees_an_allow_list_wherever_the_course_lives)
@pytest.mark.parametrize("tier,user,start", [("namespaces", "root", "beside the checkout"),
                                             ("namespaces", "ordinary user", "in a course folder"),
                                             ("landlock", "root", "in a course folder"),
                                             ("landlock", "ordinary user", "beside the checkout")])
def test_the_view_does_not_depend_on_where_the_grader_starts(tier, user, start, course_folder):
    """`python -m autograder grade` puts its working directory first on sys.path, and PYTHONPATH adds more:
    started from the folder that holds the checkout (the checkout on PYTHONPATH) or from a course folder, it
    grades isolated, the child's sys.path is the environment's import folders and nothing else, and neither
    the checkout, the working directory nor the course folder can be read from a cell."""
    from autograder.host.sandbox import import_folders

    prefix = TIERS[tier] if user == "root" else [*_ordinary_user()[0], *TIERS[tier]]
    cwd = ROOT.parent if start == "beside the checkout" else course_folder
    python_path = [str(ROOT)] + ([str(course_folder)] if cwd == course_folder else [])
    files = [str(ROOT / "README.md"), str(ROOT / "solutions" / "transformer_block.py"),
             str(course_folder / "gradebook.db")]
    submission = course_folder / "submitted" / f"{tier}-{user.replace(' ', '-')}-{start.replace(' ', '-')}.py"
    imports = [p for p in import_folders() if os.path.realpath(p) != str(ROOT)]
    # tier 2 lists none of these folders; tier 1 shows only the empty folders on the way to the engine and
    # the environment (this checkout's .venv and autograder/)
    on_the_way = {ROOT.name, "autograder", ".venv"} | {p.name for p in Path(sys.base_prefix).parents}
    facts = {"IMPORTS": imports, "FILES": files, "FOLDERS": [str(cwd), str(ROOT), str(course_folder)],
             "ON_THE_WAY": sorted(on_the_way)}
    submission.write_text((ROOT / "solutions" / "transformer_block.py").read_text() + "\n"
                          + "".join(f"{name} = {value!r}\n" for name, value in facts.items()) + LOOK_AROUND)
    out = submission.with_suffix(".json")
    done = subprocess.run([*prefix, sys.executable, "-m", "autograder", "grade", str(submission), "--assignment",
                           "transformer_block", "-o", str(out)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8",
                                            "PYTHONPATH": os.pathsep.join(python_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["extra_data"]["isolation"].startswith("tier 1" if tier == "namespaces" else "tier 2")
    assert results["score"] == 100
    [error] = results["extra_data"]["cell_errors"]
    assert error["message"].startswith("SEEN "), error
    unexpected, readable, listed = json.loads(error["message"].removeprefix("SEEN "))
    assert unexpected == [], f"the child's sys.path is not the environment's import folders: {unexpected}"
    assert readable == [] and listed == [], (readable, listed)
    assert str(cwd) not in imports and str(course_folder) not in imports  # what the child must not import from


def test_a_course_where_the_sandbox_must_read_is_refused_naming_it(tmp_path):
    """A course folder inside the environment's site-packages would be shown to every sandbox: the grader
    refuses in one line that names the folder and what to move, and never blames the machine."""
    import sysconfig

    course = Path(sysconfig.get_paths()["purelib"]) / "torch"  # any folder the sandbox must read holds
    reference = ROOT / "solutions" / "transformer_block.py"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(reference), "--assignment",
                           "transformer_block", "-o", str(tmp_path / "r.json")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "AUTOGRADER_COURSE_ROOT": str(course)})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "allows no sandbox" not in done.stderr
    assert f"holds {course.resolve()}" in done.stderr and "move" in done.stderr, done.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_checkout_on_an_import_path_is_refused_not_shown():
    """A legacy editable install (a .pth file naming the checkout) would put the checkout, solutions and
    suites included, on the sandbox's import path: the view refuses it, naming the folder."""
    from autograder import PACKAGE_DIR
    from autograder.child import view
    from autograder.host.sandbox import hidden_folders, import_folders

    assert str(ROOT) in hidden_folders()
    with pytest.raises(view.HiddenInView, match=f"^{ROOT}, which the sandbox must read .* is {ROOT}, which no sandbox"):
        view.readable_paths(str(PACKAGE_DIR), hidden_folders(), (*import_folders(), str(ROOT)))
