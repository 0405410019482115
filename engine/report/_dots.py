"""Dot plots of estimates with intervals, several series per row: rates on a 0–1 axis against a chance line,
the same groups under two conditions joined (before → after), or effects around 0 with a band of negligible
sizes. A row holds one dot per series, offset so their intervals never overlap, and panels may have rows of
their own (stacked). `Forest` (one estimate per label and panel) is drawn through this too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.report._svg import new_figure, plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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
    return max(0.0, dot.estimate - low), max(0.0, high - dot.estimate)


def _series(ax: Axes, panel: DotPanel, index: int, series: DotSeries) -> None:
    count = len(panel.series)
    offset = (index - (count - 1) / 2) * (0.7 / max(1, count))
    base = _COLORS[index % len(_COLORS)]
    for row, dot in enumerate(series.dots):
        if dot is None or dot.estimate is None:
            continue
        color = panel.highlight_color if dot.highlight else base
        below, above = _spread(dot)
        marker = "D" if dot.highlight and (panel.band is not None or panel.zero) else "o"
        ax.errorbar([dot.estimate], [row + offset], xerr=[[below], [above]], fmt=marker, color=color, capsize=2, ms=4)
    if count > 1:
        ax.plot([], [], "o", color=base, label=series.name)


def _joined(ax: Axes, panel: DotPanel) -> None:
    before, after = panel.series[0].dots, panel.series[1].dots
    for row, (a, b) in enumerate(zip(before, after, strict=True)):
        if a is None or b is None or a.estimate is None or b.estimate is None:
            continue
        ax.plot([a.estimate, b.estimate], [row, row], color=_JOIN, linewidth=1.2)
        ax.plot([a.estimate], [row], "o", color=_BEFORE, ms=4, mfc="white")
        ax.plot([b.estimate], [row], "o", color=_COLORS[0], ms=4)


def _panel(ax: Axes, panel: DotPanel, *, labels: bool) -> None:
    if panel.band is not None:
        ax.axvspan(-panel.band, panel.band, color=_BAND, zorder=0)
    if panel.band is not None or panel.zero:
        ax.axvline(0, color=_INK, linewidth=0.8)
    if panel.joined and len(panel.series) == 2:
        _joined(ax, panel)
    else:
        for index, series in enumerate(panel.series):
            _series(ax, panel, index, series)
    for x in panel.lines:
        ax.axvline(x, color=_LINE, linestyle="--", linewidth=1)
    for row, x in panel.ticks:
        ax.plot([x, x], [row - 0.42, row + 0.42], color=_INK, linestyle="--", linewidth=1)
    if labels:
        ax.set_yticks(range(len(panel.rows)), panel.rows, fontsize=8)
    ax.set_ylim(len(panel.rows) - 0.5, -0.5)
    if panel.xlim is not None:
        ax.set_xlim(*panel.xlim)
    if panel.xticks is not None:
        ax.set_xticks(list(panel.xticks))
    ax.set_xlabel(panel.xlabel)
    if panel.title:
        ax.set_title(panel.title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    if len(panel.series) > 1 and not panel.joined:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def dots_html(block: Dots, numbers: Markup) -> Markup:
    """The panels as one inline SVG followed by `numbers` (its tables, rendered by the caller)."""
    panels = block.panels
    if block.stacked:
        fig = new_figure(7.5, sum(0.3 * (len(p.rows) + 2) for p in panels) + 1.2)
        axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
    else:
        rows = max((len(p.rows) for p in panels), default=1)
        series = max((1 if p.joined else len(p.series) for p in panels), default=1)
        fig = new_figure(7.5, 0.34 * rows * max(1, series) ** 0.5 + 1.5)
        axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for index, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
        _panel(ax, panel, labels=block.stacked or index == 0)
        if block.stacked and index < len(panels) - 1:
            ax.set_xlabel("")
    if block.xlabel:
        fig.supxlabel(block.xlabel, fontsize=8)
    return plot(fig, key=block.key, caption=block.caption, numbers=numbers)
