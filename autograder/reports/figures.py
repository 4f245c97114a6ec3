"""Pictures for feedback, as PNG bytes: a failing check's evidence (autograder.judging.evidence) and a class's
score distribution.  Shared by the HTML pages (autograder.reports.html) and nbgrader's cells.

Drawn with matplotlib's Agg canvas directly (no pyplot, so no backend or global figure state) with fixed
margins (a layout engine would triple the drawing time), in matplotlib's default style whatever the
environment configured (a matplotlibrc, usetex): the same evidence gives the same bytes in every process, so
a grade reused from results.json renders exactly as a fresh one.  Every text drawn comes from the trusted
side (titles the checks wrote, labels of this module) and has its `$` escaped, so none is read as mathtext.
"""
from __future__ import annotations

import io
import math
import textwrap
from typing import Sequence

import matplotlib
import matplotlib.style
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, ListedColormap, TwoSlopeNorm
from matplotlib.figure import Figure as Canvas
from matplotlib.patches import Patch

from autograder.judging.evidence import Curves, Dependence, ErrorMap, Figure, NON_FINITE

DPI = 100
COLOURS = 64  # a palette this small looks the same for flat charts and makes a third of the bytes

# dependence cells: (colour, legend) by category
BLOCKED, ALLOWED, DEPENDS, INDEPENDENT, MISSING, LEAK, UNMEASURED = range(7)
CATEGORIES = (("#ffffff", "blocked: j > t"), ("#9ecae1", "allowed: j <= t"), ("#3b6fb6", "depends (allowed)"),
              ("#e8e8e8", "does not depend"), ("#f39c12", "must depend, does not"),
              ("#d62728", "depends on the future"), ("#9a9a9a", "not measured"))


def png(figure: Figure) -> bytes:
    """The picture of one check's evidence."""
    if isinstance(figure, Dependence):
        return _render(_draw_dependence, figure)
    if isinstance(figure, ErrorMap):
        return _render(_draw_error_map, figure)
    return _render(_draw_curves, figure)


def score_histogram(scores: Sequence[float], max_score: float) -> bytes:
    """How many students scored how much, in ten equal bins from 0 to `max_score`."""
    return _render(_draw_histogram, list(scores), max_score)


def _render(draw, *args) -> bytes:
    with matplotlib.style.context("default"):
        canvas = Canvas(dpi=DPI)
        agg = FigureCanvasAgg(canvas)
        draw(canvas, *args)
        agg.draw()
        image = PIL.Image.frombuffer("RGBA", agg.get_width_height(), agg.buffer_rgba(), "raw", "RGBA", 0, 1)
    palette = image.convert("RGB").quantize(COLOURS, method=PIL.Image.Quantize.MEDIANCUT,
                                            dither=PIL.Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="png", optimize=True)  # no text chunks: the bytes depend on the drawing only
    return buffer.getvalue()


def _margins(canvas: Canvas, *, left: float, right: float, top: float, bottom: float, wspace: float = 0.2,
             hspace: float = 0.2) -> None:
    """Margins in inches, whatever the picture's size."""
    width, height = canvas.get_size_inches()
    canvas.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                           bottom=bottom / height, wspace=wspace, hspace=hspace)


def _plain(text: str) -> str:
    return text.replace("$", r"\$")


def _wrapped(text: str, width: int) -> str:
    text = _plain(text)
    return "\n".join(wrapped for line in text.split("\n") for wrapped in textwrap.wrap(line, width)) or " "


def _ticks(ax, rows: int, columns: int) -> None:
    step_r, step_c = max(1, math.ceil(rows / 16)), max(1, math.ceil(columns / 16))
    ax.set_xticks(range(0, columns, step_c))
    ax.set_yticks(range(0, rows, step_r))
    ax.tick_params(labelsize=7)


def _categories(figure: Dependence, index: int) -> list[list[int]]:
    grid = []
    for t, row in enumerate(figure.matrices[index]):
        cells = []
        for j, symbol in enumerate(row):
            if symbol == "?":
                cells.append(UNMEASURED)
            elif j > t:
                cells.append(LEAK if symbol == "1" else BLOCKED)
            elif symbol == "1":
                cells.append(DEPENDS)
            else:
                cells.append(MISSING if figure.required[index] else INDEPENDENT)
        grid.append(cells)
    return grid


