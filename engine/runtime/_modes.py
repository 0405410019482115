"""Run modes: ways of running simrun other than a scenario's episodes, each with its own command and run directory.

A scenario file or run manifest whose `kind` names a registered mode belongs to that mode: the scenario loader
points at the mode's command, and `simrun report` / `simrun view` rebuild the run's report with the mode's own
functions (a mode's run has no episodes to page through). Everything else is a scenario run. A mode registers
with `RUN_MODES.add(name, RunMode(...))` from the module its `simrun.run_modes` entry point names, as load testing
does (`engine.tools.loadtest._mode`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType

from engine.core._registry import Registry
from engine.runtime._rundir import RunDir

__all__ = ("RUN_MODES", "RunMode", "mode_of")


@dataclass(frozen=True)
class RunMode:
    noun: str
    """What a file of this mode is, in a sentence ("a load test")."""
    command: str
    """The command that runs it."""
    rebuild: Callable[[RunDir], dict[str, Any]]
    """Rebuilds the run's summary.json and reports from its records, returning the summary."""
    render_console: Callable[[Mapping[str, Any]], RenderableType]
    outcome: Callable[[Mapping[str, Any]], str] | None = None
    """The run's outcome in a few words, from its manifest (`simrun runs`); None: the scenario runs' counts."""


RUN_MODES: Registry[RunMode] = Registry("run mode", "run_modes")


def mode_of(data: Mapping[str, Any]) -> RunMode | None:
    """The mode a scenario file or run manifest belongs to, or None for a scenario (episode) run."""
    kind = data.get("kind")
    return RUN_MODES.get(kind) if isinstance(kind, str) and kind in RUN_MODES else None
