"""Reading submissions into cells, on the trusted side, without running them."""
import builtins
import json
import os
import re

import pytest

from autograder.host import intake, source_cells
from autograder.host.source_cells import UnreadableSubmission, neutralise, read_cells
from autograder.grading.rubric import load_rubric


def test_ipython_syntax_is_neutralised():
    cell = "%matplotlib inline\nfiles = !ls\n!pip install x\nif True:\n    %time y = 1\nz = 5 % 3\nok = a != b"
    lines = neutralise(cell).split("\n")
    assert lines[:3] == ["pass  # IPython syntax removed by the grader"] * 3
    assert lines[4].strip().startswith("pass") and lines[5:] == ["z = 5 % 3", "ok = a != b"]
    compile(neutralise(cell), "<cell>", "exec")


def test_cell_magics():
    assert neutralise("%%bash\nrm -rf /") is None
    assert neutralise("%%time\nx = 1") == "x = 1"


def test_notebook_code_cells_in_order(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": "# hi"}, {"cell_type": "code", "source": ["a = 1\n", "b = 2"]},
                    {"cell_type": "code", "source": "c = a + b"}], "nbformat": 4, "metadata": {}}
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(nb))
    assert read_cells(path) == ["a = 1\nb = 2", "c = a + b"]


def test_python_file_cells(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("a = 1\n# %%\nb = 2\n")
    assert [c.strip() for c in read_cells(path)] == ["a = 1", "b = 2"]


@pytest.mark.parametrize("name, content, reason", [
    ("s.ipynb", b"", "is empty"),
    ("s.ipynb", b"{not json", "not valid JSON"),
    ("s.ipynb", b"[1, 2]", "not a Jupyter notebook"),
    ("s.ipynb", json.dumps({"nbformat": 4, "metadata": {}}).encode(), "not a Jupyter notebook"),
    ("s.ipynb", json.dumps({"cells": [{"cell_type": "markdown", "source": "x"}]}).encode(), "without code cells"),
    ("s.ipynb", bytes(range(256)) * 4, "not UTF-8"),
    ("s.txt", b"x = 1", ".ipynb notebook or a .py file"),
    ("s.py", b"\xef\xbb\xbf \r\n", "is empty"),
    ("s.py", b"x = 1\x00", "NUL bytes"),
    ("s.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "%%bash\nls"}]}).encode(), "no code cells"),
    # valid JSON the trusted side still refuses to build: each used to escape as a traceback
    ("s.ipynb", b'{"cells": [], "metadata": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
     "not a readable notebook: nested too deeply"),
    ("s.ipynb", b'{"cells": [], "metadata": {"n": ' + b"7" * 5000 + b"}}", "not a readable notebook: .*digits"),
    ("s.ipynb", b'{"cells": [{"cell_type": "code", "source": "x = \'\\ud800\'"}]}',
     "not a readable notebook: .*surrogate"),
    ("s.ipynb", b"\xff\xfe{\x00}\x00", "not UTF-8"),
    ("s.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "x = 1\n" * 400_000}]}).encode(),
     "more than 2,000,000 characters of code"),
    ("s.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "x"}] * 2001}).encode(),
     "more than 2000 code cells"),
    ("s.py", b"x = 1\n# %%\n" * 2001, "more than 2000 code cells"),
    # 1.5 MB of `{},` would be half a million dicts in the trusted process; refused before parsing
    ("s.ipynb", b'{"cells": [], "metadata": [' + b"{}," * 500_001 + b"0]}", "more than 500,000 JSON objects"),
    ("s.ipynb", b'{"cells": [], "metadata": [' + b"0," * 2_000_001 + b"0]}", "more than 2,000,000 JSON values"),
])
def test_unreadable_submissions_get_a_one_line_reason(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UnreadableSubmission, match=reason) as info:
        read_cells(path)
    assert name in str(info.value) and "\n" not in str(info.value)


def test_syntax_errors_are_left_to_the_child(tmp_path):
    """The trusted side never compiles: a cell that is not Python reaches the sandbox, which reports it."""
    path = tmp_path / "s.py"
    path.write_text("def f(:\n")
    assert read_cells(path) == ["def f(:\n"]


@pytest.fixture
def no_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the trusted process compiled student code")

    monkeypatch.setattr(builtins, "compile", refuse)


def test_a_huge_python_file_is_refused_without_compiling_it(tmp_path, no_compile):
    path = tmp_path / "s.py"
    path.write_bytes(b"x = [" + b"1, " * (4 << 20) + b"]\n")  # 12 MB: compile() once took 4.7 GB on this
    with pytest.raises(UnreadableSubmission, match="s.py holds more than 2,000,000 characters of code"):
        read_cells(path)


def test_code_the_parser_cannot_nest_is_read_without_compiling_it(tmp_path, no_compile):
    deep = "x = " + "(" * 100_000 + "1" + ")" * 100_000
    path = tmp_path / "s.py"
    path.write_text(f"a = 1\n# %%\n{deep}\n")
    assert [c.strip() for c in read_cells(path)] == ["a = 1", deep]


def test_a_file_above_the_size_limit_is_not_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "s.ipynb"
    path.write_bytes(b" " * (intake.MAX_SUBMISSION_BYTES + 10))
    with pytest.raises(UnreadableSubmission, match="larger than 20 MB"):
        read_cells(path)


@pytest.mark.parametrize("make,kind", [(os.mkfifo, "a FIFO (named pipe)"), (os.mkdir, "a folder")])
def test_something_that_is_not_a_file_is_refused_without_blocking(tmp_path, make, kind):
    path = tmp_path / "s.py"
    make(path)
    with pytest.raises(UnreadableSubmission, match=rf"^s\.py is {re.escape(kind)}, not a Python file$"):
        read_cells(path)


def test_file_names_in_reasons_are_printable_one_line_text(tmp_path):
    raw_name = b"evil\xff\x1b[2J\nname.py"
    path = tmp_path / os.fsdecode(raw_name)  # the byte 0xff arrives as the lone surrogate \udcff
    path.write_bytes(b"")
    with pytest.raises(UnreadableSubmission) as info:
        read_cells(path)
    message = str(info.value)
    assert message == "evil\\xff\ufffd[2J name.py is empty"
    message.encode("utf-8")


def _notebook(sources):
    return {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source} for source in sources],
            "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


PYTHON = "import torch\n\ndef f(x):\n    return x + 1\n# %%\ny = f(2)\n"
NOTEBOOK_SOURCES = [["import torch\n", "\n", "def f(x):\n", "    return x + 1\n"], "y = f(2)\nprint(y)"]


@pytest.mark.parametrize("name, plain, windows", [
    ("s.py", PYTHON.encode(), b"\xef\xbb\xbf" + PYTHON.replace("\n", "\r\n").encode()),
    ("s.py", PYTHON.encode(), PYTHON.replace("\n", "\r").encode()),  # classic Mac line ends
    ("s.ipynb", json.dumps(_notebook(NOTEBOOK_SOURCES)).encode(),
     b"\xef\xbb\xbf" + json.dumps(_notebook([[line.replace("\n", "\r\n") for line in NOTEBOOK_SOURCES[0]],
                                           NOTEBOOK_SOURCES[1].replace("\n", "\r\n")]), indent=1).replace(
         "\n", "\r\n").encode()),
])
def test_byte_order_marks_and_windows_line_ends_give_the_same_cells(tmp_path, name, plain, windows):
    (tmp_path / "plain").mkdir()
    (tmp_path / "windows").mkdir()
    (tmp_path / "plain" / name).write_bytes(plain)
    (tmp_path / "windows" / name).write_bytes(windows)
    cells = read_cells(tmp_path / "plain" / name)
    assert len(cells) == 2 and cells == read_cells(tmp_path / "windows" / name)
    assert not any("\r" in c or "\ufeff" in c for c in cells)


def test_check_cells_are_not_run_but_keep_their_numbers(tmp_path):
    from autograder.model.cells import CHECK_CELL_STANDIN

    def cell(source, **nbgrader):
        return {"cell_type": "code", "metadata": {"nbgrader": nbgrader} if nbgrader else {}, "source": source}

    notebook = {"cells": [cell("x = 1"), cell("assert torch.nn.functional.layer_norm", grade=True, solution=False),
                          cell("y = 2", grade=False, solution=True), cell("z = 3")]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook))
    assert read_cells(path) == ["x = 1", CHECK_CELL_STANDIN, "y = 2", "z = 3"]


