"""The norms_and_gates catalogue: known mistakes (mistakes.py) and correct-but-different submissions
(variants.py).  The format and what check-suite does with them: autograder/authoring/catalogue.py.  The
determinism entries and the demo's mistake are in the manifest, ../rubric.toml."""
from assignments.norms_and_gates.catalogue.mistakes import MISTAKES
from assignments.norms_and_gates.catalogue.variants import VARIANTS

__all__ = ["MISTAKES", "VARIANTS"]
