"""Feedback pages: one self-contained HTML page per graded submission (its score per part, each failing
check's message and hint, and the pictures of its evidence), and for a class an index page for the
instructor (the score distribution and how many students failed each check).

Self-contained: pictures inline as data: PNGs (autograder.reports.figures), CSS inline, no script, and a
Content-Security-Policy that lets the page load nothing from anywhere, so it reads the same offline, from an
LMS or from a mail attachment.  Everything that can come from a submission (messages quoting its errors and
values, file and student names) is cleaned and escaped; the hidden suites' source never reaches a result, so
it cannot reach a page.
"""
from __future__ import annotations

import base64
import hashlib
import html
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from autograder.judging.evidence import Figure
from autograder.grading.rubric import PartScore, TestScore
from autograder.protocol import clean_text, one_line
from autograder.reports import figures
from autograder.reports.captions import caption
from autograder.grading.results_json import (MAX_LINE_CHARS, SUMMARY_CELL_ERRORS, by_hand_notice, message_text, rounded,
                                        write_text_atomic)
from autograder.grading.result import GradeResult, display_name
from autograder.model.load_report import NoticeKind

STUDENTS = "students"  # the class's pages, apart from index.html whatever a student is called
MAX_NAME_CHARS = 300

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body { font: 16px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f;
       background: #f5f5f7; overflow-wrap: anywhere; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: .5rem 0; } h2 { font-size: 1.2rem; margin: 0 0 .5rem; }
h3 { font-size: 1rem; margin: 0 0 .4rem; }
section, .panel { background: #fff; border-radius: .6rem; padding: 1rem; margin: 1rem 0;
                  box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.total { font-size: 1.3rem; font-weight: 600; } .meta { color: #555; }
.bar { height: .5rem; background: #e5e5ea; border-radius: .25rem; overflow: hidden; margin: .3rem 0 .8rem; }
.bar span { display: block; height: 100%; background: #34a853; }
.check { border-left: 4px solid #d62728; padding: .2rem 0 .2rem .8rem; margin: 1rem 0; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .6rem; border-radius: .4rem; font-size: .85rem;
      margin: .4rem 0; }
.hint { background: #fff8e1; border-left: 4px solid #f39c12; padding: .4rem .6rem; margin: .4rem 0;
        white-space: pre-line; }
.notice { background: #fdecea; padding: .6rem; border-radius: .4rem; }
figure { margin: .6rem 0; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .85rem; color: #555; }
.ok { color: #1e7e34; } ul.passed { padding-left: 1.2rem; }
.scroll { overflow-x: auto; } table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #e5e5ea; }
td.num, th.num { text-align: right; white-space: nowrap; }
"""


def _text(value: object, limit: int = MAX_LINE_CHARS) -> str:
    return html.escape(clean_text(value, limit), quote=True)


def _line(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """One line, as results.json stores the summary's texts: a page drawn from a stored result is the same."""
    return html.escape(one_line(value, limit), quote=True)


def _name(value: str, limit: int = MAX_NAME_CHARS) -> str:
    """A file or student name: shown as display_name shows it everywhere, escaped."""
    return html.escape(display_name(value, limit), quote=True)


def _points(value: float) -> str:
    return f"{round(value, 2):g}"


def _page(title: str, body: list[str]) -> str:
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{title}</title>", f"<style>{CSS}</style>", "</head>", "<body>", "<main>", *body,
        "</main>", "</body>", "</html>", ""])


def _image(png: bytes, alt: str) -> str:
    return f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{html.escape(alt)}">'


@dataclass
class _Pictures:
    """The pictures a page already shows, by the check that showed each first.  One bug often fails several
    checks on the same evidence, or on evidence that draws the same (an all-red map of a differently shaped
    output): each picture is drawn once and the later checks point to it."""
    pngs: dict[Figure, bytes] = field(default_factory=dict)  # equal evidence is rendered once
    shown: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # PNG -> (check, caption)

    def png(self, figure: Figure) -> bytes:
        if figure not in self.pngs:
            self.pngs[figure] = figures.png(figure)
        return self.pngs[figure]


def _hints(test: TestScore, given: dict[str, str]) -> list[str]:
    """The check's hints, each whole as the check gave it.  `given`: the part's hints already shown, each by
    the check that showed it (one bug fails several checks with the same advice: it is given once, the later
    checks point to it, once, however many of their hints were given above)."""
    out, earlier = [], []
    for hint in dict.fromkeys(message_text(h) for h in test.hints):
        if hint in given:
            earlier.append(given[hint])
            continue
        given[hint] = test.name
        out.append(f'<p class="hint"><strong>Hint:</strong> {html.escape(hint)}</p>')
    if earlier:
        out.append(f'<p class="hint"><strong>Hint:</strong> (same hint as {_text(earlier[0], MAX_NAME_CHARS)} '
                   "above)</p>")
    return out


def _evidence(test: TestScore, pictures: _Pictures) -> list[str]:
    """The check's picture, or a pointer to the same picture above: compared as drawn, since evidence that
    differs only where the picture cannot show it (ratios past the scale's end, the output's shape) looks the
    same; the caption, which says the shape, is kept when it differs."""
    if test.figure is None:
        return []
    png, words = pictures.png(test.figure), caption(test.figure)
    if png not in pictures.shown:
        pictures.shown[png] = (test.name, words)
        return [f"<figure>{_image(png, words)}<figcaption>{html.escape(words)}</figcaption></figure>"]
    first, first_words = pictures.shown[png]
    out = [f"<p>The picture above, under {_text(first, MAX_NAME_CHARS)}, shows what this check saw too.</p>"]
    if words != first_words:
        out.append(f"<p class=\"meta\">Here: {html.escape(words)}</p>")
    return out


def _failed_check(test: TestScore, pictures: _Pictures, given: dict[str, str]) -> str:
    message = message_text(test.message).strip()
    html_parts = [f'<article class="check"><h3>{_text(test.name, MAX_NAME_CHARS)}</h3>']
    if message:
        html_parts.append(f"<pre>{html.escape(message)}</pre>")
    html_parts += _hints(test, given)
    html_parts += _evidence(test, pictures)
    html_parts.append("</article>")
    return "".join(html_parts)


def _part(part: PartScore, pictures: _Pictures) -> str:
    """`pictures`: those already on the page, which any check of any part may point to; a hint is repeated
    within the part only (another part's same words are advice on that part's code)."""
    given: dict[str, str] = {}
    share = part.score / part.part.points if part.part.points else 0.0
    out = [f"<section><h2>{_text(part.part.title)} &mdash; {_points(part.score)} / {_points(part.part.points)}</h2>",
           f'<div class="bar"><span style="width:{max(0.0, min(share, 1.0)) * 100:.0f}%"></span></div>']
    if part.forbidden:
        out.append(f'<p class="notice">{_text(part.forbidden_notice(", ".join(part.forbidden)), 2000)}</p>')
    failed = [t for t in part.tests if not t.passed]
    passed = [t for t in part.tests if t.passed]
    out += [_failed_check(t, pictures, given) for t in failed]
    if passed:
        items = "".join(f"<li>{_text(t.name, MAX_NAME_CHARS)}</li>" for t in passed)
        out.append(f'<details><summary class="ok">{len(passed)} of {len(part.tests)} checks passed</summary>'
                   f'<ul class="passed">{items}</ul></details>')
    out.append("</section>")
    return "\n".join(out)


def _load_problems(result: GradeResult) -> list[str]:
    """What kept the submission from running as written: as the text summary says it, to the student."""
    out = [f'<p class="notice">Notice: {_line(n)}</p>' for n in result.load.notices_of(NoticeKind.UNISOLATED)]
    if result.unreadable:
        out.append(f'<p class="notice">Not graded: {_line(result.unreadable)}</p>')
    if result.load.failure:
        out.append(f'<p class="notice">Your notebook could not be run: {_line(result.load.failure)}</p>')
    errors = result.load.cell_errors[:SUMMARY_CELL_ERRORS]
    if errors:
        items = "".join(f"<li>Cell {_line(e.get('cell'), 20)} raised {_line(e.get('type'), 100)}: "
                        f"{_line(e.get('message'), 200)}</li>" for e in errors)
        out.append(f'<div class="panel"><h2>Cells that raised</h2><ul>{items}</ul></div>')
    return out


def student_page(result: GradeResult) -> str:
    """One submission's feedback page."""
    assignment = _text(result.assignment)
    body = [f"<h1>{assignment}</h1>",
            f'<p class="total">{_points(result.score)} / {_points(result.max_score)} points</p>',
            *([f'<p class="meta">{_line(by_hand_notice(result))}</p>'] if result.graded_by_hand else []),
            f'<p class="meta">Submission: {_name(result.submission, 255)}</p>',
            *([f'<p class="meta">Isolation: {_line(result.load.isolation)}</p>'] if result.load.isolation else []),
            *_load_problems(result),
            *(f'<p class="notice">To review: {_line(r.notice())}</p>' for r in result.resembles)]
    pictures = _Pictures()
    body += [_part(p, pictures) for p in result.parts]
    return _page(f"{assignment}: {_points(result.score)} / {_points(result.max_score)}", body)


def page_file(student: str) -> str:
    """The file name of a student's page: the name percent-encoded, so that no name (a `/`, a `..`) leaves
    the students' folder; a name too long to be a file name keeps a prefix and a digest of the whole."""
    name = quote(student, safe="")
    if len(name) > 200:
        name = f"{name[:120]}-{hashlib.sha256(student.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"
    return f"{name}.html"


def _student_href(student: str) -> str:
    return f"{STUDENTS}/{quote(page_file(student), safe='')}"


def _full(score: float, points: float) -> bool:
    """Full marks, to the 4 decimals every score is kept to (results.json, GradeResult.score): a part's score
    sums float shares of its points, and 3 x 20/3 adds up to 19.999999999999996."""
    return rounded(score) >= rounded(points)


def class_index(assignment: str, results: Sequence[tuple[str, GradeResult]]) -> str:
    """The instructor's overview of a class: score distribution, mean score per part, how many students
    failed each check (in the suites' order), the known mistakes most of them made, the submissions to review
    and a link to each student's page."""
    name = _text(assignment)
    scores = [r.score for _, r in results]
    max_score = results[0][1].max_score if results else 0.0
    body = [f"<h1>{name}: class overview</h1>"]
    if not results:
        body.append("<p>No graded submissions.</p>")
        return _page(f"{name}: class overview", body)
    body += [f'<p class="total">{len(results)} submissions; mean {_points(statistics.fmean(scores))}, median '
             f"{_points(statistics.median(scores))} of {_points(max_score)} points</p>",
             f'<div class="panel"><h2>Score distribution</h2><figure>'
             f'{_image(figures.score_histogram(scores, max_score), "histogram of the total scores")}</figure></div>']
    failures: dict[tuple[str, str], int] = {}
    titles: dict[str, str] = {}
    part_scores: dict[str, list[float]] = {}
    points: dict[str, float] = {}
    for _, result in results:
        for part in result.parts:
            titles[part.part.name] = part.part.title
            points[part.part.name] = part.part.points
            part_scores.setdefault(part.part.name, []).append(part.score)
            for test in part.tests:
                key = (part.part.name, test.name)
                failures[key] = failures.get(key, 0) + (not test.passed)
    rows = "".join(f"<tr><td>{_text(titles[p])}</td><td class='num'>{_points(statistics.fmean(s))} / "
                   f"{_points(points[p])}</td><td class='num'>{sum(_full(v, points[p]) for v in s)}</td></tr>"
                   for p, s in part_scores.items())
    body.append('<div class="panel"><h2>Parts</h2><div class="scroll"><table><tr><th>part</th>'
                f'<th class="num">mean</th><th class="num">full marks</th></tr>{rows}</table></div></div>')
    tables = []
    for part in part_scores:
        rows = "".join(f"<tr><td>{_text(t, MAX_NAME_CHARS)}</td><td class='num'>{n} of {len(results)}</td></tr>"
                       for (p, t), n in failures.items() if p == part)
        tables.append(f'<h3>{_text(titles[part])}</h3><div class="scroll"><table><tr><th>check</th>'
                      f'<th class="num">failed by</th></tr>{rows}</table></div>')
    body.append('<div class="panel"><h2>Failed checks</h2><p>How many students failed each check.</p>'
                f'{"".join(tables)}</div>')
    body += _known_mistakes(results, titles)
    rows = "".join(f'<tr><td><a href="{html.escape(_student_href(s))}">{_name(s)}</a></td>'
                   f"<td>{_text(found.function)}</td><td class='num'>{found.share:.0%}</td></tr>"
                   for s, r in results for found in r.resembles)
    if rows:
        body.append('<div class="panel"><h2>To review</h2><p>Submissions whose code holds most of one of torch\'s '
                    "own implementations of what the parts ask for: copied code is not the student's work, "
                    "whatever it scored.</p><div class='scroll'><table><tr><th>student</th><th>torch's "
                    f"implementation</th><th class='num'>share found</th></tr>{rows}</table></div></div>")
    rows = "".join(f'<tr><td><a href="{html.escape(_student_href(s))}">{_name(s)}</a></td>'
                   f"<td class='num'>{_points(r.score)} / {_points(r.max_score)}</td></tr>" for s, r in results)
    body.append('<div class="panel"><h2>Students</h2><div class="scroll"><table><tr><th>student</th>'
                f"<th class='num'>score</th></tr>{rows}</table></div></div>")
    return _page(f"{name}: class overview", body)


MOST_FREQUENT = 10


def _known_mistakes(results: Sequence[tuple[str, GradeResult]], titles: dict[str, str]) -> list[str]:
    """The known mistakes (the hints failed checks gave) most students made, each counted once per student."""
    students: dict[tuple[str, str], int] = {}
    for _, result in results:
        made = {(part.part.name, hint) for part in result.parts for test in part.tests if not test.passed
                for hint in map(message_text, test.hints)}
        for key in made:
            students[key] = students.get(key, 0) + 1
    if not students:
        return []
    top = sorted(students.items(), key=lambda item: (-item[1], item[0]))[:MOST_FREQUENT]
    rows = "".join(f"<tr><td>{_text(titles[p])}</td><td>{html.escape(hint)}</td><td class='num'>{n} of "
                   f"{len(results)}</td></tr>" for (p, hint), n in top)
    return ['<div class="panel"><h2>Most frequent known mistakes</h2><p>What the hints said, by how many students '
            'got each.</p><div class="scroll"><table><tr><th>part</th><th>hint</th><th class="num">students'
            f"</th></tr>{rows}</table></div></div>"]


def write_class(folder: Path, assignment: str, results: Sequence[tuple[str, GradeResult]]) -> None:
    """`folder`/students/<student>.html for each (student, result), then `folder`/index.html."""
    for student, result in results:
        write_text_atomic(folder / STUDENTS / page_file(student), student_page(result))
    write_text_atomic(folder / "index.html", class_index(assignment, results))
