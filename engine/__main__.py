"""`python -m engine` is the `simrun` command."""

import sys

from engine.cli._main import main

sys.exit(main())
