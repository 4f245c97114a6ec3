"""The class's similarity page (autograder/judging/similarity.py finds the pairs; the `similarity` command,
autograder/authoring/similarity.py, writes it).

One self-contained page, as the feedback pages are (autograder/reports/html.py: inline CSS, no script, a
Content-Security-Policy that loads nothing): the pairs to review, the ranking of every pair that shares code,
torch's own implementations found in a submission, and for each listed pair the cells of both students side
by side with the shared regions marked and numbered alike.  Every text a student controls (names, code) is
cleaned and escaped here, by this module, with nothing rendered by a template.  It reports; no grade changes.
"""
from __future__ import annotations

import html

from autograder.judging.similarity import MIN_SHARED, Pair, Report, Where, Written
from autograder.protocol import clean_text, one_line
from autograder.reports.html import CSP, CSS

MAX_NAME_CHARS = 300
SHOWN_PAIRS = 10         # side by side: the pairs to review, or at least this many of the top pairs
RANKED_PAIRS = 100       # rows of the ranking
MAX_CELL_LINES = 400     # of one cell shown
MAX_LINE_CHARS = 300
COLOURS = ("#ffe08a", "#b7e4c7", "#bde0fe", "#ffc8dd", "#e2c2ff", "#ffd6a5")
EXTRA_CSS = """
main { max-width: 90rem; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: .8rem; }
.code { font: .8rem/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f6f6;
        border-radius: .4rem; padding: .4rem 0; margin: .4rem 0; overflow-x: auto; }
.code div { white-space: pre-wrap; padding: 0 .5rem; } .code i { color: #999; font-style: normal;
        display: inline-block; width: 2.5rem; user-select: none; }
.review { color: #b00020; font-weight: 600; }
"""


def _text(value: object, limit: int = MAX_NAME_CHARS) -> str:
    return html.escape(one_line(value, limit), quote=True)


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _marks(regions: list[tuple[int, Where]]) -> dict[tuple[int, int], int]:
    """(cell, line) -> the number of the first region covering it."""
    marks: dict[tuple[int, int], int] = {}
    for number, where in regions:
        for line in range(where.first, where.last + 1):
            marks.setdefault((where.cell, line), number)
    return marks


def _cell(submission: Written, cell: int, marks: dict[tuple[int, int], int]) -> str:
    lines = submission.cells[cell].split("\n")
    rows = []
    for number, line in enumerate(lines[:MAX_CELL_LINES], 1):
        code = html.escape(clean_text(line, MAX_LINE_CHARS), quote=False) or " "
        region = marks.get((cell, number))
        if region is not None:
            colour = COLOURS[(region - 1) % len(COLOURS)]
            code = f'<mark style="background:{colour}" title="region {region}">{code}</mark>'
        rows.append(f"<div><i>{number}</i>{code}</div>")
    if len(lines) > MAX_CELL_LINES:
        rows.append(f"<div><i></i>… {len(lines) - MAX_CELL_LINES} more lines</div>")
    return f'<div class="code"><div><i></i>cell {cell + 1}</div>{"".join(rows)}</div>'


def _side(submission: Written, regions: list[tuple[int, Where]]) -> str:
    marks = _marks(regions)
    cells = sorted({where.cell for _, where in regions})
    return f"<div><h3>{_text(submission.student)}</h3>{''.join(_cell(submission, c, marks) for c in cells)}</div>"


def _pair(report: Report, pair: Pair, anchor: int) -> str:
    a, b = report.written(pair.a), report.written(pair.b)
    numbered = list(enumerate(pair.regions, 1))
    review = ' <span class="review">to review</span>' if pair.to_review(report.threshold) else ""
    listing = "".join(f"<li>region {n}: {_text(a.student)} cell {r.a.cell + 1} lines {r.a.first}–{r.a.last} ↔ "
                      f"{_text(b.student)} cell {r.b.cell + 1} lines {r.b.first}–{r.b.last}</li>" for n, r in numbered)
    return "\n".join([
        f'<section class="pair" id="pair-{anchor}">',
        f"<h2>{_text(pair.a)} and {_text(pair.b)}: {_pct(pair.score)}{review}</h2>",
        f'<p class="meta">{pair.shared} shared fingerprints: {_pct(pair.share_a)} of {_text(pair.a)}\'s own code, '
        f"{_pct(pair.share_b)} of {_text(pair.b)}'s</p>",
        f"<details><summary>{len(numbered)} shared regions</summary><ul>{listing}</ul></details>",
        f'<div class="sides">{_side(a, [(n, r.a) for n, r in numbered])}{_side(b, [(n, r.b) for n, r in numbered])}</div>',
        "</section>"])


