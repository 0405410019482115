"""Time-to-event blocks: Kaplan–Meier step curves of the share still without the event, and the discrete
hazard per time with its interval. Subjects whose event never came are censored at their last time, which
the kind has already folded into the estimates (`engine.stats.survival_table`, `discrete_hazard`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from markupsafe import Markup

from engine.report._svg import plot
from engine.report._svg_draw import Axes, Box, Canvas, Legend, fit, legend_width, nice_ticks

if TYPE_CHECKING:
    from engine.report._blocks import Table

__all__ = ("Curve", "CurvePoint", "Survival", "survival_html")

_HIGHLIGHTS = ("#d92d20", "#f79009", "#7a5af8", "#1570ef", "#12b76a")
_MUTED, _HAZARD, _HAZARD_BAR, _REFERENCE = "#d0d5dd", "#d92d20", "#f97066", "#475467"


@dataclass(frozen=True)
class CurvePoint:
    """The estimate after `time` (survival) or at it (hazard); None: no one was at risk."""

    time: int
    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Curve:
    """One group's curve: `pooled` (all groups, drawn strongest), `highlight` (in colour) or `muted` (grey)."""

    label: str
    points: tuple[CurvePoint, ...]
    style: Literal["pooled", "highlight", "muted"] = "highlight"


@dataclass(frozen=True)
class Survival:
    """Survival curves (steps from 1 at time 0) or, with `hazard`, hazard points with their intervals.

    `reference` draws a dashed level labelled `reference_label` (e.g. the pooled later hazard);
    `muted_label` names the grey curves in the legend once. `numbers` are the tables under the plot.
    """

    curves: tuple[Curve, ...]
    numbers: tuple[Table, ...]
    key: str
    caption: str
    xlabel: str
    ylabel: str
    hazard: bool = False
    reference: float | None = None
    reference_label: str = ""
    muted_label: str = ""
    console: bool = False


def _steps(curve: Curve) -> tuple[list[float], list[float]]:
    points = [p for p in curve.points if p.value is not None]
    return [0.0, *(float(p.time) for p in points)], [1.0, *(p.value for p in points if p.value is not None)]


def _draw_survival(ax: Axes, block: Survival) -> None:
    for curve in block.curves:
        if curve.style == "muted":
            ax.step(*_steps(curve), color=_MUTED, width=0.9)
    highlighted = [c for c in block.curves if c.style == "highlight"]
    for curve, colour in zip(highlighted, _HIGHLIGHTS, strict=False):
        ax.step(*_steps(curve), color=colour, width=1.8)
    for curve in block.curves:
        if curve.style == "pooled" and curve.points:
            ax.step(*_steps(curve), color="#000000", width=2.4)


def _draw_hazard(ax: Axes, block: Survival) -> None:
    for curve in block.curves:
        shown = [(p.time, p.value, p) for p in curve.points if p.value is not None]
        ax.line([float(t) for t, _, _ in shown], [v for _, v, _ in shown], color=_HAZARD, width=1.5)
        for time, value, point in shown:
            low = value if point.low is None else point.low
            high = value if point.high is None else point.high
            if high > low:
                ax.whisker(time, low, high, color=_HAZARD_BAR, across=False)
            ax.marker(time, value, color=_HAZARD, size=5)
    if _has_reference(block):
        assert block.reference is not None
        ax.hline(block.reference, color=_REFERENCE, dash="5 3")


def _has_reference(block: Survival) -> bool:
    return block.reference is not None and any(p.value is not None for c in block.curves for p in c.points)


def _legend(block: Survival) -> list[Legend]:
    if block.hazard:
        return [Legend(block.reference_label, _REFERENCE, width=1.0, dash="5 3")] if _has_reference(block) else []
    highlighted = [c for c in block.curves if c.style == "highlight"]
    legend = [Legend(c.label, colour, width=1.8) for c, colour in zip(highlighted, _HIGHLIGHTS, strict=False)]
    legend += [Legend(c.label, "#000000", width=2.4) for c in block.curves if c.style == "pooled" and c.points]
    if block.muted_label and any(c.style == "muted" for c in block.curves):
        legend.append(Legend(block.muted_label, _MUTED, width=0.9))
    return legend


def survival_html(block: Survival, numbers: Markup) -> Markup:
    """The plot as inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    canvas = Canvas(540, 245 if block.hazard else 300)
    legend = _legend(block)
    right = canvas.width - 12 - legend_width(legend)  # outside: inside, it hid a hazard of 1 at the last reply
    box = Box(48, 10, right, canvas.height - 36)
    times = [float(p.time) for c in block.curves for p in c.points if p.value is not None]
    ax = Axes(canvas, box, fit([0.0, *times] if not block.hazard else times), (0.0, 1.0 if block.hazard else 1.02))
    xticks, yticks = nice_ticks(ax.x.low, ax.x.high, 8, integer=True), ax.y.ticks(5)
    ax.grid(xs=xticks, ys=yticks)
    (_draw_hazard if block.hazard else _draw_survival)(ax, block)
    ax.frame()
    ax.xticks(xticks)
    ax.yticks(yticks)
    ax.xlabel(block.xlabel)
    ax.ylabel(block.ylabel, offset=34)
    ax.legend(legend)
    return plot(canvas, key=block.key, caption=block.caption, numbers=numbers)