# --- instructor cells that grading does not need (rubric.toml: skip_when_unchanged) ------------------------


def _release_class_notebook():
    """The reference solution in the release notebook, as a student hands it in."""
    from autograder.authoring.samples import student_notebook

    return student_notebook("transformer_block")


def _cell_with(notebook, grade_id):
    return next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _text(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _code_index(notebook, grade_id):
    """The cell's number among the notebook's code cells: what read_cells returns it as."""
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    return code.index(_cell_with(notebook, grade_id))


def _read_graded(tmp_path, notebook):
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    return read_cells(path, load_rubric("transformer_block").skip_when_unchanged), read_cells(path)


def test_unchanged_plot_cells_are_stand_ins_and_keep_their_numbers(tmp_path):
    notebook = _release_class_notebook()
    graded, everything = _read_graded(tmp_path, notebook)
    assert len(graded) == len(everything)
    skipped = load_rubric("transformer_block").skip_when_unchanged
    for grade_id, text in (("heads_plot", "matplotlib"), ("gradient_plot", "matplotlib"), ("placement_plot", "matplotlib"),
                           ("setup", "DEVICE"), ("gpu_check", "DEVICE")):
        index = _code_index(notebook, grade_id)
        assert text in everything[index] and graded[index] == source_cells.UNCHANGED_CELL_STANDIN
    # the locked setup cell and every solution cell run
    assert graded[_code_index(notebook, "imports")] == everything[_code_index(notebook, "imports")]
    assert graded[_code_index(notebook, "imports")].startswith("import math")
    changed = [i for i, (a, b) in enumerate(zip(graded, everything)) if a != b]
    assert changed == sorted(_code_index(notebook, grade_id) for grade_id in skipped)


def test_an_edited_locked_plot_cell_is_still_the_release_s(tmp_path):
    """Locked cells are the instructor's on every front end, as nbgrader restores them: an edit is not graded."""
    notebook = _release_class_notebook()
    cell = _cell_with(notebook, "heads_plot")
    cell["source"] = _text(cell).replace("demo_heads, demo_len = 4, 8", "demo_heads, demo_len = 4, 9")
    cell["metadata"]["nbgrader"]["checksum"] = "anything"  # the checksum is the student's bytes: never read
    graded, everything = _read_graded(tmp_path, notebook)
    index = _code_index(notebook, "heads_plot")
    assert "demo_len = 4, 9" in everything[index] and graded[index] == source_cells.UNCHANGED_CELL_STANDIN
    assert graded[_code_index(notebook, "gradient_plot")] == source_cells.UNCHANGED_CELL_STANDIN


def test_the_plot_grade_id_on_other_code_runs_and_metadata_alone_decides_nothing(tmp_path):
    notebook = _release_class_notebook()
    student = _cell_with(notebook, "input_grad_norm_function")
    student["metadata"]["nbgrader"] = dict(_cell_with(notebook, "gradient_plot")["metadata"]["nbgrader"])
    plot = _cell_with(notebook, "heads_plot")
    plot["metadata"] = {}  # the plot's own code without its grade_id: nothing says it is the instructor's
    graded, everything = _read_graded(tmp_path, notebook)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert graded[code.index(student)] == everything[code.index(student)]
    assert graded[code.index(student)].startswith("def input_grad_norm")
    assert graded[code.index(plot)] == everything[code.index(plot)]


def test_an_unchanged_plot_cell_is_recognised_whatever_its_line_ends_and_line_split(tmp_path):
    notebook = _release_class_notebook()
    cell = _cell_with(notebook, "gradient_plot")
    text = _text(cell)
    cell["source"] = [line + "\r\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    graded, _ = _read_graded(tmp_path, notebook)
    assert graded[_code_index(notebook, "gradient_plot")] == source_cells.UNCHANGED_CELL_STANDIN


def test_a_python_file_has_no_cells_to_skip(tmp_path):
    skippable = load_rubric("transformer_block").skip_when_unchanged
    path = tmp_path / "s.py"
    path.write_text("\n".join(f"# %%\n{source}" for source in skippable.values()))
    assert read_cells(path, skippable) == read_cells(path)
    assert all("matplotlib" in cell or "DEVICE" in cell for cell in read_cells(path, skippable))


def test_a_name_defined_only_in_an_edited_locked_cell_is_not_defined_when_graded(tmp_path):
    """End to end through the real grader: the student's edit of a locked plot cell is not run (nbgrader would
    restore the cell), so code after it that needs what the edit defined fails, in its own part only."""
    from autograder.grading.grade import grade_file
    from autograder.model.limits import Limits

    notebook = _release_class_notebook()
    plot = _cell_with(notebook, "heads_plot")
    plot["source"] = _text(plot) + "\n\nFEED_FORWARD_ACTIVATION = nn.ReLU  # used by my TransformerBlock\n"
    block = _cell_with(notebook, "transformer_block_class")
    assert _text(block).count("nn.ReLU()") == 1
    block["source"] = _text(block).replace("nn.ReLU()", "FEED_FORWARD_ACTIVATION()")
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    result = grade_file(path, load_rubric("transformer_block"), Limits())
    scores = {p.part.name: (p.score, p.part.points) for p in result.parts}
    assert scores.pop("transformer_block")[0] == 0
    # the parts that measure the student's own block lose what it costs them; no other part loses anything
    built_on_it = [p.name for p in load_rubric("transformer_block").parts if "transformer_block" in p.built_on]
    assert built_on_it and all(scores[name][0] < scores.pop(name)[1] for name in built_on_it), scores
    assert all(abs(score - points) < 1e-9 for score, points in scores.values()), scores
    messages = [t.message for p in result.parts if p.part.name == "transformer_block" for t in p.tests]
    assert any("FEED_FORWARD_ACTIVATION" in m for m in messages), messages[:3]

def test_written_answers_are_never_run_and_change_nothing_that_is_graded(tmp_path):
    """A written answer (a markdown cell nbgrader grades by hand) is text: whatever it says, the cells graded
    are those of the same notebook without it.  Made a code cell, it is the student's code and runs, as
    nbgrader runs it (ReleaseCells drops the metadata of an unlocked release cell whose type changed)."""
    from autograder.authoring.assignment import is_written_answer

    notebook = _release_class_notebook()
    answers = [c for c in notebook["cells"] if is_written_answer(c)]
    assert len(answers) == len(load_rubric("transformer_block").parts)
    assert all(c["cell_type"] == "markdown" and len(_text(c)) > 100 for c in answers)
    graded, _ = _read_graded(tmp_path, notebook)
    for cell in answers:
        cell["source"] = "LayerNorm = None\nraise SystemExit('not run')\n"
    assert _read_graded(tmp_path, notebook)[0] == graded
    without = {**notebook, "cells": [c for c in notebook["cells"] if not is_written_answer(c)]}
    assert _read_graded(tmp_path, without)[0] == graded
    answers[0].update(cell_type="code", outputs=[], execution_count=None)
    assert "LayerNorm = None\nraise SystemExit('not run')\n" in _read_graded(tmp_path, notebook)[0]


def test_the_grade_of_a_notebook_with_written_answers_is_the_autograded_100_and_names_what_is_left(tmp_path):
    """End to end through the real grader: answers that would break every part were they run change nothing;
    the result keeps max_score 100 and says which points the instructor grades by hand."""
    from autograder.authoring.assignment import is_written_answer
    from autograder.grading.grade import grade_file
    from autograder.model.limits import Limits
    from autograder.grading.results_json import from_gradescope, gradescope, summary

    notebook = _release_class_notebook()
    for cell in (c for c in notebook["cells"] if is_written_answer(c)):
        cell["source"] = "LayerNorm = MultiHeadAttention = TransformerBlock = None\n"
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    rubric = load_rubric("transformer_block")
    result = grade_file(path, rubric, Limits())
    assert (result.score, result.max_score) == (100, 100)
    answers = len(rubric.graded_by_hand)
    assert result.graded_by_hand == rubric.graded_by_hand and answers == len(rubric.parts)
    assert summary(result).split("\n")[:2] == ["transformer_block: 100 / 100", f"Graded by hand: {answers} written "
                                               f"answers ({2 * answers} points), not included in this score"]
    report = gradescope(result)
    assert (report["score"], report["max_score"]) == (100, 100)
    assert report["extra_data"]["graded_by_hand"] == {name: 2.0 for name in rubric.graded_by_hand}
    assert summary(from_gradescope(json.loads(json.dumps(report)), rubric)) == summary(result)


# --- the release's cells by their text (model/cells.ReleaseText) ---------------------------------------------

def _stripped_solution(tmp_path) -> tuple[list[dict], "source_cells.ReleaseText"]:
    from autograder.authoring.samples import student_notebook

    notebook = student_notebook("transformer_block")
    for cell in notebook["cells"]:
        cell["metadata"] = {}  # as Colab saves it
    return notebook, load_rubric("transformer_block").release_text


def _graded_with_release(tmp_path, notebook: dict, release) -> list[str]:
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook))
    return read_cells(path, release=release)