def _torch(report: Report) -> list[str]:
    rows = [f"<tr><td>{_text(w.student)}</td><td>{_text(r.function)}</td><td class=\"num\">{_pct(r.share)}</td>"
            f"<td>{_text(', '.join(f'cell {x.cell + 1} lines {x.first}–{x.last}' for x in w.torch_lines.get(r.function, [])[:12]), 600)}</td></tr>"
            for w in report.submissions for r in w.torch]
    if not rows:
        return ["<section><h2>Torch's own implementations</h2><p>No submission holds "
                "a large share of torch's own implementation of a graded operation.</p></section>"]
    return ["<section><h2>Torch's own implementations</h2>",
            "<p>Compared with torch's source of the graded operations (the corpus of "
            "autograder.judging.resemblance, the same finding as the feedback's To review line).</p>",
            '<div class="scroll"><table><tr><th>Student</th><th>torch function</th><th class="num">share</th>'
            "<th>where</th></tr>", *rows, "</table></div></section>"]


def page(report: Report) -> str:
    listed = report.to_review or []
    shown = (listed + [p for p in report.pairs if p not in listed])[:max(len(listed), SHOWN_PAIRS)]
    anchors = {id(p): i for i, p in enumerate(shown)}
    readable = [w for w in report.submissions if not w.unreadable]
    nothing = [w.student for w in readable if not w.prints]

    def row(p: Pair) -> str:
        name = f"{_text(p.a)} and {_text(p.b)}"
        link = f'<a href="#pair-{anchors[id(p)]}">{name}</a>' if id(p) in anchors else name
        flag = ' <span class="review">to review</span>' if p.to_review(report.threshold) else ""
        return (f'<tr><td>{link}{flag}</td><td class="num">{_pct(p.score)}</td><td class="num">{p.shared}</td>'
                f'<td class="num">{_pct(p.share_a)} / {_pct(p.share_b)}</td></tr>')

    body = [
        f"<h1>Similarity: {_text(report.assignment)}</h1>",
        f'<p class="meta">{len(report.submissions)} submissions, {len(report.pairs)} pairs sharing code, '
        f"{len(report.to_review)} to review (score at least {_pct(report.threshold)} and at least {MIN_SHARED} "
        "shared fingerprints).  A pair's score is the share of the smaller side's own code found in the other; "
        "what the release gave (imports, stubs, docstrings, check cells, plots) is not counted.  "
        "Nothing here changes a grade.</p>",
        "<section><h2>Ranking</h2>",
        '<div class="scroll"><table><tr><th>Pair</th><th class="num">score</th><th class="num">shared</th>'
        '<th class="num">of each</th></tr>', *(row(p) for p in report.pairs[:RANKED_PAIRS]), "</table></div>",
        *([f'<p class="meta">and {len(report.pairs) - RANKED_PAIRS} more pairs</p>']
          if len(report.pairs) > RANKED_PAIRS else []),
        "</section>",
        *_torch(report),
        *([f"<section><h2>Nothing of their own</h2><p>Only the release's code: {_text(', '.join(nothing), 3000)}"
           "</p></section>"] if nothing else []),
        *([f"<section><h2>Not read</h2><ul>{''.join(f'<li>{_text(w.student)}: {_text(w.unreadable, 600)}</li>' for w in report.submissions if w.unreadable)}</ul></section>"]
          if any(w.unreadable for w in report.submissions) else []),
        *(_pair(report, p, anchors[id(p)]) for p in shown),
    ]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">', '<meta name="referrer" content="no-referrer">',
        f"<title>Similarity: {_text(report.assignment)}</title>", f"<style>{CSS}{EXTRA_CSS}</style>", "</head>",
        "<body>", "<main>", *body, "</main>", "</body>", "</html>", ""])
