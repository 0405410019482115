"""`python -m engine` is the `simrun` command."""

import sys

from engine.cli._main import console_main

sys.exit(console_main())
