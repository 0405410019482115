"""calibration.html: `simrun calibrate --out`'s agreement tables and confusion heatmaps as one self-contained page.

It reads only the result that calibration.json holds (`CalibrationResult.as_dict`), so it needs no judge code;
the tables and plots are the same blocks calibration.md and the terminal show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from engine.report._blocks import Section
from engine.report._html_blocks import html_blocks
from engine.report._page import render_page
from engine.report._svg import paragraph
from engine.tools.calibrate._blocks import agreement_blocks, confusion_blocks
from engine.tools.calibrate._model import CalibrationReport, calibration_report

__all__ = ("render_calibration_html",)

_SIM_NOTE = Markup(
    "<strong>Simulated verdicts.</strong> A judge model is simrun's <code>sim</code> provider, a "
    "deterministic simulator, not a language model: these numbers test the pipeline, not a judge."
)


def render_calibration_html(result: Mapping[str, Any] | CalibrationReport) -> str:
    """The whole page, deterministic for the same result (no dates, seeded SVG ids)."""
    report = calibration_report(result)
    title = f"Judge calibration: {report.label_set} ({report.examples} labelled responses)"
    models = {m for data in report.judges.values() for m in data.models}
    note = paragraph(_SIM_NOTE, css="sim-note") if any(m.startswith("sim/") for m in models) else Markup("")
    agreement = html_blocks(
        [Section("Agreement with the human labels", tuple(agreement_blocks(report)), key="agreement")]
    )
    body = (
        note
        + Markup('<section id="agreement"><h2>Agreement</h2>{}</section>').format(agreement)
        + Markup('<section id="confusion"><h2>Confusion matrices</h2>{}</section>').format(
            html_blocks(confusion_blocks(report))
        )
    )
    return render_page(
        title=title, header=None, body=body, nav=[("agreement", "Agreement"), ("confusion", "Confusion matrices")]
    )
