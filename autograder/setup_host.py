"""One-time host preparation, run by `make` after installing: lets the sandbox's unprivileged user load
Python.  When the grader runs as root and the interpreter lives under a directory other users cannot enter
(e.g. /root/.pyenv), the submission would otherwise have to run as root; granting search permission (x,
not read) on those directories is the smallest change that lets it run as `nobody`."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.sandbox import ROOT, blocked_ancestor


def main() -> int:
    if os.geteuid() != 0:
        print("setup: not root; submissions will run as the grader's own user (see README, Sandbox)")
        return 0
    for needed in (Path(sys.base_prefix), Path(sys.prefix), ROOT):
        while (blocked := blocked_ancestor(needed)) is not None:
            blocked.chmod(blocked.stat().st_mode | 0o001)
            print(f"setup: granted search permission on {blocked} so the sandbox user can load Python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
