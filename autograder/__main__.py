import sys

from autograder.commands.main import main

sys.exit(main())
