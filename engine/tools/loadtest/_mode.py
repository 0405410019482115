"""Registers load testing as a run mode, so the scenario loader and the run-directory readers need not know it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.runtime._modes import RUN_MODES, RunMode
from engine.tools.loadtest._report import render_console
from engine.tools.loadtest._run import rebuild_summary

__all__ = ("LOAD_MODE",)


def _outcome(manifest: Mapping[str, Any]) -> str:
    if manifest.get("unreachable"):
        return "target unreachable"
    return f"{(manifest.get('counts') or {}).get('requests', 0):,} requests"


LOAD_MODE = RunMode(
    noun="a load test",
    command="simrun loadtest",
    rebuild=rebuild_summary,
    render_console=render_console,
    outcome=_outcome,
)
RUN_MODES.add("load", LOAD_MODE)
