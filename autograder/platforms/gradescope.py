"""Gradescope: the autograder zip for one assignment.

    python -m autograder export gradescope [--assignment NAME] -o autograder.zip
        [--visibility visible|after_due_date|after_published|hidden] [--allow-unisolated]

At the zip's root: setup.sh, which Gradescope runs once to build the image (Python 3.11, CPU-only torch, the
pinned stack, the kit; see gradescope_setup.sh), and run_autograder, which it runs for every submission
(gradescope_run_autograder.sh: gradescope_supervisor.py runs the grader, gradescope_run.py, and keeps only the
result that grader wrote).  Beside them, what grading reads and nothing else: the engine package,
pyproject.toml and requirements.lock to install it, the assignment's rubric, hidden suites and the helper
modules beside them, its release notebook when the rubric skips unchanged release cells, and in
autograder-cache/ the references its suites store, computed here with the reference solution
(autograder/platforms/stored_references.py) so that a fresh container need not compute them for each submission.
The catalogue of known mistakes, the solutions, the source notebooks, the other assignments and the kit's own
tests stay out.  Gradescope unpacks the zip in /autograder/source, which students never see.

The zip is the same bytes for the same files (fixed dates, sorted names), and written atomically.
"""
from __future__ import annotations

import argparse
import os
import shlex
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from autograder import PACKAGE_DIR, REPO_ROOT
from autograder.authoring.assignment import chosen_assignment
from autograder.grading.rubric import RubricError, Rubric, load_rubric
from autograder.grading.results_json import VISIBILITIES
from autograder.platforms import stored_references

HELP = ("build the autograder zip to upload to Gradescope: setup.sh, run_autograder and the kit with one "
        "assignment's hidden suites")
USAGE_ERROR = 2
HERE = Path(__file__).resolve().parent
SETUP_TEMPLATE = HERE / "gradescope_setup.sh"
RUN_TEMPLATE = HERE / "gradescope_run_autograder.sh"
EXECUTABLES = ("setup.sh", "run_autograder")
INSTALL_FILES = ("pyproject.toml", "requirements.lock")
CACHE_FOLDER = "autograder-cache"  # the suites' stored references; setup.sh installs them for the grader alone
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can hold: the same files always make the same zip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--assignment", help="assignment to grade (default: $AUTOGRADER_ASSIGNMENT, or the "
                                             "checkout's only assignment)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the zip to write (its folder must exist)")
    parser.add_argument("--visibility", choices=VISIBILITIES, default="visible",
                        help="when students see the results, for every test and the whole (Gradescope's words; "
                             "default visible)")
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="where Gradescope's machine refuses the sandbox, grade without it and say so in every "
                             "result (default: grade nothing there, and say why)")


def _error(message: str) -> int:
    print(f"python -m autograder export gradescope: error: {message}", file=sys.stderr)
    return USAGE_ERROR



def _package_files() -> list[Path]:
    """The engine as it runs: every file of the package but caches and hidden files.  All of it, so that its
    fingerprint (and so every grade's assignment_fingerprint) is the checkout's."""
    return [p for p in PACKAGE_DIR.rglob("*") if p.is_file() and p.suffix != ".pyc"
            and not any(part == "__pycache__" or part.startswith(".") for part in p.relative_to(PACKAGE_DIR).parts)]


