"""Blocks as report.md: sections as headings, every table (a plot's too) as a pipe table."""

from __future__ import annotations

from collections.abc import Sequence

from engine.report._blocks import Block, BlockCell, Brief, Bullets, Note, Section, Strong, Table, tables_of

__all__ = ("markdown_blocks", "markdown_table")


def _cell(value: BlockCell) -> str:
    if value is None:
        return "–"
    if isinstance(value, Strong):
        return f"**{_cell(value.text)}**"
    text = value.text if isinstance(value, Brief) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in table.shown_rows()]
    if table.shown_caption():
        lines += ["", table.shown_caption()]
    return lines


def _block(block: Block, level: int) -> list[str]:
    if isinstance(block, Section):
        lines = ["#" * level + " " + block.title]
        if block.provenance:
            lines += ["", f"*Provenance: {block.provenance}*"]
        for inner in block.body:
            lines += ["", *_block(inner, level + 1)]
        return lines
    if isinstance(block, Note):
        return [block.text]
    if isinstance(block, Bullets):
        return [*([f"**{block.lead}**", ""] if block.lead else []), *(f"- {item}" for item in block.items)]
    shown: list[str] = []
    for table in tables_of(block):
        shown += [*([""] if shown else []), *markdown_table(table)]
    return shown


def markdown_blocks(blocks: Sequence[Block], *, level: int = 2) -> str:
    """The blocks as markdown, top-level sections at heading `level`; ends with a newline."""
    lines: list[str] = []
    for block in blocks:
        lines += [*([""] if lines else []), *_block(block, level)]
    return "\n".join(lines) + "\n"
