"""python -m autograder.authoring.check_suite: the same as python -m autograder check-suite."""
import sys

from autograder.authoring.check_suite.command import main

if __name__ == "__main__":  # spawned pool workers import this module again: they must not run it
    sys.exit(main())
