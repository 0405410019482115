"""Bar blocks: counts or shares per category, in one figure of side-by-side panels (e.g. the share of
dialogues with an event per group, with its interval, beside the histogram of events per dialogue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.report._svg import new_figure, plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from engine.report._blocks import Table

__all__ = ("Bar", "BarPanel", "Histogram", "histogram_html")


@dataclass(frozen=True)
class Bar:
    """One bar; `low`/`high` draw its interval; `at` places a vertical panel's bar on a numeric axis (a
    histogram keeps its gaps), else bars stand in order."""

    label: str
    value: float
    low: float | None = None
    high: float | None = None
    at: float | None = None


@dataclass(frozen=True)
class BarPanel:
    """`horizontal` panels list categories top to bottom (long labels); `limit` fixes the value axis."""

    bars: tuple[Bar, ...]
    value_label: str
    category_label: str = ""
    horizontal: bool = False
    limit: tuple[float, float] | None = None
    color: str = "#667085"
    error_color: str = "#344054"


@dataclass(frozen=True)
class Histogram:
    """Panels of bars in one figure, `widths` their relative widths; `numbers` are the tables under it."""

    panels: tuple[BarPanel, ...]
    numbers: tuple[Table, ...]
    key: str
    caption: str
    widths: tuple[float, ...] | None = None
    console: bool = False


def _errors(panel: BarPanel) -> list[list[float]] | None:
    if all(b.low is None and b.high is None for b in panel.bars):
        return None
    below = [max(0.0, b.value - (b.low if b.low is not None else b.value)) for b in panel.bars]
    above = [max(0.0, (b.high if b.high is not None else b.value) - b.value) for b in panel.bars]
    return [below, above]


def _draw(ax: Axes, panel: BarPanel) -> None:
    values = [b.value for b in panel.bars]
    errors = _errors(panel)
    if panel.horizontal:
        positions = list(range(len(panel.bars)))
        ax.barh(positions, values, xerr=errors, color=panel.color, ecolor=panel.error_color, capsize=2)
        ax.set_yticks(positions, [b.label for b in panel.bars])
        ax.invert_yaxis()
        if panel.limit is not None:
            ax.set_xlim(*panel.limit)
        ax.set_xlabel(panel.value_label)
        ax.set_ylabel(panel.category_label)
        return
    spots = [float(i if b.at is None else b.at) for i, b in enumerate(panel.bars)]
    ax.bar(spots, values, yerr=errors, color=panel.color, ecolor=panel.error_color, capsize=2)
    if any(b.at is None for b in panel.bars):
        ax.set_xticks(spots, [b.label for b in panel.bars])
    if panel.limit is not None:
        ax.set_ylim(*panel.limit)
    ax.set_xlabel(panel.category_label)
    ax.set_ylabel(panel.value_label)


def histogram_html(block: Histogram, numbers: Markup) -> Markup:
    """The panels as one inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    rows = max([len(p.bars) for p in block.panels if p.horizontal] + [4])
    fig = new_figure(7.5, 0.32 * rows + 1.4)
    axes = fig.subplots(1, max(len(block.panels), 1), squeeze=False, width_ratios=block.widths)[0]
    for ax, panel in zip(axes, block.panels, strict=False):
        _draw(ax, panel)
    return plot(fig, key=block.key, caption=block.caption, numbers=numbers)
