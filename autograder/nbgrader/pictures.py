"""The pictures in nbgrader's check cells: written as evidence by autograde, drawn by generate_feedback.

Drawing a picture (autograder.reports.figures, matplotlib) costs about 0.1 s of CPU, and nbgrader's autograde,
which grades the class one notebook after another, does not need it: its grading reads only the first error or
execute_result of a check cell.  So autograde writes, after a part's verdict, one display_data output per
distinct evidence of its failing checks (`evidence_outputs`): the evidence as JSON under EVIDENCE (results.json's
form, autograder.judging.evidence) and its caption as text/plain.  `DrawPictures`, a preprocessor of the HTML
exporter that generate_feedback runs (nbgrader_config.py), replaces each with the picture autograde used to
write: image/png and the same text, a picture equal to an earlier one of the cell dropped (one bug failing
several checks alike draws the same picture, from equal or different evidence).

The evidence is read back as results.json's is, by `evidence.from_json`, which refuses anything the kit does not
write (kinds, fields, types, sizes) before it is drawn; every text drawn has its `$` escaped by figures.  A
record refused, or a drawing that fails, costs only its picture: the caption stays, saying why there is none.
"""
from __future__ import annotations

import base64
import json
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode

from autograder.grading.rubric import PartScore
from autograder.judging import evidence
from autograder.reports.captions import caption

EVIDENCE = "application/vnd.autograder.evidence+json"  # a JSON mime type: nbformat keeps it as an object
NO_PICTURE = "(No picture: its evidence could not be drawn.)"


def evidence_outputs(part: PartScore) -> list[NotebookNode]:
    """One output per distinct evidence the part's failing checks carry, captioned with the first such
    check's name: what `DrawPictures` draws."""
    shown: dict[evidence.Figure, str] = {}
    for test in part.tests:
        if test.figure is not None:
            shown.setdefault(test.figure, test.name)
    return [nbformat.v4.new_output("display_data", data={
        EVIDENCE: evidence.to_json(figure), "text/plain": f"{name}: {caption(figure)}"})
        for figure, name in shown.items()]


def _png(record: Any) -> bytes:
    from autograder.reports import figures  # here, not above: autograde imports this module and never draws

    # nbformat hands JSON objects over as NotebookNodes, and from_json takes JSON's own types only
    return figures.png(evidence.from_json(json.loads(json.dumps(record))))


def drawn_outputs(outputs: list[NotebookNode], log: Any = None) -> list[NotebookNode]:
    """The outputs with each evidence drawn as image/png; a picture equal to an earlier one is dropped."""
    drawn, shown = [], set()
    for output in outputs:
        data = output.get("data") if output.get("output_type") == "display_data" else None
        if not isinstance(data, dict) or EVIDENCE not in data:
            drawn.append(output)
            continue
        words = data.get("text/plain")
        words = words if isinstance(words, str) else ""
        try:
            png = _png(data[EVIDENCE])
        except Exception as exc:  # a refused record or a failed drawing costs its picture, never the feedback
            if log is not None:
                log.warning("a picture was not drawn (%s: %s)", type(exc).__name__, str(exc).split("\n", 1)[0][:200])
            drawn.append(nbformat.v4.new_output("display_data", data={"text/plain": f"{words} {NO_PICTURE}"}))
            continue
        if png in shown:
            continue
        shown.add(png)
        drawn.append(nbformat.v4.new_output("display_data", data={
            "image/png": base64.b64encode(png).decode("ascii"), "text/plain": words}))
    return drawn


class DrawPictures(Preprocessor):
    """Draws the evidence autograde wrote into the check cells (c.HTMLExporter.preprocessors)."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], index: int
                        ) -> tuple[NotebookNode, dict[str, Any]]:
        if cell.get("cell_type") == "code" and isinstance(cell.get("outputs"), list):
            cell.outputs = drawn_outputs(cell.outputs, self.log)
        return cell, resources
