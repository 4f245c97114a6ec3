"""A failing check's hints: advice on the likely mistake, each a text of its own beside the check's message
(`checks.fail(message, hints=[...])`).  Plain Python, no torch: results.json stores them and its reader, in
processes that never import the judge, holds them to the same bounds."""
from __future__ import annotations

from typing import Any

from autograder.protocol import clean_text

MAX_HINTS = 10         # hints one check may give; the suites give one or two
MAX_HINT_CHARS = 1000  # each; the suites' longest are a few hundred characters


def bounded(hints: Any) -> tuple[str, ...]:
    """`hints` as a result keeps them: at most MAX_HINTS clean, non-empty texts of at most MAX_HINT_CHARS,
    in their order, each once; anything that is not a sequence of texts gives none."""
    if not isinstance(hints, (tuple, list)):
        return ()
    texts = (clean_text(h, MAX_HINT_CHARS) for h in hints if isinstance(h, str))
    return tuple(dict.fromkeys(t for t in texts if t))[:MAX_HINTS]


def problem(value: object) -> str:
    """What makes `value` not hints as `bounded` leaves them ("" when nothing): for a stored result's reader."""
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        return "is not a list of texts"
    if len(value) > MAX_HINTS:
        return f"holds more than {MAX_HINTS} hints"
    if tuple(value) != bounded(value):
        return f"holds a hint that is empty, repeated, longer than {MAX_HINT_CHARS} characters or not clean text"
    return ""


def first_given(per_check: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], bool]]:
    """One cause named once per part: for each check of a part, in order, the hints no earlier check gave, and
    whether it gave any that an earlier one did (a report then points up to it instead of repeating it)."""
    seen: set[str] = set()
    out = []
    for hints in per_check:
        new = tuple(h for h in dict.fromkeys(hints) if h not in seen)
        seen.update(new)
        out.append((new, len(new) < len(set(hints))))
    return out
