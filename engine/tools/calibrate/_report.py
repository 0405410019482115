"""The calibration report in markdown (calibration.md) and on the terminal, from the result alone: the same
blocks (`engine.tools.calibrate._blocks`) calibration.html draws."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import RenderableType

from engine.report._blocks import Section
from engine.report._console import console_blocks
from engine.report._markdown import markdown_blocks
from engine.tools.calibrate._blocks import agreement_blocks, confusion_blocks
from engine.tools.calibrate._model import CalibrationReport, calibration_report

__all__ = ("render_console", "render_markdown")


def render_markdown(result: Mapping[str, Any] | CalibrationReport) -> str:
    """Agreement with intervals, what failed or was not measured, proxies, agreement between annotators and
    between judge models, then the confusion matrices."""
    report = calibration_report(result)
    sections = [
        Section("Agreement with the human labels", tuple(agreement_blocks(report)), key="agreement"),
        Section("Confusion matrices", tuple(confusion_blocks(report)), key="confusion"),
    ]
    title = f"# Judge calibration: {report.label_set} ({report.examples} labelled responses)"
    return f"{title}\n\n{markdown_blocks(sections)}"


def render_console(result: Mapping[str, Any] | CalibrationReport, *, confusion: bool = False) -> RenderableType:
    """The agreement table and notes; with `confusion`, every confusion matrix's counts too."""
    report = calibration_report(result)
    return console_blocks([*agreement_blocks(report), *confusion_blocks(report, console=confusion)])
