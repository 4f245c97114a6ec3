"""The transformer_block catalogue: known mistakes (mistakes.py, and silent.py: the classes of mistakes
whose return values look right) and correct-but-different submissions (variants.py).  The format and what
check-suite does with them: autograder/authoring/catalogue.py.  Which part is built on which, the
determinism entries and the demo's mistake are in the manifest, ../rubric.toml."""
from assignments.transformer_block.catalogue.mistakes import MISTAKES as PLAIN_MISTAKES
from assignments.transformer_block.catalogue.silent import SILENT
from assignments.transformer_block.catalogue.variants import VARIANTS

MISTAKES = PLAIN_MISTAKES + SILENT

__all__ = ["MISTAKES", "VARIANTS"]
