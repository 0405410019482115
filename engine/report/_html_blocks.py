"""Blocks as report.html: escaped tables, and inline SVG plots drawn with `engine.report._svg`'s figure code,
each followed by the table of its numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from engine.report._blocks import Block, BlockCell, Brief, Bullets, Forest, Heatmap, Note, Section, Strong, Table
from engine.report._dots import Dot, DotPanel, Dots, DotSeries, dots_html
from engine.report._grid import HeatGrid, heat_grid_html
from engine.report._histogram import Histogram, histogram_html
from engine.report._survival import Survival, survival_html
from engine.report._svg import Cell, new_figure, paragraph, plot, section, table

__all__ = ("html_blocks",)


def _cell(value: BlockCell) -> Cell:
    if isinstance(value, Strong):
        return Markup("<strong>{}</strong>").format(value.text)
    if isinstance(value, Brief):
        return value.text
    return value


def _table(block: Table) -> Markup:
    return table(
        block.columns,
        [[_cell(value) for value in row] for row in block.rows],
        caption=block.caption or None,
        row_classes=block.row_classes or None,
        key=block.key or None,
    )


def _forest(block: Forest) -> Dots:
    """A forest plot is a dot plot: one series per panel, sharing the labels, around a line at 0."""
    labels = tuple(interval.label for interval in block.panels[0].intervals) if block.panels else ()
    panels = tuple(
        DotPanel(
            labels,
            (DotSeries(panel.title, tuple(Dot(i.estimate, i.low, i.high, i.highlight) for i in panel.intervals)),),
            title=panel.title if len(block.panels) > 1 else "",
            xlim=block.xlim,
            xticks=block.xticks,
            band=block.band,
            zero=True,
        )
        for panel in block.panels
    )
    return Dots(panels, (block.numbers,), key=block.key, caption=block.caption, xlabel=block.xlabel)


def _cell_texts(block: Heatmap) -> list[list[str]]:
    if block.cells is not None:
        return [list(row) for row in block.cells]
    return [["" if not v else f"{v:g}" for v in values] for values in block.values]


def _heatmap(block: Heatmap) -> Markup:
    rows, columns = len(block.row_labels), len(block.column_labels)
    if block.cells is None:
        fig = new_figure(min(7.5, 0.5 * columns + 3.2), min(7.5, 0.42 * rows + 2.2))
    else:
        fig = new_figure(7.5, 0.42 * rows + 1.6)  # room for each cell's own text
    ax = fig.add_subplot()
    matrix = [[math.nan if v is None else v for v in values] for values in block.values]
    image = ax.imshow(matrix, cmap=block.cmap, vmin=0, vmax=block.vmax, aspect="auto")
    peak = max((v for values in block.values for v in values if v is not None), default=0)
    light = peak / 2 if block.light_above is None else block.light_above
    for i, (values, texts) in enumerate(zip(block.values, _cell_texts(block), strict=True)):
        for j, (value, text) in enumerate(zip(values, texts, strict=True)):
            if text:
                color = "white" if value is not None and value > light else "black"
                weight = "bold" if i == j and block.cells is None else "normal"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color, fontweight=weight)
    ax.set_xticks(range(columns), block.column_labels, **_column_ticks(block))
    if block.columns_on_top:
        ax.xaxis.tick_top()
    ax.set_yticks(range(rows), block.row_labels, fontsize=7)
    ax.set_xlabel(block.xlabel)
    ax.set_ylabel(block.ylabel)
    fig.colorbar(image, ax=ax, label=block.colorbar, shrink=0.8)
    return plot(fig, key=block.key, caption=block.caption, numbers=_numbers(block.numbers))


def _column_ticks(block: Heatmap) -> dict[str, Any]:
    return {} if block.columns_on_top else {"rotation": 45, "ha": "right", "fontsize": 7}


def _numbers(tables: Sequence[Table]) -> Markup:
    return Markup("").join(_table(t) for t in tables)


def _bullets(block: Bullets) -> Markup:
    items = Markup("<ul>{}</ul>").format(Markup("").join(Markup("<li>{}</li>").format(i) for i in block.items))
    return (paragraph(Markup("<strong>{}</strong>").format(block.lead)) if block.lead else Markup("")) + items


def _block(block: Block) -> Markup:
    if isinstance(block, Section):
        return section(block.title, *(_block(inner) for inner in block.body), key=block.key or None)
    if isinstance(block, Note):
        return paragraph(block.text)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Bullets):
        return _bullets(block)
    if isinstance(block, Forest):
        return dots_html(_forest(block), _table(block.numbers))
    if isinstance(block, HeatGrid):
        return heat_grid_html(block, _table(block.numbers))
    if isinstance(block, Survival):
        return survival_html(block, _numbers(block.numbers))
    if isinstance(block, Histogram):
        return histogram_html(block, _numbers(block.numbers))
    if isinstance(block, Dots):
        return dots_html(block, _numbers(block.numbers))
    return _heatmap(block)


def html_blocks(blocks: Sequence[Block]) -> Markup:
    """The results part of report.html; every string is escaped."""
    return Markup("").join(_block(block) for block in blocks)
