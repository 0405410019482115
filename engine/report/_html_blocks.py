"""Blocks as report.html: escaped tables, and inline SVG plots (`engine.report._svg_draw`), each followed by
the table of its numbers."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

from engine.report._blocks import Block, BlockCell, Brief, Bullets, Figure, Forest, Note, Section, Strong, Table
from engine.report._dots import Dot, DotPanel, Dots, DotSeries, dots_html
from engine.report._grid import HeatGrid, heat_grid_html, heatmap_html
from engine.report._histogram import Histogram, histogram_html
from engine.report._survival import Survival, survival_html
from engine.report._svg import Cell, paragraph, plot, section, table

__all__ = ("html_blocks",)


def _cell(value: BlockCell) -> Cell:
    if isinstance(value, Strong):
        return Markup("<strong>{}</strong>").format(value.text)
    if isinstance(value, Brief):
        return value.text
    return value


def _row_classes(block: Table) -> tuple[str, ...]:
    """The kind's classes, with every finding highlighted whatever the kind set."""
    count = max(len(block.row_classes), len(block.findings))
    classes = [block.row_classes[i] if i < len(block.row_classes) else "" for i in range(count)]
    return tuple("violation" if i < len(block.findings) and block.findings[i] else css for i, css in enumerate(classes))


def _table(block: Table) -> Markup:
    return table(
        block.columns,
        [[_cell(value) for value in row] for row in block.shown_rows()],
        caption=block.shown_caption() or None,
        row_classes=_row_classes(block) or None,
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


def _numbers(tables: Sequence[Table]) -> Markup:
    return Markup("").join(_table(t) for t in tables)


def _bullets(block: Bullets) -> Markup:
    items = Markup("<ul>{}</ul>").format(Markup("").join(Markup("<li>{}</li>").format(i) for i in block.items))
    return (paragraph(Markup("<strong>{}</strong>").format(block.lead)) if block.lead else Markup("")) + items


def _block(block: Block) -> Markup:
    if isinstance(block, Section):
        origin = [paragraph(f"Provenance: {block.provenance}", css="provenance")] if block.provenance else []
        return section(block.title, *origin, *(_block(inner) for inner in block.body), key=block.key or None)
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
    if isinstance(block, Figure):
        return plot(block.canvas, key=block.key, caption=block.caption, numbers=_numbers(block.numbers) or None)
    return heatmap_html(block, _numbers(block.numbers))


def html_blocks(blocks: Sequence[Block]) -> Markup:
    """The results part of report.html; every string is escaped."""
    return Markup("").join(_block(block) for block in blocks)
