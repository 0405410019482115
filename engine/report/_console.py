"""Blocks for the terminal: the tables alone, each titled, with the columns a kind marked for a narrow screen."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from engine.report._blocks import Block, BlockCell, Brief, Bullets, Forest, Note, Section, Strong, Table, tables_of
from engine.report._grid import HeatGrid

__all__ = ("console_blocks",)


def _cell(value: BlockCell) -> Text:
    if value is None:
        return Text("–")
    if isinstance(value, Strong):
        return Text(value.text, style="bold")
    if isinstance(value, Brief):
        return Text(value.short)
    return Text(str(value))


def _table(table: Table) -> RichTable:
    shown = table.console_shown()
    where = [table.columns.index(name) for name in shown]
    out = RichTable(title=table.title or None)
    for position, index in enumerate(where):
        name = table.columns[index]
        left = position == 0 or name in table.left
        out.add_column(name, justify="left" if left else "right")
    for row in table.shown_rows():
        out.add_row(*(_cell(row[index] if index < len(row) else None) for index in where))
    return out


def _walk(blocks: Sequence[Block]) -> Iterator[RenderableType]:
    for block in blocks:
        if isinstance(block, Section):
            shown = list(_walk(block.body))
            if shown and block.provenance:
                yield Text(f"{block.title} · {block.provenance}", style="dim")
            yield from shown
        elif isinstance(block, Note):
            if block.console:
                yield Text(block.text)
        elif isinstance(block, Bullets):
            if block.console:
                if block.lead:
                    yield Text(block.lead, style="bold")
                yield Text("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table | Forest | HeatGrid) or block.console:
            for table in tables_of(block):
                if table.console_columns != ():
                    yield _table(table)


def console_blocks(blocks: Sequence[Block]) -> RenderableType:
    """What the command line prints when a run ends or a report is rebuilt."""
    return Group(*_walk(blocks))
