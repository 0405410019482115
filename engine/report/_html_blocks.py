"""Blocks as report.html: escaped tables, and inline SVG plots drawn with `engine.report._svg`'s figure code,
each followed by the table of its numbers."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

from engine.report._blocks import Block, BlockCell, Brief, Forest, Heatmap, Note, Section, Strong, Table
from engine.report._grid import HeatGrid, heat_grid_html
from engine.report._svg import Cell, new_figure, paragraph, plot, section, table

__all__ = ("html_blocks",)

_BLUE, _RED, _INK, _BAND = "#1570ef", "#d92d20", "#344054", "#eaecf0"


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


def _forest(block: Forest) -> Markup:
    labels = [interval.label for interval in block.panels[0].intervals] if block.panels else []
    rows = max(len(labels), 1)
    fig = new_figure(7.5, (0.32 if len(block.panels) > 1 else 0.26) * rows + 1.5)
    axes = fig.subplots(1, len(block.panels), sharey=True, squeeze=False)[0]
    for ax, panel in zip(axes, block.panels, strict=True):
        if block.band is not None:
            ax.axvspan(-block.band, block.band, color=_BAND, zorder=0)
        ax.axvline(0, color=_INK, linewidth=0.8)
        for index, interval in enumerate(panel.intervals):
            if interval.estimate is None:
                continue
            color = _RED if interval.highlight else _BLUE
            if interval.low is not None and interval.high is not None:
                ax.plot([interval.low, interval.high], [index, index], color=color, linewidth=1.6)
            ax.plot([interval.estimate], [index], "D" if interval.highlight else "o", color=color, ms=4)
        if len(block.panels) > 1:
            ax.set_title(panel.title, fontsize=8)
        if block.xlim is not None:
            ax.set_xlim(*block.xlim)
        if block.xticks is not None:
            ax.set_xticks(list(block.xticks))
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(labels)), labels, fontsize=7)
    axes[0].set_ylim(len(labels) - 0.5, -0.5)
    fig.supxlabel(block.xlabel, fontsize=8)
    return plot(fig, key=block.key, caption=block.caption, numbers=_table(block.numbers))


def _heatmap(block: Heatmap) -> Markup:
    rows, columns = len(block.row_labels), len(block.column_labels)
    fig = new_figure(min(7.5, 0.5 * columns + 3.2), min(7.5, 0.42 * rows + 2.2))
    ax = fig.add_subplot()
    matrix = [list(values) for values in block.values]
    image = ax.imshow(matrix, cmap="Blues", vmin=0, aspect="auto")
    peak = max((v for values in matrix for v in values), default=0)
    for i, values in enumerate(matrix):
        for j, count in enumerate(values):
            if count:
                color = "white" if count > peak / 2 else "black"
                weight = "bold" if i == j else "normal"
                ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color=color, fontweight=weight)
    ax.set_xticks(range(columns), block.column_labels, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(rows), block.row_labels, fontsize=7)
    ax.set_xlabel(block.xlabel)
    ax.set_ylabel(block.ylabel)
    fig.colorbar(image, ax=ax, label=block.colorbar, shrink=0.8)
    numbers = Markup("").join(_table(t) for t in block.numbers)
    return plot(fig, key=block.key, caption=block.caption, numbers=numbers)


def _block(block: Block) -> Markup:
    if isinstance(block, Section):
        return section(block.title, *(_block(inner) for inner in block.body), key=block.key or None)
    if isinstance(block, Note):
        return paragraph(block.text)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Forest):
        return _forest(block)
    if isinstance(block, HeatGrid):
        return heat_grid_html(block, _table(block.numbers))
    return _heatmap(block)


def html_blocks(blocks: Sequence[Block]) -> Markup:
    """The results part of report.html; every string is escaped."""
    return Markup("").join(_block(block) for block in blocks)
