"""Hostile and broken submissions, graded as one class through the real command line and through nbgrader.

For every case: the grader exits normally within the submission's limit plus a margin, the submission earns
nothing it did not earn honestly, no process it started survives, results.json stays small, and the other
submissions' grades are untouched.  nbgrader must give every student exactly the CLI's score.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from autograder import REPO_ROOT as ROOT
from autograder.authoring.samples import student_notebook, write_notebook
from conftest import full_marks, grade_class_both_ways, part_scores, processes_mentioning, run_cli

LIMIT = 150
CELL_SECONDS = 8  # per cell and per request: generous for honest code on a busy 2-core machine
FLAGS = ["--timeout", str(LIMIT), "--cell-timeout", str(CELL_SECONDS), "--request-timeout", str(CELL_SECONDS),
         "--memory-mb", "1536"]
MARGIN = 30  # interpreter start-up, suites, and killing the child
MAX_RESULTS_BYTES = 200_000
TOKEN = f"autograder-test-{uuid.uuid4().hex}"
SOLUTION = ROOT / "solutions" / "transformer_block.py"

TOP_LEVEL_HAZARDS = {
    "endless loop": "while True:\n    pass",
    "endless loop ignoring signals": ("import signal\nfor s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM):\n"
                                      "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"),
    "sys.exit": "import sys\nsys.exit(0)",
    "os._exit": "import os\nos._exit(3)",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "deep recursion": ("import sys\nsys.setrecursionlimit(10**8)\ndef deeper(n):\n    return deeper(n + 1) + 1\n"
                       "deeper(0)"),
    "memory bomb": "hog = []\nwhile True:\n    hog.append(bytearray(1 << 28))",
    "BaseException subclass": "class Escape(BaseException):\n    pass\nraise Escape('out')",
    "KeyboardInterrupt": "raise KeyboardInterrupt",
    "print flood": "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(chunk)",
    "closed stdout": "import os, sys\nsys.stdout.close()\nos.close(1)\nos.close(2)",
}
SILENT_HAZARDS = ("print flood", "closed stdout")  # they raise nothing

MHA_FORWARD = "        batch, seq_len, d_model = x.shape\n        q, k, v"
FORWARD_HAZARDS = {
    "endless loop": "        while True:\n            pass\n",
    "endless loop ignoring signals": ("        import signal\n        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                      "        while True:\n            pass\n"),
    "os._exit": "        import os\n        os._exit(0)\n",
    "segfault": "        import ctypes\n        ctypes.string_at(0)\n",
    "memory bomb": "        torch.empty(10**11)\n",
    "KeyboardInterrupt": "        raise KeyboardInterrupt\n",
}

BUGGY_LAYER_NORM = ("    mean = x.mean(dim=-1, keepdim=True)\n", "    return x\n    mean = x.mean(dim=-1, keepdim=True)\n")
TAMPER_CELLS = [
    # what beat nbgrader and otter: make every comparison pass
    ("import torch, numpy\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
     "torch.testing.assert_close = lambda *a, **k: None\nnumpy.testing.assert_allclose = lambda *a, **k: None\n"
     "numpy.allclose = lambda *a, **k: True\ntorch.Tensor.allclose = lambda *a, **k: True"),
    # an IPython input transformer that turns every later cell into `pass`
    "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])",
    # the test framework, builtins and the module table
    ("import builtins, sys, pytest\npytest.fail = lambda *a, **k: None\npytest.approx = lambda *a, **k: 0\n"
     "sys.modules['pytest'] = None\nsys.modules['autograder'] = None\nbuiltins.AssertionError = type(None)"),
    # a tensor that claims to equal anything
    ("import torch\nclass Agreeable(torch.Tensor):\n"
     "    def __eq__(self, other):\n        return True\n"
     "    def __sub__(self, other):\n        return torch.zeros_like(torch.Tensor(self))\n"
     "    def abs(self):\n        return torch.zeros_like(torch.Tensor(self))\n"
     "_honest_layer_norm = layer_norm\n"
     "def layer_norm(x, weight, bias, eps=1e-5):\n    return _honest_layer_norm(x, weight, bias, eps).as_subclass(Agreeable)"),
]
SLEEPER = f"[sys.executable, '-c', 'import time; time.sleep(3600)', '{TOKEN}']"
# A process that cannot run another program (the sandbox refuses execve) names itself by its working folder
MARKED = f"os.makedirs({TOKEN!r}, exist_ok=True)\nos.chdir({TOKEN!r})\n"
LINGERING_CELLS = [
    f"import subprocess, sys\nsubprocess.Popen({SLEEPER})",
    f"import subprocess, sys\nsubprocess.Popen({SLEEPER}, start_new_session=True)",
    # a classic daemon: double fork and setsid, then it tries to become another program, then stays as it is
    (f"import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
     f"        {MARKED.replace(chr(10), chr(10) + '        ')}try:\n            os.execv(sys.executable, {SLEEPER})\n"
     f"        except OSError:\n            time.sleep(3600)\n    os._exit(0)"),
]


# A survivor that goes after the other sandboxes of the batch: it leaves its process group and session,
# then for a while looks for other sandboxes' inputs and the class's files, and rewrites what it finds with
# a correct solution.  It also leaves files in the shared scratch folders.
SABOTEUR_LOOP = """import glob, os, time
CLASS = __CLASS__
solved = open(CLASS + '/alice.ipynb').read() if os.path.exists(CLASS + '/alice.ipynb') else ''
for folder in ('/tmp', '/dev/shm'):
    try:
        open(folder + '/__TOKEN__-left-behind', 'w').write('x')
    except OSError:
        pass