def kit_files(rubric: Rubric) -> list[Path]:
    """The checkout's files that grading `rubric`'s assignment reads, besides the scripts."""
    files = _package_files() + [REPO_ROOT / name for name in INSTALL_FILES]
    root = rubric.folder.parent.parent  # the checkout's, or the course's for a course's own kit assignment
    packages = root / "assignments" / "__init__.py"  # the suites are imported as assignments.<name>.test_*
    files += [packages] if packages.is_file() else []
    # the folder's own files (rubric, suites, the helper modules they import, __init__.py, a conftest.py pytest
    # would load); not its catalogue/
    files += [p for p in rubric.folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    files += rubric.suite_files()
    if rubric.skip_when_unchanged:  # the rubric reads these cells' released source
        files.append(root / "release" / rubric.assignment / f"{rubric.assignment}.ipynb")
    return sorted(set(files))


def zip_name(path: Path, rubric: Rubric) -> str:
    """A file's name in the zip: relative to the checkout, or to the course for the course's own files (the
    image holds both in one folder, as a checkout does)."""
    root = REPO_ROOT if path.is_relative_to(REPO_ROOT) else rubric.folder.parent.parent
    return path.relative_to(root).as_posix()


def torch_version(lock: Path) -> str:
    for line in lock.read_text(encoding="utf-8").splitlines():
        name, _, version = line.strip().partition("==")
        if name.lower() == "torch" and version:
            return version
    raise RubricError(f"{lock} pins no torch version")


def _render(template: Path, values: dict[str, str]) -> str:
    text = template.read_text(encoding="utf-8")
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    return text


def scripts(rubric: Rubric, visibility: str, allow_unisolated: bool) -> dict[str, str]:
    """setup.sh and run_autograder for `rubric`'s assignment."""
    values = {"ASSIGNMENT": shlex.quote(rubric.assignment), "VISIBILITY": visibility,
              "MAX_SCORE": f"{rubric.max_score:g}", "ALLOW_UNISOLATED": "1" if allow_unisolated else "0",
              "TORCH_VERSION": shlex.quote(torch_version(REPO_ROOT / "requirements.lock"))}
    return {"setup.sh": _render(SETUP_TEMPLATE, values), "run_autograder": _render(RUN_TEMPLATE, values)}


def write_zip(path: Path, files: dict[str, bytes]) -> None:
    """`files` (name in the zip -> content) as a zip at `path`: the old file or the new one, never half of one.
    Private to its owner, like the hidden suites it holds."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(files):
                info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (stat.S_IFREG | (0o755 if name in EXECUTABLES else 0o644)) << 16
                archive.writestr(info, files[name])
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export(args: argparse.Namespace) -> int:
    if not args.output.parent.is_dir():
        return _error(f"{args.output.parent}: no such folder")
    if args.output.is_dir():
        return _error(f"{args.output}: is a folder; name the zip to write")
    try:
        assignment = chosen_assignment(args.assignment)
        if not assignment.isidentifier():  # the suites are imported as assignments.<name>
            raise RubricError(f"{assignment!r} is not an assignment's name")
        rubric = load_rubric(assignment)
        files = {zip_name(p, rubric): p.read_bytes() for p in kit_files(rubric)}
        files.update({name: text.encode() for name, text in scripts(rubric, args.visibility,
                                                                     args.allow_unisolated).items()})
        # the image's torch: the lock's version, from PyTorch's CPU-only index (gradescope_setup.sh)
        image_torch = torch_version(REPO_ROOT / "requirements.lock") + "+cpu"
    except RubricError as exc:
        return _error(str(exc))
    references, unshipped = stored_references.computed(rubric.assignment, image_torch)
    files.update({f"{CACHE_FOLDER}/{name}": data for name, data in references.items()})
    try:
        write_zip(args.output, files)
    except OSError as exc:
        return _error(f"{args.output}: {exc.strerror or exc}")
    isolation = ("grades without the sandbox where Gradescope refuses one" if args.allow_unisolated
                 else "grades nothing where Gradescope refuses the sandbox")
    warm = ("the suites' references computed, for every submission's container to start warm" if references
            else f"no stored references ({unshipped}): every submission's container computes them")
    print(f"wrote {args.output}: {len(files)} files for {rubric.assignment} ({rubric.max_score:g} points, "
          f"tests {args.visibility}; {isolation}; {warm})\n"
          "  upload it in Gradescope's Configure Autograder page, as a zip file upload with the Ubuntu 22.04 base image")
    return 0
