"""Reading submissions into cells, on the trusted side, without running them."""
import json

import pytest

from autograder.source_cells import UnreadableSubmission, neutralise, read_cells


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
    ("s.py", b"def f(:\n", "no cell that is valid Python"),
    ("s.txt", b"x = 1", ".ipynb notebook or a .py file"),
])
def test_unreadable_submissions_get_a_one_line_reason(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UnreadableSubmission, match=reason) as info:
        read_cells(path)
    assert name in str(info.value) and "\n" not in str(info.value)
