"""An assignment's rubric: its parts, their points and suites, and how test outcomes become scores.

A part's points are shared among its tests in proportion to their weights (default 1 per test function;
every parametrisation of a function shares that function's weight).  A part in which the submission reached
torch's own implementation of a graded operation scores 0.  Points follow measured behaviour:

- `structural` checks (what a constructor alone can pass) and `form` checks (the output's shape, dtype or
  type, a qualitative trend: what code that computes nothing right can pass) earn their points only when at
  least one of the part's value checks (all its other checks) passed, and together they earn at most
  `form_share` of the part (default 0.2): their shares are scaled down and the value checks' up to match.
- `own_parts` checks judge a part built on others (`built_on`) on the student's own sub-parts: the trusted
  side composes the expected output from the student's pieces and compares it with the student's whole.  They
  carry no points.  With `follow_through` (the default), when every one of them passed and a part this one is
  built on lost points, the failed checks are carried forward: the part earns at least its points less what
  only a right end-to-end result earns, `end_to_end_share` of them (default 0.05: a token, so that one mistake
  costs points once, in its own part, as a human grader's "error carried forward" does), and each failed check
  says which part to fix first.  `follow_through = false` grades it strictly.  While every check of the parts
  it is built on, and of its own part before it, passes, an own-parts check could change nothing: it is not run
  and passes (`Rubric.needed`).

`skip_when_unchanged` lists the grade_ids of locked instructor cells that grading does not need (plots).  A
locked cell is the instructor's on every front end (nbgrader restores one a student edited), so a
submission's cell carrying one of these grade_ids is never run, edited or not (autograder/host/source_cells.py;
the name is older than that rule).  Each must be a locked code cell of the release notebook.

Cells of the release that nbgrader leaves for manual grading (grade and solution: the written answers) are
not the rubric's: no part and no point of `max_score` is theirs, and grading never runs them.  The rubric
knows them (`graded_by_hand`: grade_id -> points, read from the release notebook) only so that every result
can say which points its autograded total leaves to the instructor.

`preload` names modules the zygote imports before it forks a child for this assignment: those the solution
reaches lazily and slowly (Adam's constructor imports torch._dynamo, 2 s), paid once per grading process
instead of once per submission, and never while a request's timer runs.

Rubrics and hidden suites live in `assignments/<name>/` of the course root (a course's own kit assignments,
added by `python -m autograder add-assignment`) or of the kit's checkout (its own three), outside the installed
`autograder` package: installing the kit never makes them importable.  autograder.model.course decides which.
"""
from __future__ import annotations

import difflib
import fnmatch
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from autograder import REPO_ROOT

from autograder.model.cells import (CHECK_CELL_STANDIN, UNCHANGED_CELL_STANDIN, ReleaseText, code_text, is_check_cell,
                                    nbgrader_of, text_key)
from autograder.model.course import assignment_names, assignment_root, course_root
from autograder.judging.hints import first_given
from autograder.judging.evidence import MAX_FIGURES, Figure

if TYPE_CHECKING:  # the judge imports pytest and torch; scoring needs neither
    from autograder.judging.judge import Outcome

ASSIGNMENTS = REPO_ROOT / "assignments"  # the checkout's; a course's own are under its root (model/course)
RELEASES = REPO_ROOT / "release"  # the trusted release notebooks: release/<name>/<name>.ipynb


class RubricError(Exception):
    pass


@dataclass(frozen=True)
class Part:
    name: str          # also the nbgrader grade_id of the notebook's test cell for this part
    title: str
    points: float
    suite: str         # suite file name, relative to the assignment's folder
    weights: dict[str, float] = field(default_factory=dict)
    structural: frozenset[str] = frozenset()  # test function names that judge structure, not behaviour
    forbidden_ops: tuple[str, ...] = ()  # torch's own implementations of what this part asks students to build
    off_limits: tuple[str, ...] = ()     # the same, as students call them (the notebook's policy table)
    built_on: tuple[str, ...] = ()       # earlier parts whose code this part's code uses
    form: frozenset[str] = frozenset()   # test function names that judge the output's form, not its values
    own_parts: frozenset[str] = frozenset()  # test function names that judge it on the student's own sub-parts
    follow_through: bool = True
    end_to_end_share: float = 0.05  # of its points: what only a right end-to-end result earns
    form_share: float = 0.2

    @property
    def gated(self) -> frozenset[str]:
        """checks that earn only beside a passing value check"""
        return self.structural | self.form


MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
HINT_WIDTH = 100  # a hint's lines in text reports: a notebook's output and a terminal show them without scrolling
STRUCTURE_ALONE = "structure and form alone earn no points: no check of this part's values passed"
PART_KEYS = {"name", "title", "points", "suite", "weights", "structural", "forbidden_ops", "off_limits", "built_on",
             "form", "own_parts", "follow_through", "end_to_end_share", "form_share"}
RUBRIC_KEYS = {"assignment", "fine", "skip_when_unchanged", "preload", "parts", "catalogue"}
CATALOGUE_KEYS = {"determinism", "demo"}


@dataclass(frozen=True)
class Rubric:
    assignment: str
    folder: Path
    parts: tuple[Part, ...]
    fine: tuple[str, ...] = ()  # torch functions students may use anywhere (the notebook's policy table)
    # grade_id -> the release's source of each cell in `skip_when_unchanged`: locked, never run
    skip_when_unchanged: Mapping[str, str] = field(default_factory=dict)
    preload: tuple[str, ...] = ()  # modules the zygote imports for this assignment's children
    # grade_id -> points of each cell of the release graded by hand (written answers): outside max_score
    graded_by_hand: Mapping[str, float] = field(default_factory=dict)
    # the release's locked check cells and skipped cells by their text: cells that are the release's whatever
    # their metadata (model/cells.ReleaseText)
    release_text: ReleaseText = field(default_factory=ReleaseText)

    @property
    def forbidden_ops(self) -> tuple[str, ...]:
        """Every part's forbidden operations: all are disabled in the child, whichever part calls them (the
        multi-head attention part may not use torch's attention either)."""
        return tuple(dict.fromkeys(op for p in self.parts for op in p.forbidden_ops))

    @property
    def torch_implementations(self) -> tuple[str, ...]:
        """Patterns of the names of torch's own implementations of what the parts ask students to build: the
        forbidden operations, and the last name of each off-limits entry (`torch.nn.BatchNorm1d / GroupNorm`
        names two).  What autograder.judging.resemblance compares submissions with."""
        names = {op for p in self.parts for op in p.forbidden_ops}
        for entry in (e for p in self.parts for e in p.off_limits):
            names.update(piece.strip().rsplit(".", 1)[-1] for piece in entry.split("/"))
        return tuple(sorted(n for n in names if n))

    @property
    def max_score(self) -> float:
        """The autograded points: the parts' (the points graded by hand are not in it)."""
        return sum(p.points for p in self.parts)

    @property
    def points_by_hand(self) -> float:
        return sum(self.graded_by_hand.values())

    def suite_files(self) -> list[Path]:
        return [self.folder / p.suite for p in self.parts]

    def needed(self, module: str, name: str, outcomes: Sequence[Outcome]) -> bool:
        """Whether a check can change a score or a message, given the outcomes before it (run_suite's
        `needed`).  An own-parts check carries no points and changes a score only when a part it is built on
        lost points; its message matters only when it fails.  So while every check of those parts, and every
        check of its own part before it, passed without reaching a forbidden operation, it is not run and
        passes (the parts come in the rubric's order, each after the parts it is built on; a suite puts its
        own-parts check after its part's value checks)."""
        part = next((p for p in self.parts if Path(p.suite).stem == module), None)
        if part is None or _base(name) not in part.own_parts:
            return True
        before = {Path(p.suite).stem for p in self.parts if p.name in part.built_on} | {module}
        return any(not o.passed or o.forbidden for o in outcomes if o.module in before)

    @property
    def part_names(self) -> dict[str, str]:
        """Suite file stem -> the part it checks (what the judge tells `Submission.begin_part`)."""
        return {Path(p.suite).stem: p.name for p in self.parts}


def _in_checkout(package: str, roots: tuple[Path, ...]) -> bool:
    return any((root / package).exists() or (root / f"{package}.py").exists() for root in roots)


def _folders(assignment: str, course: str | Path | None) -> tuple[Path, Path]:
    """The assignment's folder (manifest, suites) and its release folder: the course's when the course root
    holds its manifest, else the checkout's (ASSIGNMENTS, RELEASES)."""
    root = assignment_root(assignment, course)
    if root != REPO_ROOT:
        return root / "assignments" / assignment, root / "release" / assignment
    return ASSIGNMENTS / assignment, RELEASES / assignment


