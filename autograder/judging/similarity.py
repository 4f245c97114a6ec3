"""Which submissions of a class resemble each other, in the code their students wrote: for review, never scored.

Each submission's cells are read as grading reads them (autograder.host.source_cells); what the release gave
every student is then taken away, so that it never counts as resemblance: cells identical to a code cell of
the release notebook (the imports, the check cells, the plots) and the stand-ins of check and locked cells are
dropped, and within the cells that remain every stretch of NOISE tokens that also occurs anywhere in the
release's code (a stub's signature and docstring, a check cell pasted into a .py file) is not counted.  Two
students who handed in the stubs have nothing of their own, and nothing in common.

The rest is compared the way autograder.judging.resemblance compares a submission with torch's own code, with
its tokens and its parameters: identifiers, numbers and strings lose their spelling (renaming changes nothing)
while attribute names and operators keep theirs; the NOISE-grams are hashed and winnowed (Schleimer, Wilkerson
and Aiken, 2003), so any shared run of GUARANTEE tokens is seen, wherever it is (reordered functions and cells
change only the few k-grams across their boundaries).  A pair's score is the share of the smaller side's
fingerprints that the other side holds too (a student who copied one part from a complete solution scores as
high as a whole copy); a pair is listed "to review" when its score is at least REVIEW_SHARE and it shares at
least MIN_SHARED fingerprints (about six lines of code: a few lines that everyone writes alike, such as four
nn.Linear layers with the names the contract fixes, are not enough on their own).  Each submission is also
compared with torch's own implementations of the graded operations: autograder.judging.resemblance's corpus
and rule, as grading reports them.

Nothing here changes a grade: the report is for an instructor, who decides.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Iterable, Sequence

from autograder.model.cells import CHECK_CELL_STANDIN, UNCHANGED_CELL_STANDIN
from autograder.judging import resemblance
from autograder.judging.resemblance import NOISE, WINDOW, Resemblance, kgram_hashes, normalised_tokens

REVIEW_SHARE = 0.5   # a pair whose score is at least this is listed "to review" ...
MIN_SHARED = 10      # ... when it also shares at least this many fingerprints


@dataclass(frozen=True)
class Where:
    cell: int    # index into the submission's own cells
    first: int   # lines of that cell, from 1
    last: int


@dataclass
class Written:
    """What one student wrote: the cells left once the release's are dropped, and their fingerprints."""
    student: str
    cells: list[str] = field(default_factory=list)
    prints: dict[int, Where] = field(default_factory=dict)        # the student's own fingerprints
    all_prints: dict[int, Where] = field(default_factory=dict)    # release text included: torch is compared with it
    torch: list[Resemblance] = field(default_factory=list)
    torch_lines: dict[str, list[Where]] = field(default_factory=dict)  # function -> where the submission holds it
    unreadable: str | None = None


@dataclass(frozen=True)
class Region:
    a: Where
    b: Where


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    shared: int
    share_a: float   # of a's own fingerprints, found in b
    share_b: float
    regions: tuple[Region, ...]

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)

    def to_review(self, threshold: float = REVIEW_SHARE) -> bool:
        return self.score >= threshold and self.shared >= MIN_SHARED


@dataclass
class Report:
    assignment: str
    submissions: list[Written]
    pairs: list[Pair]            # every pair sharing anything, highest score first
    threshold: float = REVIEW_SHARE

    @property
    def to_review(self) -> list[Pair]:
        return [p for p in self.pairs if p.to_review(self.threshold)]

    def written(self, student: str) -> Written:
        return next(w for w in self.submissions if w.student == student)

    def as_json(self) -> dict:
        return {"assignment": self.assignment, "threshold": self.threshold, "min_shared": MIN_SHARED,
                "pairs": [{"a": p.a, "b": p.b, "score": round(p.score, 4), "shared": p.shared,
                           "to_review": p.to_review(self.threshold)} for p in self.pairs],
                "torch": {w.student: [[r.function, r.share] for r in w.torch] for w in self.submissions if w.torch},
                "unreadable": {w.student: w.unreadable for w in self.submissions if w.unreadable}}


