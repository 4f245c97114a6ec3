"""Grading platforms: what `python -m autograder export PLATFORM` builds for each (a Gradescope autograder zip,
a GitHub Classroom workflow) and what runs there.  Each module provides HELP, add_arguments(parser) and
export(args) -> exit status; adding a platform is one module and one line below."""
from __future__ import annotations

import importlib
from types import ModuleType

EXPORTERS = {
    "github-classroom": "autograder.platforms.github_classroom",
    "gradescope": "autograder.platforms.gradescope",
}


def exporter(name: str) -> ModuleType:
    return importlib.import_module(EXPORTERS[name])
