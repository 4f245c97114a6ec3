"""Sandboxed grading engine for the transformer-building-blocks assignments.

The folders are the trust boundary: `child/` runs inside the sandboxed process and imports nothing of the
kit but `protocol`; `host/` reads submitted files, starts children and talks to them; `judging/` is what the
hidden suites use and how their outcomes become points; `reports/` writes results; `authoring/` holds the
tools of whoever writes an assignment.  The modules at the top run the pipeline (`grading`, `batch`,
`cluster`) and its front ends (`cli`, `nbgrader_plugin`).
"""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# the checkout this engine runs from: assignments/, source/, release/ and solutions/ live here (not
# AUTOGRADER_COURSE_ROOT, which may point at a scratch course holding only source/)
REPO_ROOT = PACKAGE_DIR.parent