@dataclass(frozen=True)
class Manifest:
    """rubric.toml as written, every key checked: what its readers (this module's load_rubric, and the
    authoring tools' catalogue) take from it.  Nothing in the checkout beside it is read yet."""
    assignment: str
    parts: tuple[Part, ...]
    fine: tuple[str, ...]
    preload: tuple[str, ...]
    skip_when_unchanged: tuple[str, ...]
    catalogue: Mapping[str, Any]  # [catalogue]: determinism, demo (autograder.authoring.catalogue)


def read_manifest(path: Path) -> Manifest:
    """The one reader of rubric.toml.  Strict: an unknown key, at the top, in a part or in [catalogue], is an
    error naming the file, the key and the valid key nearest to it, since a misspelt key would silently change
    a grade (a misspelt `structural` lets structure earn on its own)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if unknown := _unknown_keys(data, RUBRIC_KEYS):
            raise RubricError(f"{path}: {unknown}")
        catalogue = data.get("catalogue", {})
        if not isinstance(catalogue, dict):
            raise TypeError("[catalogue] must be a table")
        if unknown := _unknown_keys(catalogue, CATALOGUE_KEYS):
            raise RubricError(f"{path}: [catalogue]: {unknown}")
        if not isinstance(data["parts"], list):
            raise TypeError("parts must be an array of [[parts]] tables")
        manifest = Manifest(str(data.get("assignment", "")), tuple(_part(path, p) for p in data["parts"]),
                            tuple(_names(data.get("fine", []))), tuple(_names(data.get("preload", []))),
                            tuple(_names(data.get("skip_when_unchanged", []))), catalogue)
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RubricError(f"{path}: {type(exc).__name__}: {exc}") from None
    bad = [name for name in manifest.preload if not MODULE_NAME.fullmatch(name)]
    if bad:
        raise RubricError(f"{path}: preload names no module: {', '.join(map(repr, bad))}")
    seen: set[str] = set()
    for part in manifest.parts:
        if part.name in seen:
            raise RubricError(f"{path}: two parts are named {part.name!r}")
        later = [b for b in part.built_on if b not in seen]
        if later:
            raise RubricError(f"{path}: part {part.name!r} is built on {', '.join(map(repr, later))}, which is not "
                              "a part before it")
        seen.add(part.name)
    return manifest


def has_rubric(assignment: str, course: str | Path | None = None) -> bool:
    """Whether the kit grades `assignment` with a rubric of its own (the course's, else the checkout's);
    every other assignment of a course is an ordinary nbgrader one (its test cells decide).  `course`: the
    course root (default: $AUTOGRADER_COURSE_ROOT, else the current directory)."""
    folder, _ = _folders(assignment, course)
    return (folder / "rubric.toml").is_file()


def load_rubric(assignment: str, notebook: Path | None = None, course: str | Path | None = None) -> Rubric:
    """`notebook` is the one whose cells `skip_when_unchanged` names: by default the committed release,
    which submissions are compared with; the release generator checks the source notebook it releases.
    `course`: the course root whose assignments/ is looked in before the checkout's (model/course)."""
    folder, releases = _folders(assignment, course)
    path = folder / "rubric.toml"
    if not path.is_file():
        known = sorted({*assignment_names(course), *(p.parent.name for p in folder.parent.glob("*/rubric.toml"))})
        raise RubricError(f"{path}: no such assignment {assignment!r} (known: {', '.join(known) or 'none'}; the "
                          f"course root {course_root(course)} holds no assignments/{assignment}/rubric.toml: "
                          "python -m autograder add-assignment puts one there)")
    manifest = read_manifest(path)
    rubric = Rubric(manifest.assignment or assignment, folder, manifest.parts, manifest.fine,
                    preload=manifest.preload)
    # the zygote never imports the checkout's own code (hidden suites, solutions): only installed libraries
    ours = [name for name in rubric.preload
            if _in_checkout(name.partition(".")[0], (REPO_ROOT, folder.parent.parent))]
    if ours:
        raise RubricError(f"{path}: preload names modules of the checkout, which the zygote never imports: "
                          f"{', '.join(ours)}")
    parts, skippable = manifest.parts, manifest.skip_when_unchanged
    for part in parts:
        if not (folder / part.suite).is_file():
            raise RubricError(f"{path}: part {part.name!r} names a missing suite {part.suite}")
        # a misspelt or renamed check would silently earn points on its own again
        source = (folder / part.suite).read_text(encoding="utf-8")
        checks = set(re.findall(r"^def (test_\w+)\(", source, re.M))
        for key, names in (("structural", part.structural), ("form", part.form), ("own_parts", part.own_parts)):
            unknown = sorted(names - checks)
            if unknown:
                raise RubricError(f"{path}: part {part.name!r} lists {key} checks that {part.suite} does not "
                                  f"define: {', '.join(unknown)}")
        if not checks - part.gated - part.own_parts:
            raise RubricError(f"{path}: part {part.name!r} has no value check: every check of {part.suite} is "
                              "structural, form or own_parts, so none could earn its points")
    notebook = notebook or releases / f"{assignment}.ipynb"
    # a course without a release has nothing graded by hand that the kit could know
    if not skippable and not notebook.is_file():
        return rubric
    cells = _notebook_cells(path, notebook, "skip_when_unchanged" if skippable else "the rubric")
    if skippable:
        rubric = replace(rubric, skip_when_unchanged=_locked_sources(path, notebook, cells, skippable))
    return replace(rubric, graded_by_hand=_graded_by_hand(path, notebook, cells),
                   release_text=_release_text(cells, rubric.skip_when_unchanged))


