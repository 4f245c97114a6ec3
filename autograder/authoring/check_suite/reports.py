"""The mutation score's report, and the tolerance margins per hidden test (docs/tolerances.md quotes them)."""
from __future__ import annotations

from typing import Any

from autograder.authoring.catalogue import Catalogue, EveryPart
from autograder.authoring.check_suite.grading import load_catalogue
from autograder.authoring.check_suite.verdicts import verdict


def summarise(assignment: str, results: dict[str, dict[str, Any]], seconds: float, workers: int,
              tables: list[dict[str, Any]] | None = None) -> tuple[str, bool]:
    """The report's text, and whether the suite passed; `tables` collects the follow-through table."""
    catalogue = load_catalogue(assignment)
    entries = {e.name: e for e in catalogue.entries() if e.name in results}
    verdicts = {name: verdict(catalogue, e, results[name]) for name, e in entries.items()}
    mistakes = [e for e in entries.values() if e.part is not None]
    variants = [e for e in entries.values() if e.part is None]
    caught = [e for e in mistakes if verdicts[e.name]["caught"]]
    lines = [f"{assignment}: hidden suite graded on {len(mistakes)} known mistakes and {len(variants)} correct "
             f"submissions through the sandboxed grader ({seconds:.0f} s, {workers} workers)",
             f"mutation score: {len(caught)} / {len(mistakes)} mistakes caught"]
    parts = list(catalogue.built_on)
    for part in parts:
        mine = [e for e in mistakes if e.part == part]
        missed = [e.name for e in mine if not verdicts[e.name]["caught"]]
        lines.append(f"  {part:<22} {len(mine) - len(missed):>3} / {len(mine)}"
                     + (f"   missed: {', '.join(missed)}" if missed else ""))
    unfair = [(e.name, verdicts[e.name]["unfair"]) for e in mistakes if verdicts[e.name]["unfair"]]
    lines.append("unfair (a bug costing a part that does not build on its own): "
                 + ("none" if not unfair else "; ".join(f"{n} cost {', '.join(u)}" for n, u in unfair)))
    failed = [e for e in variants if not verdicts[e.name]["ok"]]
    lines.append(f"correct submissions with full marks: {len(variants) - len(failed)} / {len(variants)}")
    for e in failed:
        lines.append(f"  WRONGLY FAILED {e.name} ({results[e.name]['score']:g} points):")
        for test in verdicts[e.name]["failed_tests"][:5]:
            first_line = test["output"].splitlines()[0][:200] if test["output"] else ""
            lines.append(f"    {test['part']}: {test['name']}: {first_line}")
    declared = [e for e in mistakes if e.hint is not None]
    no_hint = [e.name for e in declared if not verdicts[e.name]["hint_shown"]]
    lines.append(f"specific hints shown: {len(declared) - len(no_hint)} / {len(declared)} declared "
                 f"({len(mistakes)} mistakes)" + (f"; missing: {', '.join(no_hint)}" if no_hint else ""))
    table = follow_through(catalogue, results)
    lines += format_follow_through(table)
    if tables is not None:
        tables.append(table)
    ok = not failed and all(v["ok"] for v in verdicts.values() if v["kind"] == "mistake")
    return "\n".join(lines), ok


