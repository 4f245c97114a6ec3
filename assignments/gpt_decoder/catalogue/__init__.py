"""The gpt_decoder catalogue: known mistakes (mistakes.py) and correct-but-different submissions
(variants.py).  The format and what check-suite does with them: autograder/authoring/catalogue.py.  Which
part is built on which, the determinism entries and the demo's mistake are in the manifest, ../rubric.toml."""
from assignments.gpt_decoder.catalogue.mistakes import MISTAKES
from assignments.gpt_decoder.catalogue.variants import VARIANTS

__all__ = ["MISTAKES", "VARIANTS"]