def _notebook_cells(path: Path, notebook: Path, needed_by: str) -> list[Any]:
    """The cells of the release notebook, read once for everything the rubric takes from it."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        if not isinstance(cells, list):
            raise TypeError("its cells are not a list")
        return cells
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RubricError(f"{path}: {needed_by} needs the notebook {notebook}, which cannot be read "
                          f"({type(exc).__name__}: {exc})") from None


def _release_text(cells: list[Any], skipped: Mapping[str, str]) -> ReleaseText:
    """The release's locked code cells that never run as a student's (its autograded test cells and the cells
    of `skip_when_unchanged`), by their text (model/cells.text_key)."""
    standin_of = {}
    for cell in cells:
        meta, text = nbgrader_of(cell), code_text(cell) if isinstance(cell, dict) else None
        if cell.get("cell_type") != "code" or text is None or meta.get("locked") is not True or not text_key(text):
            continue
        if is_check_cell(cell):
            standin_of[text_key(text)] = CHECK_CELL_STANDIN
        elif meta.get("grade_id") in skipped:
            standin_of[text_key(text)] = UNCHANGED_CELL_STANDIN
    return ReleaseText(standin_of)


def _graded_by_hand(path: Path, notebook: Path, cells: list[Any]) -> dict[str, float]:
    """grade_id -> points of each cell nbgrader grades by hand (grade and solution) in the notebook."""
    try:
        return {str(meta["grade_id"]): float(meta.get("points", 0)) for cell in cells
                if (meta := nbgrader_of(cell)).get("grade") and meta.get("solution")}
    except (ValueError, KeyError, TypeError) as exc:
        raise RubricError(f"{path}: the notebook {notebook} cannot be read for its cells graded by hand "
                          f"({type(exc).__name__}: {exc})") from None


def _locked_sources(path: Path, notebook: Path, cells: list[Any], grade_ids: list[str]) -> dict[str, str]:
    """grade_id -> source of each listed cell of the notebook, which must be exactly one locked code cell
    that is not a student's solution: skipping anything else would skip code the grade may depend on."""
    sources = {}
    for grade_id in grade_ids:
        found = [c for c in cells if nbgrader_of(c).get("grade_id") == grade_id]
        if len(found) != 1:
            raise RubricError(f"{path}: skip_when_unchanged names {grade_id!r}, but {notebook} has "
                              f"{len(found) or 'no'} cells with that grade_id (one is needed)")
        cell, meta = found[0], nbgrader_of(found[0])
        source = code_text(cell)
        if cell.get("cell_type") != "code" or source is None:
            raise RubricError(f"{path}: skip_when_unchanged names {grade_id!r}, which is not a code cell in "
                              f"{notebook}")
        if meta.get("locked") is not True or meta.get("solution"):
            raise RubricError(f"{path}: skip_when_unchanged names {grade_id!r}, which is not a locked cell in "
                              f"{notebook} (only the instructor's locked cells may be skipped)")
        sources[grade_id] = source
    return sources