def follow_through(catalogue: Catalogue, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Where a one-bug submission's lost points fall: {"share": points lost outside the bug's own part / all
    points lost, over every mistake of one part (EveryPart entries break everything on purpose and are left
    out), "parts": {part: {"bugs", "outside", "lost", "by_part": {other part: points}}}}."""
    parts: dict[str, dict[str, Any]] = {}
    for entry in catalogue.entries():
        if entry.part is None or isinstance(entry.part, EveryPart) or entry.name not in results:
            continue
        row = parts.setdefault(entry.part, {"bugs": 0, "outside": 0.0, "lost": 0.0, "by_part": {}})
        row["bugs"] += 1
        for part, (score, maximum) in results[entry.name]["parts"].items():
            lost = max(maximum - score, 0.0)
            row["lost"] += lost
            if part != entry.part and lost:
                row["outside"] += lost
                row["by_part"][part] = row["by_part"].get(part, 0.0) + lost
    return {"share": _share(parts.values()), "parts": parts}


def combined_share(tables: list[dict[str, Any]]) -> float:
    """The follow-through share over several catalogues together: all their points lost outside / all lost."""
    return _share([r for table in tables for r in table["parts"].values()])


def _share(rows: Any) -> float:
    rows = list(rows)
    lost = sum(r["lost"] for r in rows)
    return sum(r["outside"] for r in rows) / lost if lost else 0.0


def format_follow_through(table: dict[str, Any]) -> list[str]:
    rows = [(part, r) for part, r in table["parts"].items() if r["lost"]]
    lines = [f"follow-through: {100 * table['share']:.1f} % of the points one-bug submissions lose fall outside "
             f"the bug's own part ({sum(r['bugs'] for _, r in rows)} submissions)"]
    for part, r in rows:
        where = ", ".join(f"{other} {points:.1f}" for other, points in
                          sorted(r["by_part"].items(), key=lambda item: -item[1]))
        lines.append(f"  {part:<22} {r['bugs']:>3} bugs lose {r['lost']:6.1f}, {r['outside']:5.1f} outside "
                     f"({100 * r['outside'] / r['lost']:3.0f} %)" + (f": {where}" if where else ""))
    return lines


def margins(assignment: str, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per hidden test with numeric comparisons: the worst |error| / allowed ratio of any correct submission,
    and the smallest ratio among the mistakes that test catches numerically (ratio > 1)."""
    catalogue = load_catalogue(assignment)
    order = [e for e in catalogue.entries() if e.name in results]  # ties go to the earliest entry (the reference)
    tests = sorted({(part, test) for r in results.values() for part, mine in r["ratios"].items() for test in mine})
    rows = []
    for part, test in tests:
        ratio = {e.name: results[e.name]["ratios"].get(part, {}).get(test) for e in order}
        legit = [(ratio[e.name], -i, e.name) for i, e in enumerate(order)
                 if e.kind == "variant" and ratio[e.name] is not None]
        caught = [(ratio[e.name], i, e.name) for i, e in enumerate(order)
                  if e.kind == "mistake" and (ratio[e.name] or 0.0) > 1.0]
        worst = (lambda m: (m[0], m[2]))(max(legit)) if legit else (float("nan"), "")
        smallest = (lambda m: (m[0], m[2]))(min(caught)) if caught else (float("nan"), "")
        rows.append({"test": f"{part}: {test}", "worst_legit": worst[0], "worst_legit_entry": worst[1],
                     "smallest_bug": smallest[0], "smallest_bug_entry": smallest[1], "bugs_caught": len(caught),
                     "margin": smallest[0] / worst[0] if legit and caught and worst[0] > 0 else float("nan")})
    return rows


def weakest_catches(assignment: str, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per part: the worst ratio of any correct submission in that part's tests, and the mistake of that part
    whose STRONGEST numeric catch (largest ratio over all tests) is smallest, i.e. the bug closest to
    escaping the whole suite if tolerances grew.  Mistakes caught only by exceptions, types or structure
    checks have no ratio and are counted separately."""
    catalogue = load_catalogue(assignment)
    order = [e for e in catalogue.entries() if e.name in results]
    rows = []
    for part in catalogue.built_on:
        legit = [(ratio, -i, e.name) for i, e in enumerate(order) if e.kind == "variant"
                 for ratio in results[e.name]["ratios"].get(part, {}).values()]
        strongest = []
        exact = 0
        for e in catalogue.entries():
            if e.part != part or e.name not in results:
                continue
            ratios = [v for mine in results[e.name]["ratios"].values() for v in mine.values() if v > 1.0]
            if ratios:
                strongest.append((max(ratios), e.name))
            else:
                exact += 1
        worst = (lambda m: (m[0], m[2]))(max(legit)) if legit else (float("nan"), "")
        weakest = min(strongest) if strongest else (float("nan"), "")
        rows.append({"part": part, "worst_legit": worst[0], "worst_legit_entry": worst[1],
                     "weakest_bug": weakest[0], "weakest_bug_entry": weakest[1], "numeric": len(strongest),
                     "exact": exact})
    return rows


def format_weakest(rows: list[dict[str, Any]]) -> str:
    lines = ["| part | worst correct (ratio) | weakest numeric catch: its largest ratio | caught numerically "
             "/ by exceptions, types or structure |", "|---|---|---|---|"]
    for r in rows:
        bug = f"{r['weakest_bug']:.3g} ({r['weakest_bug_entry']})" if r["numeric"] else "-"
        lines.append(f"| {r['part']} | {r['worst_legit']:.2g} ({r['worst_legit_entry']}) | {bug} | "
                     f"{r['numeric']} / {r['exact']} |")
    return "\n".join(lines)


def format_margins(rows: list[dict[str, Any]]) -> str:
    lines = ["| test | worst correct (ratio) | smallest caught bug (ratio) | bugs caught | gap |",
             "|---|---|---|---|---|"]
    for r in rows:
        bug = (f"{r['smallest_bug']:.3g} ({r['smallest_bug_entry']})" if r["bugs_caught"] else "-")
        gap = f"{r['margin']:.2g}x" if r["margin"] == r["margin"] else "-"
        lines.append(f"| {r['test']} | {r['worst_legit']:.2g} ({r['worst_legit_entry']}) | {bug} | "
                     f"{r['bugs_caught']} | {gap} |")
    return "\n".join(lines)
