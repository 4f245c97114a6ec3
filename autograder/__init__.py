"""Sandboxed grading engine for the transformer-building-blocks assignments.

The folders are the trust boundary and the layers (docs/architecture.md): `child/` runs inside the sandboxed
process and imports nothing of the kit but `protocol`; `model/` is what the trusted sides agree on; `host/`
reads submitted files, starts children and talks to them; `judging/` is what the hidden suites use and how
they run; `grading/` decides and keeps a grade; `reports/` writes it in every other form; `authoring/` holds
the tools of whoever writes an assignment; `commands/` and `nbgrader/` are the front ends.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# the checkout this engine runs from: assignments/, source/, release/ and solutions/ live here (not
# AUTOGRADER_COURSE_ROOT, which may point at a scratch course holding only source/)
REPO_ROOT = PACKAGE_DIR.parent