def _draw_dependence(canvas: Canvas, figure: Dependence) -> None:
    rows, columns = len(figure.matrices[0]), len(figure.matrices[0][0])
    panels = 1 + len(figure.inputs)
    across = min(panels, 2)  # two panels a row: still readable when a phone shrinks the picture
    down = math.ceil(panels / across)
    canvas.set_size_inches(0.8 + 2.7 * across, 1.7 + 2.8 * down)
    _margins(canvas, left=0.7, right=0.2, top=0.85, bottom=1.05, wspace=0.35, hspace=0.45)
    cmap = ListedColormap([colour for colour, _ in CATEGORIES])
    norm = BoundaryNorm([c - 0.5 for c in range(len(CATEGORIES) + 1)], len(CATEGORIES))
    allowed = [[ALLOWED if j <= t else BLOCKED for j in range(columns)] for t in range(rows)]
    grids = [("allowed pattern", allowed)]
    shown = {BLOCKED, ALLOWED}
    for i, name in enumerate(figure.inputs):
        grid = _categories(figure, i)
        leaks = sum(cell == LEAK for row in grid for cell in row)
        leaking = f"\n{leaks} cell{'s' if leaks > 1 else ''} depend{'' if leaks > 1 else 's'} on the future"
        grids.append((f"yours: {name}" + (leaking if leaks else ""), grid))
        shown.update(cell for row in grid for cell in row)
    axes = canvas.subplots(down, across, squeeze=False).flatten()
    for ax in axes[panels:]:
        ax.set_axis_off()
    for ax, (title, grid) in zip(axes, grids):
        ax.imshow(grid, cmap=cmap, norm=norm, interpolation="nearest", aspect="equal")
        _staircase(ax, rows, columns)
        _ticks(ax, rows, columns)
        ax.set_title(_wrapped(title, 30), fontsize=8)
        ax.set_xlabel("input position j" if figure.method == "gradient" else "inputs moved at j and later",
                      fontsize=8)
        ax.set_ylabel("output position t", fontsize=8)
    canvas.suptitle(_wrapped(figure.title, 40 * across), fontsize=9, y=0.985, va="top")
    canvas.legend(handles=[Patch(facecolor=CATEGORIES[c][0], edgecolor="#555555", label=CATEGORIES[c][1])
                           for c in sorted(shown)], loc="lower center", ncols=min(3, len(shown)), fontsize=7,
                  frameon=False)


def _staircase(ax, rows: int, columns: int) -> None:
    """The edge of the causal region, j <= t, and the cell grid when the cells are big enough to see."""
    xs, ys = [-0.5], [-0.5]
    for t in range(rows):
        x = min(t + 0.5, columns - 0.5)
        xs += [x, x]
        ys += [t - 0.5, t + 0.5]
    ax.plot(xs, ys, color="black", linewidth=1.5)
    if max(rows, columns) <= 24:
        ax.set_xticks([c - 0.5 for c in range(1, columns)], minor=True)
        ax.set_yticks([r - 0.5 for r in range(1, rows)], minor=True)
        ax.grid(which="minor", color="#bbbbbb", linewidth=0.5)
        ax.tick_params(which="minor", length=0)


def _draw_error_map(canvas: Canvas, figure: ErrorMap) -> None:
    rows, columns = len(figure.ratio), len(figure.ratio[0])
    canvas.set_size_inches(6.4, min(6.5, max(2.8, 1.6 + 0.22 * rows)))
    _margins(canvas, left=0.8, right=0.3, top=0.55, bottom=0.55)
    values = [[math.nan if v == NON_FINITE else math.log10(min(max(v, 1e-3), 1e3)) for v in row]
              for row in figure.ratio]
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(bad="black")
    ax = canvas.subplots()
    image = ax.imshow(values, cmap=cmap, norm=TwoSlopeNorm(vmin=-3, vcenter=0, vmax=3), interpolation="nearest",
                      aspect="auto")
    per_group = rows // figure.groups
    for g in range(1, figure.groups):
        ax.axhline(g * per_group - 0.5, color="white", linewidth=1.5)
    _ticks(ax, rows, columns)
    ax.set_xlabel(_plain(figure.columns), fontsize=8)
    ax.set_ylabel(_plain(figure.rows), fontsize=8)
    ax.set_title(_wrapped(figure.title, 90), fontsize=9)
    bar = canvas.colorbar(image, ax=ax, ticks=[-3, -2, -1, 0, 1, 2, 3])
    bar.ax.set_yticklabels(["<= 0.001", "0.01", "0.1", "1 (limit)", "10", "100", ">= 1000"], fontsize=7)
    bar.set_label("error / allowed error", fontsize=8)


def _draw_curves(canvas: Canvas, figure: Curves) -> None:
    canvas.set_size_inches(6.4, 4.0)
    _margins(canvas, left=0.8, right=0.2, top=0.55, bottom=0.55)
    ax = canvas.subplots()
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    counters = {False: 0, True: 0}  # the k-th student series shares its colour with the k-th reference
    for series in figure.series:
        colour = colours[counters[series.student] % len(colours)]
        counters[series.student] += 1
        points = [(x, y) for x, y in zip(series.x, series.y)
                  if y is not None and (y > 0 or not figure.log_y)]
        missing = len(series.x) - len(points)
        label = _plain(series.label) + (f" ({missing} not shown: no positive number)" if missing else "")
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        if series.student:
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=5, color=colour, label=label)
        else:
            ax.plot(xs, ys, linestyle="--", linewidth=1.5, color=colour, label=label)
    if figure.log_y:
        ax.set_yscale("log")
    ax.set_xlabel(_plain(figure.x_label), fontsize=8)
    ax.set_ylabel(_plain(figure.y_label), fontsize=8)
    ax.set_title(_wrapped(figure.title, 90), fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.5)
    ax.legend(fontsize=7)


def _draw_histogram(canvas: Canvas, scores: list[float], max_score: float) -> None:
    canvas.set_size_inches(6.4, 3.2)
    _margins(canvas, left=0.7, right=0.2, top=0.4, bottom=0.55)
    ax = canvas.subplots()
    top = max_score if max_score > 0 else 1.0
    ax.hist([min(max(s, 0.0), top) for s in scores], bins=10, range=(0.0, top), color="#3b6fb6",
            edgecolor="white")
    ax.set_xlim(0, top)
    ax.set_xlabel("score", fontsize=8)
    ax.set_ylabel("students", fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{len(scores)} students", fontsize=9)
