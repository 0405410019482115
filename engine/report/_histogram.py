"""Bar blocks: counts or shares per category, in one figure of side-by-side panels (e.g. the share of
dialogues with an event per group, with its interval, beside the histogram of events per dialogue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.report._svg import plot
from engine.report._svg_draw import Axes, Box, Canvas, nice_ticks, split, text_width, tick_label

if TYPE_CHECKING:
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


def _range(panel: BarPanel) -> tuple[float, float]:
    if panel.limit is not None:
        return panel.limit
    values = [v for b in panel.bars for v in (b.value, b.low, b.high) if v is not None]
    low, high = min([0.0, *values]), max([0.0, *values])
    return (low, high + (high - low) * 0.05 or 1.0)


def _spots(panel: BarPanel) -> list[float]:
    return [float(i if b.at is None else b.at) for i, b in enumerate(panel.bars)]


def _draw_bars(ax: Axes, panel: BarPanel) -> None:
    """Bars 0.8 wide from 0, with their intervals: along x for a `horizontal` panel, else up from the x axis."""
    spots = list(range(len(panel.bars))) if panel.horizontal else _spots(panel)
    for spot, bar in zip(spots, panel.bars, strict=True):
        if panel.horizontal:
            ax.area(0.0, bar.value, spot - 0.4, spot + 0.4, fill=panel.color)
        else:
            ax.area(spot - 0.4, spot + 0.4, 0.0, bar.value, fill=panel.color)
        low = bar.value if bar.low is None else min(bar.low, bar.value)
        high = bar.value if bar.high is None else max(bar.high, bar.value)
        if high > low:
            ax.whisker(spot, low, high, color=panel.error_color, across=panel.horizontal)


def _axes(canvas: Canvas, box: Box, panel: BarPanel) -> Axes:
    values = _range(panel)
    if panel.horizontal:
        ax = Axes(canvas, box, values, (0.0, 1.0))
        ax.rows(len(panel.bars))
        return ax
    spots = _spots(panel) or [0.0]
    return Axes(canvas, box, (min(spots) - 0.6, max(spots) + 0.6), values)


def _draw(ax: Axes, panel: BarPanel) -> None:
    labels = [b.label for b in panel.bars]
    value_ticks = (ax.x if panel.horizontal else ax.y).ticks(5)
    ax.grid(**({"xs": value_ticks} if panel.horizontal else {"ys": value_ticks}))
    _draw_bars(ax, panel)
    ax.frame()
    if panel.horizontal:
        ax.yticks(list(range(len(panel.bars))), labels)
        ax.xticks(value_ticks)
        ax.xlabel(panel.value_label)
        ax.ylabel(panel.category_label, offset=_label_room(panel) + 4)
        return
    spots = _spots(panel)
    if any(b.at is None for b in panel.bars):
        ax.xticks(spots, labels)
    else:
        ax.xticks(nice_ticks(ax.x.low, ax.x.high, 6, integer=True))
    ax.yticks(value_ticks)
    ax.xlabel(panel.category_label)
    ax.ylabel(panel.value_label, offset=_label_room(panel) + 4)


def _label_room(panel: BarPanel) -> float:
    """How far left of its area a panel's tick labels reach."""
    if panel.horizontal:
        return max((text_width(b.label, 7) for b in panel.bars), default=0.0) + 8
    ticks = nice_ticks(*_range(panel), 5)
    return max((text_width(tick_label(t, ticks), 7) for t in ticks), default=0.0) + 8


def histogram_html(block: Histogram, numbers: Markup) -> Markup:
    """The panels as one inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    rows = max([len(p.bars) for p in block.panels if p.horizontal] + [4])
    canvas = Canvas(540, 16 * rows + 70)
    pads = [_label_room(p) + (14 if (p.category_label if p.horizontal else p.value_label) else 0) for p in block.panels]
    area = Box(0, 10, canvas.width - 12, canvas.height - 36)
    for box, panel in zip(
        split(area, len(block.panels), gap=16, weights=block.widths, pads=pads), block.panels, strict=True
    ):
        _draw(_axes(canvas, box, panel), panel)
    return plot(canvas, key=block.key, caption=block.caption, numbers=numbers)