def test_release_cells_without_metadata_are_known_by_their_text(tmp_path):
    """Check cells and the plots skipped while unchanged become their stand-ins; every other cell runs."""
    notebook, release = _stripped_solution(tmp_path)
    graded = _graded_with_release(tmp_path, notebook, release)
    everything = read_cells(tmp_path / "n.ipynb")
    rubric = load_rubric("transformer_block")
    assert graded.count(source_cells.CHECK_CELL_STANDIN) == len(rubric.parts)
    assert graded.count(source_cells.UNCHANGED_CELL_STANDIN) == len(rubric.skip_when_unchanged)
    assert all(g == e for g, e in zip(graded, everything) if "pass  #" not in g) and len(graded) == len(everything)


def test_whitespace_editors_change_does_not_decide_and_any_other_change_does(tmp_path):
    notebook, release = _stripped_solution(tmp_path)
    check = next(i for i, c in enumerate(notebook["cells"]) if "Visible checks for Part 1 " in "".join(c["source"]))
    text = "".join(notebook["cells"][check]["source"])
    notebook["cells"][check]["source"] = "\ufeff\n" + text.replace("\n", "  \r\n\r\n") + "\n\n"
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    index = code.index(notebook["cells"][check])
    assert _graded_with_release(tmp_path, notebook, release)[index] == source_cells.CHECK_CELL_STANDIN
    notebook["cells"][check]["source"] = text.replace("torch", "torch ", 1)
    assert _graded_with_release(tmp_path, notebook, release)[index] != source_cells.CHECK_CELL_STANDIN


