"""Registers load testing as a run mode, so the scenario loader and the run-directory readers need not know it."""

from __future__ import annotations

from ..modes import RUN_MODES, RunMode
from .report import render_console
from .run import rebuild_summary

__all__ = ("LOAD_MODE",)

LOAD_MODE = RunMode(
    noun="a load test", command="simrun loadtest", rebuild=rebuild_summary, render_console=render_console
)
RUN_MODES.add("load", LOAD_MODE)
