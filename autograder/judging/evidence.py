"""Evidence that a failing check attaches to its verdict, for the pictures students see: a few small arrays
computed on the trusted side from the values the submission returned, never from anything the submission
says about itself.

Plain Python values (no torch), because the processes that write and read results never import the judge.
Every record is checked on construction and again when read back from results.json (`from_json`), so a
forged or corrupted file (wrong types, NaN, oversized arrays) is refused exactly like a buggy check would be.

Three kinds:

* `Dependence` ("causal"): for each input, which output positions t depend on which input positions j, as
  rows of '1' (depends), '0' (does not) and '?' (not measured).  A causal computation may depend on j <= t
  only; anything above the diagonal is a leak from the future.
* `ErrorMap` ("mismatch"): |error| / allowed error for each cell of the failing output, worst over the
  batch and over each downsampled block: above 1 is outside the tolerance.
* `Curves` ("curves"): the submission's values against the reference's as series of (x, y) points.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

MAX_SIDE = 64         # rows and columns of a matrix or map
MAX_INPUTS = 4        # matrices of one Dependence
MAX_SERIES = 6        # series of one Curves
MAX_POINTS = 400      # points of one series
MAX_TEXT = 200        # characters of a title or label
MAX_SHAPE_DIMS = 8
MAX_RATIO = 1e6       # error ratios are clipped to this
NON_FINITE = -1.0     # ErrorMap cell: the output is NaN or inf where the reference is finite
MAX_FIGURES = 24      # per grade: what results.json may carry, whatever fails
DEPENDENCE_SYMBOLS = frozenset("01?")
METHODS = ("gradient", "perturbation")


class EvidenceError(ValueError):
    """A record that is not evidence this kit writes."""


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise EvidenceError(what)


def _is_text(value: object) -> bool:
    return type(value) is str and len(value) <= MAX_TEXT


def _is_float(value: object) -> bool:
    return type(value) is float and math.isfinite(value)


def _is_tuple_of(value: object, test: Any, limit: int) -> bool:
    return type(value) is tuple and len(value) <= limit and all(test(v) for v in value)


@dataclass(frozen=True)
class Dependence:
    title: str
    method: str                        # one of METHODS: how dependence was measured
    inputs: tuple[str, ...]            # one name per matrix
    required: tuple[bool, ...]         # per input: must output t depend on every position j <= t
    matrices: tuple[tuple[str, ...], ...]  # per input, one row per output position, one symbol per input position

    kind = "causal"

    def __post_init__(self) -> None:
        _require(_is_text(self.title) and self.method in METHODS, "causal: bad title or method")
        _require(_is_tuple_of(self.inputs, _is_text, MAX_INPUTS) and len(self.inputs) >= 1, "causal: bad inputs")
        _require(_is_tuple_of(self.required, lambda v: type(v) is bool, MAX_INPUTS)
                 and len(self.required) == len(self.inputs), "causal: bad required flags")
        _require(type(self.matrices) is tuple and len(self.matrices) == len(self.inputs),
                 "causal: one matrix per input")
        for rows in self.matrices:
            _require(_is_tuple_of(rows, lambda r: type(r) is str and 0 < len(r) <= MAX_SIDE, MAX_SIDE) and rows
                     and len({len(r) for r in rows}) == 1 and all(set(r) <= DEPENDENCE_SYMBOLS for r in rows),
                     f"causal: a matrix is not 1 to {MAX_SIDE} equal rows of 0, 1 and ?")


@dataclass(frozen=True)
class ErrorMap:
    title: str
    shape: tuple[int, ...]             # the compared output's shape
    rows: str                          # what a row stands for
    columns: str                       # what a column stands for
    groups: int                        # the rows come in this many equal blocks (heads); 1 when they do not
    ratio: tuple[tuple[float, ...], ...]  # |error| / allowed error, or NON_FINITE

    kind = "mismatch"

    def __post_init__(self) -> None:
        _require(all(_is_text(t) for t in (self.title, self.rows, self.columns)), "mismatch: bad title or labels")
        _require(_is_tuple_of(self.shape, lambda v: type(v) is int and 0 <= v < 2 ** 31, MAX_SHAPE_DIMS),
                 "mismatch: bad shape")
        _require(_is_tuple_of(self.ratio, lambda r: _is_tuple_of(r, _is_ratio, MAX_SIDE) and r, MAX_SIDE)
                 and self.ratio and len({len(r) for r in self.ratio}) == 1,
                 f"mismatch: the map is not 1 to {MAX_SIDE} equal rows of ratios")
        _require(type(self.groups) is int and self.groups >= 1 and len(self.ratio) % self.groups == 0,
                 "mismatch: the row groups do not divide the rows")


def _is_ratio(value: object) -> bool:
    return _is_float(value) and (value == NON_FINITE or 0.0 <= value <= MAX_RATIO)


@dataclass(frozen=True)
class Series:
    label: str
    student: bool                      # the submission's values (drawn as points) or the reference (a line)
    x: tuple[float, ...]
    y: tuple[float | None, ...]        # None: no finite number came back for that x

    def __post_init__(self) -> None:
        _require(_is_text(self.label) and type(self.student) is bool, "curves: bad series label")
        _require(_is_tuple_of(self.x, _is_float, MAX_POINTS) and self.x, "curves: bad x values")
        _require(_is_tuple_of(self.y, lambda v: v is None or _is_float(v), MAX_POINTS)
                 and len(self.y) == len(self.x), "curves: bad y values")


@dataclass(frozen=True)
class Curves:
    title: str
    x_label: str
    y_label: str
    log_y: bool
    series: tuple[Series, ...]

    kind = "curves"

    def __post_init__(self) -> None:
        _require(all(_is_text(t) for t in (self.title, self.x_label, self.y_label)) and type(self.log_y) is bool,
                 "curves: bad title or labels")
        _require(_is_tuple_of(self.series, lambda s: type(s) is Series, MAX_SERIES) and self.series,
                 "curves: bad series")


Figure = Union[Dependence, ErrorMap, Curves]
FIGURE_TYPES = (Dependence, ErrorMap, Curves)


def to_json(figure: Figure) -> dict[str, Any]:
    if isinstance(figure, Dependence):
        return {"kind": figure.kind, "title": figure.title, "method": figure.method, "inputs": list(figure.inputs),
                "required": list(figure.required), "matrices": [list(rows) for rows in figure.matrices]}
    if isinstance(figure, ErrorMap):
        return {"kind": figure.kind, "title": figure.title, "shape": list(figure.shape), "rows": figure.rows,
                "columns": figure.columns, "groups": figure.groups, "ratio": [list(r) for r in figure.ratio]}
    return {"kind": figure.kind, "title": figure.title, "x_label": figure.x_label, "y_label": figure.y_label,
            "log_y": figure.log_y, "series": [{"label": s.label, "student": s.student, "x": list(s.x),
                                               "y": list(s.y)} for s in figure.series]}


def _fields(data: object, keys: set[str]) -> dict[str, Any]:
    _require(type(data) is dict and set(data) == keys, f"expected exactly the fields {sorted(keys)}")
    return data


def _tuple(value: object, limit: int) -> tuple:
    """A JSON list as a tuple, refused before anything iterates over a huge one."""
    _require(type(value) is list and len(value) <= limit, f"expected a list of at most {limit} items")
    return tuple(value)


def from_json(data: object) -> Figure:
    """The record `to_json` made; EvidenceError for anything else."""
    kind = data.get("kind") if type(data) is dict else None
    if kind == Dependence.kind:
        d = _fields(data, {"kind", "title", "method", "inputs", "required", "matrices"})
        return Dependence(d["title"], d["method"], _tuple(d["inputs"], MAX_INPUTS), _tuple(d["required"], MAX_INPUTS),
                          tuple(_tuple(rows, MAX_SIDE) for rows in _tuple(d["matrices"], MAX_INPUTS)))
    if kind == ErrorMap.kind:
        d = _fields(data, {"kind", "title", "shape", "rows", "columns", "groups", "ratio"})
        return ErrorMap(d["title"], _tuple(d["shape"], MAX_SHAPE_DIMS), d["rows"], d["columns"], d["groups"],
                        tuple(_tuple(r, MAX_SIDE) for r in _tuple(d["ratio"], MAX_SIDE)))
    if kind == Curves.kind:
        d = _fields(data, {"kind", "title", "x_label", "y_label", "log_y", "series"})
        series = []
        for s in _tuple(d["series"], MAX_SERIES):
            s = _fields(s, {"label", "student", "x", "y"})
            series.append(Series(s["label"], s["student"], _tuple(s["x"], MAX_POINTS), _tuple(s["y"], MAX_POINTS)))
        return Curves(d["title"], d["x_label"], d["y_label"], d["log_y"], tuple(series))
    raise EvidenceError(f"unknown kind of evidence {(kind if type(kind) is str else type(kind).__name__)[:40]!r}")
