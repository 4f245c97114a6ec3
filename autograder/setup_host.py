"""One-time host preparation, run by `make` after installing, when it runs as root:

- lets the sandbox's unprivileged user load Python: when the interpreter lives under a directory other users
  cannot enter (e.g. /root/.pyenv), the submission would otherwise have to run as root; granting search
  permission (x, not read) on those directories is the smallest change that lets it run as `nobody`;
- closes the kit's private folders (hidden suites, reference, source notebook, tests, git history) to other
  users, so a submission running as `nobody` cannot read them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.sandbox import PRIVATE, ROOT, blocked_ancestor


def main() -> int:
    if os.geteuid() != 0:
        print("setup: not root; submissions will run as the grader's own user (see README, Sandbox)")
        return 0
    for needed in (Path(sys.base_prefix), Path(sys.prefix), ROOT):
        while (blocked := blocked_ancestor(needed)) is not None:
            blocked.chmod(blocked.stat().st_mode | 0o001)
            print(f"setup: granted search permission on {blocked} so the sandbox user can load Python")
    for private in PRIVATE:
        if private.exists() and private.stat().st_mode & 0o077:
            private.chmod(0o700)
            print(f"setup: {private} is now private to its owner (the sandbox user cannot read it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
