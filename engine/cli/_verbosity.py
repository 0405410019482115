"""How much the command line says: `--quiet` keeps only results and errors, `--log-level` sets which run
events are echoed on the console (events.jsonl always gets them all).

Both are options of the top command but may be written anywhere on the line (`simrun X.yaml --quiet`): they
are moved to the front before the arguments are parsed, so every subcommand honours them alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ("LEVELS", "Verbosity", "split_verbosity", "verbosity")

LEVELS = ("debug", "info", "warning", "error")
_FLAGS = ("--quiet", "-q")
_VALUED = "--log-level"


@dataclass
class Verbosity:
    quiet: bool = False
    level: int = logging.WARNING

    def set(self, *, quiet: bool, level: str | None) -> None:
        self.quiet = quiet
        chosen = level or ("error" if quiet else "warning")
        self.level = logging.getLevelNamesMapping()[chosen.upper()]


verbosity = Verbosity()
"""The current command's settings (one command per process; reset at every invocation)."""


def split_verbosity(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the --quiet/-q and --log-level options, every other argument), wherever they were; nothing after a
    `--` is touched."""
    front: list[str] = []
    rest: list[str] = []
    items = list(args)
    index = 0
    while index < len(items):
        arg = items[index]
        if arg == "--":
            rest += items[index:]
            break
        if arg in _FLAGS:
            front.append(arg)
        elif arg == _VALUED and index + 1 < len(items):
            front += [arg, items[index + 1]]
            index += 1
        elif arg.startswith(_VALUED + "="):
            front.append(arg)
        else:
            rest.append(arg)
        index += 1
    return front, rest
