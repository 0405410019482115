"""`python -m engine` is the `simrun` command."""

import sys

from engine.cli import console_main

sys.exit(console_main())
