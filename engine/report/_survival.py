"""Time-to-event blocks: Kaplan–Meier step curves of the share still without the event, and the discrete
hazard per time with its interval. Subjects whose event never came are censored at their last time, which
the kind has already folded into the estimates (`engine.stats.survival_table`, `discrete_hazard`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from markupsafe import Markup

from engine.report._svg import new_figure, plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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


def _steps(curve: Curve) -> tuple[list[int], list[float]]:
    points = [p for p in curve.points if p.value is not None]
    return [0, *(p.time for p in points)], [1.0, *(p.value for p in points if p.value is not None)]


def _draw_survival(ax: Axes, block: Survival) -> None:
    for curve in block.curves:
        if curve.style == "muted":
            ax.step(*_steps(curve), where="post", color=_MUTED, linewidth=0.9)
    highlighted = [c for c in block.curves if c.style == "highlight"]
    for curve, colour in zip(highlighted, _HIGHLIGHTS, strict=False):
        ax.step(*_steps(curve), where="post", color=colour, linewidth=1.8, label=curve.label)
    for curve in block.curves:
        if curve.style == "pooled" and curve.points:
            ax.step(*_steps(curve), where="post", color="black", linewidth=2.4, label=curve.label)
    if block.muted_label and any(c.style == "muted" for c in block.curves):
        ax.plot([], [], color=_MUTED, linewidth=0.9, label=block.muted_label)
    ax.set_ylim(0, 1.02)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _draw_hazard(ax: Axes, block: Survival) -> None:
    for curve in block.curves:
        shown = [p for p in curve.points if p.value is not None]
        if not shown:
            continue
        values = [p.value for p in shown if p.value is not None]
        below = [v - (p.low if p.low is not None else v) for v, p in zip(values, shown, strict=True)]
        above = [(p.high if p.high is not None else v) - v for v, p in zip(values, shown, strict=True)]
        ax.errorbar(
            [p.time for p in shown], values, yerr=[below, above], fmt="o-", color=_HAZARD, ecolor=_HAZARD_BAR, capsize=3
        )
    if block.reference is not None and any(p.value is not None for c in block.curves for p in c.points):
        ax.axhline(block.reference, color=_REFERENCE, linestyle="--", linewidth=1, label=block.reference_label)
        ax.legend(fontsize=7)
    ax.set_ylim(0, 1)


def survival_html(block: Survival, numbers: Markup) -> Markup:
    """The plot as inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    fig = new_figure(7.5, 3.4 if block.hazard else 4.2)
    ax = fig.add_subplot()
    (_draw_hazard if block.hazard else _draw_survival)(ax, block)
    ax.set_xlabel(block.xlabel)
    ax.set_ylabel(block.ylabel)
    ax.grid(alpha=0.3)
    return plot(fig, key=block.key, caption=block.caption, numbers=numbers)
