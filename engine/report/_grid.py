"""Shaded matrices: a heatmap of counts or rates with its colour bar, and small multiples of them (one small
matrix of means per panel, e.g. per metric, sharing its row and column labels, each panel shaded on its own
scale, since panels may measure different things)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup

from engine.core._format import format_setting, format_sig
from engine.report._svg import plot
from engine.report._svg_draw import FRAME, Axes, Box, Canvas, Scale, colormap, split, text_width, tick_label

if TYPE_CHECKING:
    from engine.report._blocks import Heatmap, Table

__all__ = ("GridPanel", "HeatGrid", "heat_grid_html", "heatmap_html", "shade")


@dataclass(frozen=True)
class GridPanel:
    """One matrix, rows × columns; None marks a cell with no value."""

    title: str
    values: tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class HeatGrid:
    """Panels of small matrices, `columns` panels to a row; `numbers` is the table shown under the plot (and
    instead of it in text outputs)."""

    row_labels: tuple[str, ...]
    column_labels: tuple[str, ...]
    panels: tuple[GridPanel, ...]
    numbers: Table
    key: str
    caption: str
    columns: int = 3


def shade(
    ax: Axes,
    values: Sequence[Sequence[float | None]],
    texts: Sequence[Sequence[str]],
    *,
    cmap: str,
    scale: tuple[float, float],
    light_above: float,
    bold_diagonal: bool = False,
) -> None:
    """Cells coloured on `scale` (None: left blank), each with its text, white on the dark ones."""
    low, high = scale
    ax.rows(len(values))
    for i, (row, row_texts) in enumerate(zip(values, texts, strict=True)):
        for j, (value, text) in enumerate(zip(row, row_texts, strict=True)):
            if value is not None:
                share = (value - low) / (high - low) if high > low else 0.0
                ax.area(j - 0.5, j + 0.5, i - 0.5, i + 0.5, fill=colormap(cmap, share), seamless=True)
            if text:
                color = "#ffffff" if value is not None and value > light_above else "#000000"
                ax.text(j, i, text, size=8, color=color, bold=bold_diagonal and i == j)


def colorbar(canvas: Canvas, box: Box, *, cmap: str, scale: tuple[float, float], label: str) -> None:
    """A vertical strip of the colour scale with its ticks, and `label` beside it."""
    steps = 48
    ax = Axes(canvas, box, (0.0, 1.0), scale)
    for k in range(steps):
        low = scale[0] + (scale[1] - scale[0]) * k / steps
        high = scale[0] + (scale[1] - scale[0]) * (k + 1) / steps
        ax.area(0.0, 1.0, low, high, fill=colormap(cmap, (k + 0.5) / steps), seamless=True)
    canvas.rect(box.left, box.top, box.right - box.left, box.bottom - box.top, fill="none", stroke=FRAME)
    ticks = ax.y.ticks(5)
    ax.yticks(ticks, right=True)
    room = max((text_width(tick_label(t, ticks), 7) for t in ticks), default=0.0)
    ax.ylabel(label, offset=room + 14, right=True)


def _panel(ax: Axes, panel: GridPanel, block: HeatGrid) -> None:
    finite = [v for row in panel.values for v in row if v is not None and not math.isnan(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    values = [[None if v is None or math.isnan(v) else v for v in row] for row in panel.values]
    texts = [[format_sig(v) for v in row] for row in values]
    ax.x = Scale(-0.5, len(block.column_labels) - 0.5, ax.box.left, ax.box.right)
    light = (low + high) / 2 if high > low else math.inf
    shade(ax, values, texts, cmap="Blues", scale=(low, high), light_above=light)
    ax.title(panel.title, size=8)
    ax.xticks(list(range(len(block.column_labels))), block.column_labels)
    ax.yticks(list(range(len(block.row_labels))), block.row_labels)


def heat_grid_html(block: HeatGrid, numbers: Markup) -> Markup:
    """The panels as one inline SVG figure, with `numbers` (the block's table, as HTML) below it."""
    rows = max(math.ceil(len(block.panels) / block.columns), 1)
    canvas = Canvas(540, 150 * rows + 30)
    room = max((text_width(label, 7) for label in block.row_labels), default=0.0) + 10
    area = Box(0, 20, canvas.width - 10, canvas.height - 20)
    for r, line in enumerate(split(area, rows, gap=40, across=False)):
        boxes = split(line, block.columns, gap=14, pads=[room] * block.columns)
        for box, panel in zip(boxes, block.panels[r * block.columns : (r + 1) * block.columns], strict=False):
            _panel(Axes(canvas, box, (0.0, 1.0), (0.0, 1.0)), panel, block)
    return plot(canvas, key=block.key, caption=block.caption, numbers=numbers)


def heatmap_html(block: Heatmap, numbers: Markup) -> Markup:
    """A matrix of cells shaded from 0 to `vmax` (default: the largest value), a colour bar beside it."""
    rows, columns = len(block.row_labels), len(block.column_labels)
    texts = _cell_texts(block)
    cell = max([36.0, *(text_width(t, 8) + 8 for row in texts for t in row)])
    left = max((text_width(label, 7) for label in block.row_labels), default=0.0) + 10 + (14 if block.ylabel else 0)
    slant = 0.0 if block.columns_on_top else max((text_width(c, 7) for c in block.column_labels), default=0.0) * 0.64
    top, bottom = (22.0 if block.columns_on_top else 8.0), 14 + slant + (14 if block.xlabel else 0)
    width = 540.0 if block.cells is not None else min(540.0, left + cell * columns + 90)  # own texts: full width
    height = 22.0 if block.cells is not None else 20.0
    canvas = Canvas(width, top + height * rows + bottom)
    box = Box(left, top, width - 90, top + height * rows)
    ax = Axes(canvas, box, (-0.5, columns - 0.5), (0.0, 1.0))
    peak = max((v for values in block.values for v in values if v is not None), default=0)
    scale = (0.0, float(block.vmax if block.vmax is not None else peak) or 1.0)
    light = peak / 2 if block.light_above is None else block.light_above
    shade(ax, block.values, texts, cmap=block.cmap, scale=scale, light_above=light, bold_diagonal=block.cells is None)
    ax.xticks(list(range(columns)), block.column_labels, rotate=not block.columns_on_top, top=block.columns_on_top)
    ax.yticks(list(range(rows)), block.row_labels)
    ax.xlabel(block.xlabel, offset=bottom - 6)
    ax.ylabel(block.ylabel, offset=left - 8)
    colorbar(
        canvas, Box(box.right + 12, top, box.right + 22, box.bottom), cmap=block.cmap, scale=scale, label=block.colorbar
    )
    return plot(canvas, key=block.key, caption=block.caption, numbers=numbers)


def _cell_texts(block: Heatmap) -> list[list[str]]:
    if block.cells is not None:
        return [list(row) for row in block.cells]
    return [["" if not v else format_setting(v) for v in values] for values in block.values]
