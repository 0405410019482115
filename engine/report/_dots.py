"""Dot plots of estimates with intervals, several series per row: rates on a 0–1 axis against a chance line,
the same groups under two conditions joined (before → after), or effects around 0 with a band of negligible
sizes. A row holds one dot per series, offset so their intervals never overlap, and panels may have rows of
their own (stacked). `Forest` (one estimate per label and panel) is drawn through this too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.report._svg import plot
from engine.report._svg_draw import Axes, Box, Canvas, Legend, Marker, fit, legend_width, split, text_width

if TYPE_CHECKING:
    from engine.report._blocks import Table

__all__ = ("Dot", "DotPanel", "DotSeries", "Dots", "dots_html")

_COLORS = ("#1570ef", "#f79009", "#12b76a", "#7a5af8", "#d92d20", "#667085")
_BEFORE, _JOIN, _INK, _BAND, _LINE = "#667085", "#98a2b3", "#344054", "#eaecf0", "#d92d20"


@dataclass(frozen=True)
class Dot:
    """An estimate with its interval (None bounds: a point only); `highlight` draws it in the panel's
    highlight colour (e.g. above chance, or a finding)."""

    estimate: float | None
    low: float | None = None
    high: float | None = None
    highlight: bool = False


@dataclass(frozen=True)
class DotSeries:
    """One dot per row of its panel (None: no estimate there), named in the legend."""

    name: str
    dots: tuple[Dot | None, ...]


@dataclass(frozen=True)
class DotPanel:
    """Rows top to bottom. `xlim` None: fitted to the data. `lines`: dashed vertical references (chance);
    `ticks`: (row, x) short references on one row; `zero`: a line at 0; `band`: shade |x| < band around it;
    `joined`: two series drawn as before (hollow) and after (filled) on one line per row."""

    rows: tuple[str, ...]
    series: tuple[DotSeries, ...]
    title: str = ""
    xlabel: str = ""
    xlim: tuple[float, float] | None = (-0.02, 1.02)
    xticks: tuple[float, ...] | None = None
    lines: tuple[float, ...] = ()
    ticks: tuple[tuple[int, float], ...] = ()
    band: float | None = None
    zero: bool = False
    joined: bool = False
    highlight_color: str = "#d92d20"


@dataclass(frozen=True)
class Dots:
    """Panels side by side sharing their rows, or `stacked` one above another with rows of their own;
    `xlabel` is one label under them all; `numbers` are the tables under the plot (and instead of it in text
    outputs)."""

    panels: tuple[DotPanel, ...]
    numbers: tuple[Table, ...]
    key: str
    caption: str
    stacked: bool = False
    console: bool = False
    xlabel: str = ""


def _spread(dot: Dot) -> tuple[float, float]:
    assert dot.estimate is not None
    low = dot.estimate if dot.low is None else dot.low
    high = dot.estimate if dot.high is None else dot.high
    return min(low, dot.estimate), max(high, dot.estimate)


def _series(ax: Axes, panel: DotPanel, index: int, series: DotSeries) -> None:
    count = len(panel.series)
    offset = (index - (count - 1) / 2) * (0.7 / max(1, count))
    base = _COLORS[index % len(_COLORS)]
    for row, dot in enumerate(series.dots):
        if dot is None or dot.estimate is None:
            continue
        color = panel.highlight_color if dot.highlight else base
        low, high = _spread(dot)
        if high > low:
            ax.whisker(row + offset, low, high, color=color)
        marker: Marker = "D" if dot.highlight and (panel.band is not None or panel.zero) else "o"
        ax.marker(dot.estimate, row + offset, marker, color=color)


def _joined(ax: Axes, panel: DotPanel) -> None:
    before, after = panel.series[0].dots, panel.series[1].dots
    for row, (a, b) in enumerate(zip(before, after, strict=True)):
        if a is None or b is None or a.estimate is None or b.estimate is None:
            continue
        ax.line([a.estimate, b.estimate], [row, row], color=_JOIN, width=1.2)
        ax.marker(a.estimate, row, color=_BEFORE, hollow=True)
        ax.marker(b.estimate, row, color=_COLORS[0])


def _legend(panel: DotPanel) -> list[Legend]:
    if len(panel.series) < 2 or panel.joined:
        return []
    return [Legend(s.name, _COLORS[i % len(_COLORS)], "dot") for i, s in enumerate(panel.series)]


def _xlim(panels: tuple[DotPanel, ...]) -> tuple[float, float]:
    values: list[float | None] = []
    for panel in panels:
        values += [*panel.lines, *(x for _, x in panel.ticks), *(panel.xticks or ())]
        values += [0.0] if panel.zero or panel.band is not None else []
        values += [-panel.band, panel.band] if panel.band is not None else []
        for series in panel.series:
            values += [v for d in series.dots if d is not None and d.estimate is not None for v in _spread(d)]
    return fit(values)


def _panel(ax: Axes, panel: DotPanel, *, labels: bool, xticks: bool) -> None:
    ax.rows(len(panel.rows))
    ticks = list(panel.xticks) if panel.xticks is not None else ax.x.ticks(6)
    if panel.band is not None:
        ax.area(-panel.band, panel.band, -0.5, len(panel.rows) - 0.5, fill=_BAND)
    ax.grid(xs=ticks)
    if panel.band is not None or panel.zero:
        ax.vline(0, color=_INK, width=0.8)
    if panel.joined and len(panel.series) == 2:
        _joined(ax, panel)
    else:
        for index, series in enumerate(panel.series):
            _series(ax, panel, index, series)
    for x in panel.lines:
        ax.vline(x, color=_LINE, dash="4 2")
    for row, x in panel.ticks:
        ax.line([x, x], [row - 0.42, row + 0.42], color=_INK, width=1.0, dash="3 2")
    ax.frame()
    if labels:
        ax.yticks(list(range(len(panel.rows))), panel.rows, size=8)
    if xticks:
        ax.xticks(ticks)
        ax.xlabel(panel.xlabel)
    ax.title(panel.title)
    ax.legend(_legend(panel))


def _layout(block: Dots, canvas: Canvas) -> list[Box]:
    panels = block.panels
    left = max((text_width(r, 8) for p in panels for r in p.rows), default=0.0) + 10
    legend = max((legend_width(_legend(p)) for p in panels), default=0.0)
    top = 20.0 if any(p.title for p in panels) else 8.0
    bottom = 20.0 + (14 if any(p.xlabel for p in panels) else 0) + (14 if block.xlabel else 0)
    area = Box(left, top, canvas.width - max(legend, 0) - 12, canvas.height - bottom)
    if block.stacked:
        gap = 8.0 + (20 if any(p.title for p in panels) else 0)
        return split(area, len(panels), gap=gap, weights=[len(p.rows) + 0.5 for p in panels], across=False)
    return split(area, len(panels), gap=14 + max(legend, 0))


def dots_html(block: Dots, numbers: Markup) -> Markup:
    """The panels as one inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    panels = block.panels
    series = max((1 if p.joined else len(p.series) for p in panels), default=1)
    if block.stacked:
        height = sum(15 * (len(p.rows) + 0.5) for p in panels) + 36 * len(panels) + 20
    else:
        height = 15 * max((len(p.rows) for p in panels), default=1) * max(1, series) ** 0.5 + 60
    canvas = Canvas(540, height)
    boxes = _layout(block, canvas)
    shared = _xlim(panels)
    for index, (box, panel) in enumerate(zip(boxes, panels, strict=True)):
        ax = Axes(canvas, box, panel.xlim or (_xlim((panel,)) if not block.stacked else shared), (0.0, 1.0))
        last = not block.stacked or index == len(panels) - 1
        _panel(ax, panel, labels=block.stacked or index == 0, xticks=last)
    if block.xlabel and boxes:
        canvas.text((boxes[0].left + boxes[-1].right) / 2, canvas.height - 8, block.xlabel, anchor="middle")
    return plot(canvas, key=block.key, caption=block.caption, numbers=numbers)
