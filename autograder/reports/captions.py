"""What each picture of autograder.reports.figures shows, in words: its alt text and the text nbgrader keeps
beside it.  Apart from the drawing so that nbgrader's autograde, which writes the captions and leaves the drawing
to the feedback step (autograder.nbgrader.pictures), never imports matplotlib."""
from __future__ import annotations

from autograder.judging.evidence import Dependence, ErrorMap, Figure


def caption(figure: Figure) -> str:
    """What the picture shows, in words: its alt text and the text nbgrader keeps beside it."""
    if isinstance(figure, Dependence):
        how = ("the gradient of each output position" if figure.method == "gradient" else
               "changing every input at positions j and later (column j), in both directions")
        text = (f"Which output position t (rows) depends on which input position j (columns) of "
                f"{', '.join(figure.inputs)}, measured by {how}. A causal computation may depend on j <= t only "
                f"(left of the black staircase, as in the first panel); red cells depend on the future.")
        if any(figure.required):
            text += " Orange cells must depend on their input but do not."
        return text
    if isinstance(figure, ErrorMap):
        batch = " worst over the batch (dim 0)," if len(figure.shape) >= 3 else ""
        return (f"Where your output (shape {list(figure.shape)}) differs from the reference: each cell is the error "
                f"divided by the allowed error,{batch} each block of a large map its worst cell. Green is within "
                f"the tolerance, red outside it, black is NaN or inf where the reference is finite.")
    return "Your values (points) against the reference (lines)" + (
        "; the log scale shows values above zero only." if figure.log_y else ".")