def _part(path: Path, table: Any) -> Part:
    if not isinstance(table, dict):
        raise TypeError("each [[parts]] entry must be a table")
    if unknown := _unknown_keys(table, PART_KEYS):
        raise RubricError(f"{path}: part {table.get('name')!r}: {unknown}")
    shares = {"form_share": float(table.get("form_share", 0.2)),
              "end_to_end_share": float(table.get("end_to_end_share", 0.05))}
    if not all(0.0 <= v <= 1.0 for v in shares.values()) or type(table.get("follow_through", True)) is not bool:
        raise ValueError("end_to_end_share and form_share must lie in [0, 1], follow_through must be true or false")
    return Part(table["name"], table.get("title", table["name"]), float(table["points"]), table["suite"],
                {k: float(v) for k, v in table.get("weights", {}).items()},
                frozenset(_names(table.get("structural", []))), tuple(_names(table.get("forbidden_ops", []))),
                tuple(_names(table.get("off_limits", []))), tuple(_names(table.get("built_on", []))),
                frozenset(_names(table.get("form", []))), frozenset(_names(table.get("own_parts", []))),
                table.get("follow_through", True), **shares)


def _unknown_keys(table: Mapping[str, Any], known: set[str]) -> str:
    """What is wrong with `table`'s keys, each unknown one with the valid key it most resembles; "" if nothing:
    a misspelt key would otherwise be ignored (a misspelt `structural` would let constructors earn points)."""
    def nearest(key: str) -> str:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        return f" (did you mean {close[0]!r}?)" if close else ""
    unknown = sorted(set(table) - known)
    if not unknown:
        return ""
    return (f"unknown key{'s' * (len(unknown) > 1)} " + ", ".join(f"{k!r}{nearest(k)}" for k in unknown)
            + f"; the valid keys are {', '.join(sorted(known))}")