def test_a_check_cell_split_in_two_is_the_releases_and_one_holding_the_students_code_runs_whole(tmp_path):
    notebook, release = _stripped_solution(tmp_path)
    check = next(i for i, c in enumerate(notebook["cells"]) if "Visible checks for Part 1 " in "".join(c["source"]))
    lines = "".join(notebook["cells"][check]["source"]).splitlines(keepends=True)
    first, second = ({**notebook["cells"][check], "source": "".join(part)} for part in (lines[:3], lines[3:]))
    notebook["cells"][check:check + 1] = [first, second]
    graded = _graded_with_release(tmp_path, notebook, release)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert graded[code.index(first)] == graded[code.index(second)] == source_cells.CHECK_CELL_STANDIN
    # the check's text pasted into a cell of the student's own code: the student's code must run, so all of it runs
    own = "layer_norm_twice = lambda x, w, b: layer_norm(layer_norm(x, w, b), w, b)\n"
    notebook["cells"][check:check + 2] = [{**first, "source": "".join(lines) + own}]
    graded = _graded_with_release(tmp_path, notebook, release)
    assert graded[code.index(first)].endswith(own) and "pass  #" not in graded[code.index(first)]
    # one piece alone is not the release's cell: it runs
    notebook["cells"][check] = first
    assert _graded_with_release(tmp_path, notebook, release)[code.index(first)] != source_cells.CHECK_CELL_STANDIN


def test_a_python_files_check_cells_are_known_by_their_text(tmp_path):
    release = load_rubric("transformer_block").release_text
    path = tmp_path / "s.py"
    checks = ["\n".join(key) for key, standin in release.standin_of.items() if standin == source_cells.CHECK_CELL_STANDIN]
    path.write_text("x = 1\n" + "".join(f"# %%\n{text}\n" for text in checks))
    assert read_cells(path, release=release) == ["x = 1\n", *[source_cells.CHECK_CELL_STANDIN] * len(checks)]
