"""Tables in the README that are generated from the code, so that they cannot drift from it.

    python -m autograder.authoring.readme_tables check   # exit 1 if a table in README.md is stale
    python -m autograder.authoring.readme_tables write   # regenerate them

Each table sits between `<!-- BEGIN GENERATED name -->` and `<!-- END GENERATED name -->`.
"""
from __future__ import annotations

import re
import sys
from typing import Callable

from autograder import REPO_ROOT
from autograder.host.limits import knobs

README = REPO_ROOT / "README.md"


def _default(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def limits_table() -> str:
    rows = ["| limit (`c.SandboxedGrading.<limit>`) | flag | environment (nbgrader) | default | what it bounds |",
            "|---|---|---|---|---|"]
    rows += [f"| `{k.name}` | `{k.flag}` | `{k.variable}` | {_default(k.default)} | {k.help} |" for k in knobs()]
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {"limits": limits_table}


def rendered(text: str) -> str:
    for name, table in TABLES.items():
        pattern = re.compile(rf"(<!-- BEGIN GENERATED {name} -->\n)(?:.*?\n)?(<!-- END GENERATED {name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{README}: no generated table named {name!r}")
        text = pattern.sub(lambda m: m[1] + table() + "\n" + m[2], text)
    return text


def main(argv: list[str] | None = None) -> int:
    command = (sys.argv[1:] if argv is None else argv or ["check"])[0]
    text = README.read_text()
    try:
        fresh = rendered(text)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if command == "write":
        README.write_text(fresh)
        return 0
    if fresh != text:
        print(f"{README}: a generated table is stale; run `python -m autograder.authoring.readme_tables write`",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
