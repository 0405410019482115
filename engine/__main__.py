"""`python -m engine` is the `simrun` command."""

import sys

from .cli import main

sys.exit(main())