end = time.time() + 90
while time.time() < end:
    for path in glob.glob('/tmp/autograder-*/**', recursive=True) + glob.glob(CLASS + '/*.ipynb'):
        try:
            open(path, 'w').write(solved)
        except OSError:
            pass
    time.sleep(0.2)
"""


def saboteur(class_dir: str) -> str:
    loop = SABOTEUR_LOOP.replace("__CLASS__", repr(class_dir)).replace("__TOKEN__", TOKEN)
    return ("import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        {MARKED.replace(chr(10), chr(10) + '        ')}exec({loop!r}, {{}})\n    os._exit(0)")


# Reads the best-graded classmate's notebook and runs its code as its own.
SNOOP = """import glob, json
for path in glob.glob(__CLASS__ + '/alice.ipynb') + glob.glob('/tmp/autograder-*/cells.json'):
    try:
        data = json.load(open(path))
        for source in (c['source'] for c in data['cells'] if c['cell_type'] == 'code') if 'cells' in data else data:
            exec(''.join(source), globals())
    except Exception as exc:
        print('cannot read', path, exc)
"""
SOCKET = ("import json, os, socket, stat, struct, sys\nFD = next(fd for fd in range(3, 256) if "
          "os.path.exists('/proc/self/fd/%d' % fd) and stat.S_ISSOCK(os.fstat(fd).st_mode))\n")
FRAME = SOCKET + "os.write(FD, struct.pack('>II', len({head}), 0) + {head})\n"
# bytes written on the judge's socket while the notebook loads: the cell that wrote them is skipped like a
# cell that crashed, and the rest of the (correct) notebook is graded
HOSTILE_FRAMES = {
    "frame-nested": FRAME.format(head="b'[' * 200000 + b']' * 200000"),
    "frame-bigint": FRAME.format(head="b'{\"cell\": ' + b'9' * 5000 + b'}'"),
    "frame-forged-ready": FRAME.format(head="json.dumps({'ready': True, 'errors': [{'cell': 'x', 'type': 5}], "
                                            "'names': {'a': 1}}).encode()"),
    "frame-surrogate": FRAME.format(head="b'{\"cell\": 1, \"x\": \"\\\\ud800\"}'"),
    "socket-shutdown": SOCKET + "socket.socket(fileno=os.dup(FD)).shutdown(socket.SHUT_RDWR)\nimport time\ntime.sleep(60)",
}


def forging_cells(target: str) -> list[str]:
    forged = json.dumps({"score": 100, "max_score": 100, "tests": []})
    return [f"import atexit\natexit.register(lambda: open({target!r}, 'w').write({forged!r}))",
            f"try:\n    open({target!r}, 'w').write({forged!r})\nexcept OSError as e:\n    print(e)",
            f"open('results.json', 'w').write({forged!r})"]


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def the_class(out_dir, class_dir: str = "") -> dict[str, tuple[list, list[str]] | None]:
    """student -> (mutations of the reference, extra cells appended), or None for the untouched release"""
    students = {
        "a-saboteur": ([], [saboteur(class_dir)]),
        "snoop": None,
        "zz-victim": None,
        "surrogate-error": ([], ["raise ValueError('bad \\ud800 text')"]),
        **{name: ([], [cell]) for name, cell in HOSTILE_FRAMES.items()},
        "alice": ([], []),
        "hazards": ([], list(TOP_LEVEL_HAZARDS.values())),
        "buggy": ([BUGGY_LAYER_NORM], []),
        "tamper": ([BUGGY_LAYER_NORM], TAMPER_CELLS),
        "lingering": ([], LINGERING_CELLS),
        "forger": ([BUGGY_LAYER_NORM], forging_cells(str(out_dir / "forger.json"))),
    }
    for name, hazard in FORWARD_HAZARDS.items():
        students["forward-" + re.sub(r"\W+", "-", name).strip("-").lower()] = (
            [(MHA_FORWARD, hazard + MHA_FORWARD)], [])
    return students


# files no notebook tool would write: the trusted side must turn each into a clean grade
ODD_FILES = {
    "deep-expression.py": "x = " + "-" * 200000 + "1\n",
    "deep-metadata.ipynb": '{"cells": [], "metadata": ' + "[" * 20000 + "]" * 20000 + "}",
    "bigint-metadata.ipynb": '{"cells": [], "metadata": {"n": ' + "7" * 5000 + "}}",
    "huge.py": "x = 1\n" * (2 << 20),
}
UNDERSERVED = ["snoop", "zz-victim", "deep-expression", "deep-metadata", "bigint-metadata", "huge"]

# graded through nbgrader too: one submission per kind of hazard (every top-level case is in `hazards`; a
# crash stands for the forward cases: nbgrader's autograde grades each through the same grade_file, whose
# timeouts the CLI's class shows), since nbgrader grades one student at a time
THROUGH_NBGRADER = ["alice", "hazards", "tamper", "lingering", "forger", "forward-segfault", "snoop",
                    "frame-nested", "surrogate-error"]
NBGRADER_LIMITS = [f"--SandboxedGrading.timeout={LIMIT}", f"--SandboxedGrading.cell_timeout={CELL_SECONDS}",
                   f"--SandboxedGrading.request_timeout={CELL_SECONDS}", "--SandboxedGrading.memory_mb=1536"]


class Graded(NamedTuple):
    root: Path
    results: dict[str, dict]          # student -> results.json from the CLI
    seconds: dict[str, float]         # student -> grading wall time
    survivors: list[str]              # processes still alive that a submission started
    nbgrader_scores: dict[str, float]  # student -> score in nbgrader's gradebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    folder, out = root / "class", root / "out"
    for student, changes in the_class(out, str(folder)).items():
        notebook = student_notebook("transformer_block", solved=changes is not None, mutations=changes[0] if changes else [])
        if student == "snoop":
            notebook["cells"].append(code_cell(f"__CLASS__ = {str(folder)!r}\n" + SNOOP))
        notebook["cells"] += [code_cell(c) for c in (changes[1] if changes else [])]
        write_notebook(notebook, folder / f"{student}.ipynb")
    (folder / "zed.ipynb").write_bytes(b"\x00\xff not a notebook")
    for name, text in ODD_FILES.items():
        (folder / name).write_text(text)
    (folder / "bom-crlf.py").write_bytes(b"\xef\xbb\xbf" + SOLUTION.read_bytes().replace(b"\n", b"\r\n"))
    (folder / os.fsdecode(b"caf\xe9.ipynb")).write_bytes((folder / "alice.ipynb").read_bytes())
    done, scores = grade_class_both_ways(folder, out, root / "course", THROUGH_NBGRADER, FLAGS, NBGRADER_LIMITS)
    assert done.returncode == 0, done.stderr[-3000:]
    seconds = {m[1]: float(m[2]) for m in re.finditer(r"^(\S+): .* \(([\d.]+) s\)$", done.stderr, re.M)}
    results = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    survivors = processes_mentioning(TOKEN)
    return Graded(root, results, seconds, survivors, scores)


def test_every_submission_graded_within_its_limit_and_results_stay_small(graded):
    root, results, seconds = graded.root, graded.results, graded.seconds
    odd = {Path(name).stem for name in ODD_FILES} | {"bom-crlf", "caf\\xe9"}
    assert set(results) == set(the_class(root)) | {"zed"} | odd
    for student in results:
        assert seconds[student] < LIMIT + MARGIN, student
        assert (root / "out" / f"{student}.json").stat().st_size < MAX_RESULTS_BYTES
    assert results["alice"]["score"] == 100 and results["zed"]["score"] == 0


def test_top_level_hazards_cost_only_their_own_cells(graded):
    results = graded.results
    hazards = results["hazards"]
    assert hazards["score"] == 100, hazards["output"]
    first = sum(c["cell_type"] == "code" for c in student_notebook("transformer_block")["cells"]) + 1
    for number, hazard in enumerate(TOP_LEVEL_HAZARDS, start=first):
        if hazard not in SILENT_HAZARDS:
            assert f"Cell {number} raised" in hazards["output"], (hazard, hazards["output"])


@pytest.mark.parametrize("hazard", sorted(FORWARD_HAZARDS))
def test_hazard_in_forward_costs_only_the_parts_that_run_it(graded, hazard):
    results = graded.results
    result = results["forward-" + re.sub(r"\W+", "-", hazard).strip("-").lower()]
    scores, maxima = part_scores(result), full_marks(result)
    for untouched in ("layer_norm", "attention", "gradient_experiment"):
        assert scores[untouched] == maxima[untouched], result["output"]
    assert scores["multi_head_attention"] < maxima["multi_head_attention"]
    assert scores["transformer_block"] < maxima["transformer_block"]


def test_tamper_cells_gain_nothing(graded):
    results = graded.results
    assert results["buggy"]["score"] < 100
    for part, score in part_scores(results["tamper"]).items():
        assert score <= part_scores(results["buggy"])[part], (part, results["tamper"]["output"])


def test_no_process_outlives_grading(graded):
    assert graded.survivors == []


def test_no_submission_reaches_another_or_leaves_files(graded):
    """The saboteur outlived nothing and rewrote nothing; the snoop read nothing; nothing was left behind."""
    for student in UNDERSERVED:
        assert graded.results[student]["score"] == 0, (student, graded.results[student]["output"][:2000])
    for folder in ("/tmp", "/dev/shm"):
        assert not list(Path(folder).glob(f"{TOKEN}*")), folder
    class_dir = graded.root / "class"
    assert json.loads((class_dir / "alice.ipynb").read_text())["cells"]
    assert graded.results["a-saboteur"]["score"] == 100


@pytest.mark.parametrize("student", sorted(HOSTILE_FRAMES))
def test_hostile_bytes_cost_only_the_cell_that_wrote_them(graded, student):
    result = graded.results[student]
    assert result["score"] == 100, result["output"][:2000]
    last = sum(c["cell_type"] == "code" for c in student_notebook("transformer_block")["cells"]) + 1
    assert f"Cell {last}" in result["output"], result["output"][:2000]


def test_honest_odd_input_graded_right(graded):
    assert graded.results["bom-crlf"]["score"] == 100  # a byte-order mark and CRLF line endings
    assert graded.results["caf\\xe9"]["score"] == 100  # a file name that is not UTF-8
    assert graded.results["surrogate-error"]["score"] == 100
    with (graded.root / "out" / "grades.csv").open(newline="", encoding="utf-8") as handle:
        assert "caf\\xe9" in {row["student"] for row in csv.DictReader(handle)}


def test_cli_prints_a_lone_surrogate_from_a_cell_error(graded):
    done = run_cli("grade", graded.root / "class" / "surrogate-error.ipynb", "-o", graded.root / "s.json", *FLAGS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((graded.root / "s.json").read_text())["score"] == 100


def test_submission_cannot_forge_results(graded):
    results = graded.results
    assert results["forger"]["score"] == results["buggy"]["score"] < 100
    assert results["forger"]["tests"]


def test_nbgrader_gives_every_hostile_submission_the_clis_grade(graded):
    for student in THROUGH_NBGRADER:
        assert graded.nbgrader_scores[student] == pytest.approx(graded.results[student]["score"], abs=1e-3), student


# An attacker on its own sandbox, then a correct submission in the same grade-all batch, in each tier, as root
# and as an ordinary user: the next student scores 100 and nothing of the attacker is left, no process and no
# scratch folder.  The attack (tests/hostile_container/left_behind.py, graded in containers too) blinds its
# supervisor where the kernel lets it, starts a setsid daemon, a fork-only daemon and spinners, and takes every
# permission away from its scratch folder and a tree nested 1,500 deep in it.
LEFT_BEHIND = (Path(__file__).parent / "hostile_container" / "left_behind.py").read_text()


@pytest.fixture(scope="module")
def shared_tmp():
    """A folder every uid may write in, as /tmp (pytest's own are root's alone): each batch's TMPDIR."""
    from tests.test_scratch import shared_folder

    with shared_folder() as folder:
        yield folder


