"""Registers load testing as a run mode, so the scenario loader and the run-directory readers need not know it.

Every command loads the plug-ins, so this module stays light: the load tester (HTTP clients, the SDK, its report)
is imported only when a load-test run is rebuilt or shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.core._format import format_count
from engine.runtime._modes import RUN_MODES, RunMode

if TYPE_CHECKING:
    from rich.console import RenderableType

    from engine.runtime._rundir import RunDir

__all__ = ("LOAD_MODE",)


def _rebuild(run_dir: RunDir) -> dict[str, Any]:
    from engine.tools.loadtest._run import rebuild_summary

    return rebuild_summary(run_dir)


def _render_console(summary: Mapping[str, Any]) -> RenderableType:
    from engine.tools.loadtest._report import render_console

    return render_console(summary)


def _outcome(manifest: Mapping[str, Any]) -> str:
    if manifest.get("unreachable"):
        return "target unreachable"
    return f"{format_count((manifest.get('counts') or {}).get('requests', 0))} requests"


LOAD_MODE = RunMode(
    noun="a load test",
    command="simrun loadtest",
    rebuild=_rebuild,
    render_console=_render_console,
    outcome=_outcome,
)
RUN_MODES.add("load", LOAD_MODE)