def _names(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise TypeError("structural, form, own_parts, built_on, forbidden_ops, off_limits, fine and "
                        "skip_when_unchanged must be lists of names")
    return value


@dataclass
class TestScore:
    part: str
    name: str
    score: float
    max_score: float
    passed: bool
    message: str
    figure: Figure | None = None  # what a failed check saw, for the pictures in feedback
    hints: tuple[str, ...] = ()   # a failed check's advice, each whole (never parsed out of `message`)

    @property
    def shown_text(self) -> str:
        """The message as a report of this check alone shows it: each hint on a line of its own after it.  A
        report of a whole part shows PartScore.shown_texts instead, where a hint is given once."""
        return self.text_with(self.hints)

    def text_with(self, hints: tuple[str, ...], repeated: bool = False) -> str:
        """The one place hints become text (the feedback page shows them apart, autograder.reports.html):
        `hints` each on a line of its own, wrapped short, and `repeated` a pointer to the same hint above."""
        lines = [self.message]
        for hint in hints:  # each of a hint's own lines wrapped apart: its line breaks are kept
            for i, line in enumerate(hint.split("\n")):
                lead = "  Hint: " if i == 0 else "        "
                lines.append(textwrap.fill(line, HINT_WIDTH, initial_indent=lead, subsequent_indent=" " * 8,
                                           break_long_words=False, break_on_hyphens=False) or lead.rstrip())
        if repeated:
            lines.append("  Hint: the same as above, in this part")
        return "\n".join(lines)

    @property
    def earned_all(self) -> bool:
        """Whether the check counts as passed in every report: it passed and earned its whole share (a passed
        check of a part that used torch's own implementation earned nothing; an own-parts check has no share)."""
        return self.passed and self.score >= self.max_score


@dataclass
class PartScore:
    part: Part
    score: float
    tests: list[TestScore]
    forbidden: tuple[str, ...]

    def shown_texts(self) -> list[str]:
        """Each check's text as a report of the whole part shows it, in the checks' order: a hint an earlier
        check of the part gave is not repeated (one bug failing eight checks is named once), the check points
        up to it instead."""
        given = first_given([test.hints for test in self.tests])
        return [test.text_with(new, repeated) for test, (new, repeated) in zip(self.tests, given)]

    def forbidden_notice(self, names: str | None = None) -> str:
        """The one wording students see when a part scored 0 for torch's own implementation (`names` as the
        writer already made them safe to show; by default the operations joined)."""
        names = ", ".join(self.forbidden) if names is None else names
        if any(fnmatch.fnmatchcase(op, pattern) for op in self.forbidden for pattern in self.part.forbidden_ops):
            return f"0 points: torch's own implementation was used ({names}); this part asks you to build it yourself."
        # reached through code of another part (a model calling the student's attention, say)
        return (f"0 points: your code reached torch's own implementation ({names}) of what the assignment asks you "
                "to build; every part whose checks reach it scores 0, so build it yourself where your code calls it.")


def _base(name: str) -> str:
    return name.split("[", 1)[0]  # a parametrisation's test function


def _shares(part: Part, graded: list[Outcome]) -> dict[str, float]:
    """Each graded check's share of the part's points: by weight, a function's parametrisations splitting its
    weight, structural and form checks together at most `form_share` of the part."""
    per_function: dict[str, int] = {}
    for o in graded:
        per_function[_base(o.name)] = per_function.get(_base(o.name), 0) + 1
    weight = {o.name: part.weights.get(_base(o.name), 1.0) / per_function[_base(o.name)] for o in graded}
    total = sum(weight.values())
    if not total:
        return {o.name: 0.0 for o in graded}
    shares = {name: part.points * w / total for name, w in weight.items()}
    gated = sum(v for name, v in shares.items() if _base(name) in part.gated)
    cap = part.form_share * part.points
    if cap < gated < part.points:
        rest = part.points - gated
        shares = {name: v * (cap / gated if _base(name) in part.gated else (part.points - cap) / rest)
                  for name, v in shares.items()}
    return shares


def _fix_first(parts: list[PartScore]) -> str:
    return ", ".join(f"{p.part.title} ({p.part.name})" for p in parts)


def score(rubric: Rubric, outcomes: list[Outcome]) -> list[PartScore]:
    results: list[PartScore] = []
    by_name: dict[str, PartScore] = {}
    figures = 0  # a grade carries at most MAX_FIGURES, the first ones in the suites' order
    for part in rubric.parts:
        module = Path(part.suite).stem
        mine = [o for o in outcomes if o.module == module]
        own = [o for o in mine if _base(o.name) in part.own_parts]
        graded = [o for o in mine if _base(o.name) not in part.own_parts]
        shares = _shares(part, graded)
        forbidden = tuple(sorted({f for o in mine for f in o.forbidden}))
        values_work = any(o.passed for o in graded if _base(o.name) not in part.gated)
        # the parts this one is built on that lost points: where a failure here may come from
        upstream = [by_name[b] for b in part.built_on if round(by_name[b].score, 4) < by_name[b].part.points]
        tests = []
        for o in mine:
            passed, message = o.passed, o.message
            if passed and not values_work and _base(o.name) in part.gated:
                passed, message = False, STRUCTURE_ALONE
            share = shares.get(o.name, 0.0)
            earned = share if passed and not forbidden else 0.0
            figure = o.figure if not passed and figures < MAX_FIGURES else None
            figures += figure is not None
            tests.append(TestScore(part.name, o.name, earned, share, passed, message, figure,
                                   () if passed else o.hints))
        strict = sum(t.score for t in tests)
        floor = part.points * (1 - part.end_to_end_share)
        carried = (part.follow_through and own and all(o.passed for o in own) and upstream and not forbidden
                   and strict < floor)
        if carried:  # the student's own wiring is right: the loss is the earlier part's
            ratio = (floor - strict) / (part.points - strict)
            for t in tests:
                if not t.passed and t.max_score:
                    t.score = t.max_score * ratio
                    t.message = (f"Carried forward from {_fix_first(upstream)}: this part is right on your own "
                                 f"parts (the own-parts check passed), so this failure comes from there; fix "
                                 f"that part first. {t.message}")
        elif upstream:
            for t in tests:
                if not t.passed and t.max_score and t.message != STRUCTURE_ALONE:
                    t.message = (f"{_fix_first(upstream)}, which this part is built on, also lost points: fix "
                                 f"that part first. {t.message}")
        results.append(PartScore(part, sum(t.score for t in tests), tests, forbidden))
        by_name[part.name] = results[-1]
    return results
