"""One submission as the editors students use save it: the same work, in the forms a notebook takes after
Google Colab, VS Code, a fresh copy, jupytext or Windows had it.  Every variant holds the same code and
must score what the original scores through every front end; none may carry a line blaming the student.
Used by the kit's tests (tests/test_editor_variants.py) and for trying a front end by hand.

Each variant is a file's name suffix and bytes: `.ipynb` for notebooks, `.py` for the jupytext script.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, Callable

from autograder.model.cells import is_check_cell, nbgrader_of

Notebook = dict[str, Any]
TOP_LEVEL = re.compile(r"^(?:def|class) ", re.MULTILINE)


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _stripped(nb: Notebook) -> Notebook:
    """Colab's save: every cell's metadata gone (nbgrader's included), new cell ids, its own notebook metadata."""
    nb = copy.deepcopy(nb)
    for number, cell in enumerate(nb["cells"]):
        cell["metadata"] = {"id": f"colab{number:04d}"}
        cell["id"] = f"colab{number:04d}"
    nb["metadata"] = {"colab": {"provenance": []}, "kernelspec": {"display_name": "Python 3", "name": "python3"},
                      "language_info": {"name": "python"}}
    return nb


def _fresh_copy(nb: Notebook) -> Notebook:
    """A copy made by pasting the cells into a new notebook: no nbgrader metadata, the rest kept."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell["metadata"].pop("nbgrader", None)
        cell["metadata"].pop("deletable", None)
        cell["metadata"].pop("editable", None)
    return nb


def _vscode(nb: Notebook) -> Notebook:
    """VS Code's save of an older notebook: nbformat 4.4, no cell ids."""
    nb = copy.deepcopy(nb)
    nb["nbformat_minor"] = 4
    for cell in nb["cells"]:
        cell.pop("id", None)
    return nb


def _split(nb: Notebook) -> Notebook:
    """A solution cell with two definitions split in two, the first check cell split in two (metadata stripped,
    so only its text says it is the release's), and %timeit scratch cells between."""
    nb = copy.deepcopy(nb)
    cells: list[dict[str, Any]] = []
    split_solution = split_check = False
    for cell in nb["cells"]:
        text, meta = _text(cell), nbgrader_of(cell)
        starts = [m.start() for m in TOP_LEVEL.finditer(text)]
        if not split_solution and meta.get("solution") and cell["cell_type"] == "code" and len(starts) > 1:
            cut = starts[1]
            cells += [_code(text[:cut], cell["metadata"]), _code("%timeit sum(range(10))\n", {}),
                      _code("%%timeit\nsum(range(10))\n", {}), _code(text[cut:], {})]
            split_solution = True
            continue
        if not split_check and is_check_cell(cell):
            lines = _lines(text)
            half = len(lines) // 2
            cells += [_code("".join(lines[:half]), {}), _code("".join(lines[half:]), {})]
            split_check = True
            continue
        cells.append(cell)
    nb["cells"] = cells
    assert split_solution and split_check, "the notebook has no solution cell of two definitions or no check cell"
    return nb


def _code(text: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "metadata": copy.deepcopy(metadata), "outputs": [],
            "source": _lines(text)}


def _classic(nb: Notebook) -> Notebook:
    """The classic Notebook's save of an older notebook: nbformat 4.2, no cell ids, execution counts, `trusted`."""
    nb = _vscode(nb)
    nb["nbformat_minor"] = 2
    for number, cell in enumerate(nb["cells"], 1):
        if cell["cell_type"] == "code":
            cell["execution_count"] = number
            cell["metadata"]["trusted"] = True
    return nb


def _lab_outputs(nb: Notebook) -> Notebook:
    """JupyterLab's save after a run: every code cell with its output, one a 4 MB picture."""
    nb = copy.deepcopy(nb)
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for number, cell in enumerate(code, 1):
        cell["execution_count"] = number
        cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": [f"ran cell {number}\n"]}]
    code[-1]["outputs"].append({"output_type": "display_data", "metadata": {},
                                "data": {"image/png": "iVBORw0KGgo" + "A" * (4 << 20), "text/plain": ["<Figure>"]}})
    return nb


def _one_string(nb: Notebook) -> Notebook:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell["source"] = _text(cell)
    return nb


def _kernel(spec: dict[str, Any] | None) -> Callable[[Notebook], Notebook]:
    def change(nb: Notebook) -> Notebook:
        nb = copy.deepcopy(nb)
        nb["metadata"].pop("language_info", None)
        if spec is None:
            nb["metadata"].pop("kernelspec", None)
        else:
            nb["metadata"]["kernelspec"] = spec
        return nb
    return change


def _json(nb: Notebook) -> bytes:
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _crlf_bom(nb: Notebook) -> bytes:
    """Windows: a byte-order mark, CRLF line ends in the file and in every cell's source."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell["source"] = [line.replace("\n", "\r\n") for line in _lines(_text(cell))]
    return b"\xef\xbb\xbf" + _json(nb).replace(b"\n", b"\r\n")


def jupytext_percent(nb: Notebook) -> bytes:
    """The notebook as jupytext's percent format writes it: markdown commented out, `# %%` before each cell."""
    out = ["# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n#     name: python3\n# ---\n"]
    for cell in nb["cells"]:
        text = _text(cell)
        if cell["cell_type"] == "markdown":
            out.append("# %% [markdown]\n" + "".join(f"# {line}".rstrip() + "\n" for line in text.split("\n")))
        elif cell["cell_type"] == "code":
            out.append("# %%\n" + text.rstrip("\n") + "\n")
    return "\n".join(out).encode("utf-8")


def editor_variants(nb: Notebook) -> dict[str, tuple[str, bytes]]:
    """name -> (file suffix, bytes) of each way an editor saves `nb`."""
    notebooks: dict[str, Callable[[Notebook], Notebook]] = {
        "colab": _stripped, "fresh-copy": _fresh_copy, "vscode": _vscode, "classic": _classic,
        "lab-outputs": _lab_outputs, "reordered": _reordered_cells,
        "split": _split, "one-string": _one_string,
        "r-kernel": _kernel({"display_name": "R", "language": "R", "name": "ir"}), "no-kernel": _kernel(None),
    }
    variants = {name: (".ipynb", _json(change(nb))) for name, change in notebooks.items()}
    variants["crlf-bom"] = (".ipynb", _crlf_bom(nb))
    variants["jupytext"] = (".py", jupytext_percent(nb))
    return variants


def _reordered_cells(nb: Notebook) -> Notebook:
    """Metadata stripped (Colab), and every check cell moved to the end of the notebook, last first."""
    checks = [is_check_cell(cell) for cell in nb["cells"]]
    stripped = _stripped(nb)
    kept = [cell for cell, check in zip(stripped["cells"], checks) if not check]
    moved = [cell for cell, check in zip(stripped["cells"], checks) if check]
    stripped["cells"] = kept + moved[::-1]
    return stripped