# -- the release ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Release:
    cells: frozenset[str]      # stripped texts of its code cells and the grader's stand-ins
    kgrams: frozenset[int]     # every NOISE-gram of its code, not only the winnowed ones

    @classmethod
    def of(cls, code: Iterable[str]) -> "Release":
        code = [*code, CHECK_CELL_STANDIN, UNCHANGED_CELL_STANDIN]
        kgrams = {h for cell in code for h in kgram_hashes([w for w, _ in normalised_tokens(cell)])}
        return cls(frozenset(c.strip() for c in code), frozenset(kgrams))


# -- fingerprints with their places ---------------------------------------------------------------------------

def placed_fingerprints(source: str, cell: int) -> dict[int, Where]:
    """resemblance.fingerprints(source), each with the lines its k-gram covers (its first occurrence)."""
    tokens = normalised_tokens(source)
    hashes = kgram_hashes([w for w, _ in tokens])
    if not hashes:
        return {}
    starts = ({min(range(len(hashes)), key=hashes.__getitem__)} if len(hashes) <= WINDOW else
              {min(range(i, i + WINDOW), key=hashes.__getitem__) for i in range(len(hashes) - WINDOW + 1)})
    found: dict[int, Where] = {}
    for i in sorted(starts):
        found.setdefault(hashes[i], Where(cell, tokens[i][1], tokens[i + NOISE - 1][1]))
    return found


def written(student: str, cells: Sequence[str], release: Release, torch_names: tuple[str, ...]) -> Written:
    own = [c for c in cells if c.strip() and c.strip() not in release.cells]
    result = Written(student, own)
    for index, cell in enumerate(own):
        for h, where in placed_fingerprints(cell, index).items():
            result.all_prints.setdefault(h, where)
            if h not in release.kgrams:
                result.prints.setdefault(h, where)
    if torch_names:
        result.torch = resemblance.resemblances(own, torch_names)
        corpus = resemblance.corpus(torch_names)
        for found in result.torch:
            result.torch_lines[found.function] = sorted({result.all_prints[h] for h in corpus[found.function]
                                                         if h in result.all_prints}, key=_order)
    return result


def _order(where: Where) -> tuple[int, int, int]:
    return where.cell, where.first, where.last


def _regions(a: Written, b: Written, shared: set[int]) -> tuple[Region, ...]:
    """The shared fingerprints as regions: neighbouring ones, in the same cells of both, merged."""
    merged: list[list[Where]] = []
    for h in sorted(shared, key=lambda h: (_order(a.prints[h]), _order(b.prints[h]))):
        wa, wb = a.prints[h], b.prints[h]
        if merged:
            ra, rb = merged[-1]
            if (ra.cell == wa.cell and rb.cell == wb.cell and wa.first <= ra.last + 1
                    and wb.first <= rb.last + 1 and wb.last >= rb.first - 1):
                merged[-1] = [Where(ra.cell, ra.first, max(ra.last, wa.last)),
                              Where(rb.cell, min(rb.first, wb.first), max(rb.last, wb.last))]
                continue
        merged.append([wa, wb])
    return tuple(Region(ra, rb) for ra, rb in merged)


def compare(a: Written, b: Written) -> Pair | None:
    shared = a.prints.keys() & b.prints.keys()
    if not shared:
        return None
    return Pair(a.student, b.student, len(shared), len(shared) / len(a.prints), len(shared) / len(b.prints),
                _regions(a, b, shared))


def report(assignment: str, submissions: Iterable[tuple[str, Sequence[str] | str]], release: Sequence[str],
           torch_names: tuple[str, ...] = (), threshold: float = REVIEW_SHARE) -> Report:
    """The class report: `submissions` are (student, cells), or (student, why it could not be read); `release`
    is the code cells of the release notebook; `torch_names` the rubric's torch_implementations."""
    known = Release.of(release)
    students = [Written(s, unreadable=cells) if isinstance(cells, str) else written(s, cells, known, torch_names)
                for s, cells in submissions]
    pairs = [p for a, b in combinations([w for w in students if w.prints], 2) if (p := compare(a, b))]
    pairs.sort(key=lambda p: (-p.score, -p.shared, p.a, p.b))
    return Report(assignment, students, pairs, threshold)