@pytest.mark.parametrize("user", ["root", "ordinary user"])
@pytest.mark.parametrize("tier", ["namespaces", "landlock"])
def test_an_attacker_leaves_nothing_for_the_next_student(tier, user, shared_tmp):
    from tests.test_sandbox import _ordinary_user
    from tests.test_tiers import TIERS

    batch = shared_tmp / f"{tier}-{user.replace(' ', '-')}"
    for name in ("class", "out", "tmp"):
        (batch / name).mkdir(parents=True)
        (batch / name).chmod(0o777)
    # the attack in the untouched release (whose checks fail fast), as in the containers' class
    attacker = student_notebook("transformer_block", solved=False)
    attacker["cells"].append(code_cell(LEFT_BEHIND.replace("__TOKEN__", TOKEN + "-batch")))
    write_notebook(attacker, batch / "class" / "a-attacker.ipynb")
    (batch / "class" / "b-correct.py").write_text(SOLUTION.read_text())
    prefix = [*(_ordinary_user()[0] if user == "ordinary user" else []), *TIERS[tier]]
    done = subprocess.run([*prefix, sys.executable, "-m", "autograder", "grade-all", str(batch / "class"),
                           "--assignment", "transformer_block", "--jobs", "1", "-o", str(batch / "out"), *FLAGS],
                          cwd=batch, capture_output=True, text=True, timeout=600,
                          env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "TMPDIR": str(batch / "tmp"),
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    attacker, correct = (json.loads((batch / "out" / f"{name}.json").read_text())
                         for name in ("a-attacker", "b-correct"))
    assert attacker["extra_data"]["isolation"].startswith("tier 1" if tier == "namespaces" else "tier 2")
    assert correct["score"] == 100, correct["output"][:2000]
    assert processes_mentioning(TOKEN + "-batch") == []
    assert list((batch / "tmp").iterdir()) == []  # every scratch folder removed, the attacker's too
    assert not any("could not be removed" in text for _, text in attacker["extra_data"]["notices"])
    said = "; ".join(e["message"] for e in attacker["extra_data"]["cell_errors"])
    assert "LEFT " in said and "scratch made" in said, said  # the attack ran to its end
