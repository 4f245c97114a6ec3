"""What one entry's grade says about the suite: a mistake caught (fairly, with its hint) or a variant kept."""
from __future__ import annotations

from typing import Any

from autograder.authoring.catalogue import Catalogue


def lost_parts(result: dict[str, Any]) -> set[str]:
    return {name for name, (score, maximum) in result["parts"].items() if score < maximum}


def verdict(catalogue: Catalogue, entry: Any, result: dict[str, Any]) -> dict[str, Any]:
    """What is wrong with the suite as far as this entry shows (empty lists and True/None when nothing)."""
    lost = lost_parts(result)
    if entry.part is None:
        return {"kind": "variant", "ok": not lost, "failed_tests": [t for t in result["tests"] if not t["passed"]]}
    own_failures = [t for t in result["tests"] if not t["passed"] and t["part"] == entry.part]
    caught = entry.part in lost
    unfair = sorted(lost - catalogue.may_cost(entry.part))
    # the entry's words in a failure's message or in one of its hints, each whole: never in the text the
    # two make together
    hint_shown = None if entry.hint is None else any(entry.hint in text for t in own_failures
                                                     for text in (t["message"], *t["hints"]))
    return {"kind": "mistake", "caught": caught, "unfair": unfair, "hint_shown": hint_shown,
            "ok": caught and not unfair}
