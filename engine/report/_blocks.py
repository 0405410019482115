"""What a scenario kind shows, said once: blocks a kind builds from its typed summary, drawn by the engine
as report.md, the terminal and report.html.

A kind that writes three renderers over a string-keyed dict lets them drift apart; a kind that returns blocks
gets the same tables and numbers in every output. Cells are pre-formatted text (the kind knows its numbers'
precision); `Strong` marks a cell for emphasis. Plots (`Forest`, `Heatmap`) carry the table of the numbers they
draw, which is all a text output shows of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.report._grid import HeatGrid

__all__ = (
    "Block",
    "BlockCell",
    "Brief",
    "Forest",
    "ForestPanel",
    "Heatmap",
    "Interval",
    "Note",
    "Section",
    "Strong",
    "Table",
    "tables_of",
)


@dataclass(frozen=True)
class Strong:
    """A cell to emphasise (bold in every output), e.g. the diagonal of a confusion matrix."""

    text: str


@dataclass(frozen=True)
class Brief:
    """A cell with a shorter form for the terminal, whose tables must fit a narrow screen."""

    text: str
    short: str


BlockCell = str | int | Strong | Brief | None
"""A table cell: None shows as "–"; numbers are formatted by the kind, so every output shows the same digits."""


@dataclass(frozen=True)
class Note:
    """A paragraph of explanation; the terminal leaves notes out unless `console` is set."""

    text: str
    console: bool = False


@dataclass(frozen=True)
class Table:
    """A table. `title` names it where no heading does (the terminal); `console_columns` picks the columns the
    terminal shows (None: all, empty: the table is left out there); `row_classes[i]` (e.g. "violation",
    "total") highlights row i in HTML."""

    columns: tuple[str, ...]
    rows: tuple[tuple[BlockCell, ...], ...]
    title: str = ""
    caption: str = ""
    key: str = ""
    row_classes: tuple[str, ...] = ()
    console_columns: tuple[str, ...] | None = None
    left: tuple[str, ...] = ()
    """Columns the terminal aligns left besides the first (labels rather than numbers)."""


@dataclass(frozen=True)
class Interval:
    """One line of a forest plot: an estimate with its interval (None bounds: a point only)."""

    label: str
    estimate: float | None
    low: float | None = None
    high: float | None = None
    highlight: bool = False


@dataclass(frozen=True)
class ForestPanel:
    title: str
    intervals: tuple[Interval, ...]


@dataclass(frozen=True)
class Forest:
    """Estimates with intervals, one panel per metric sharing the labels; `band` shades |x| < band (e.g. the
    smallest effect worth reporting)."""

    panels: tuple[ForestPanel, ...]
    numbers: Table
    key: str
    caption: str
    xlabel: str
    xlim: tuple[float, float] | None = None
    xticks: tuple[float, ...] | None = None
    band: float | None = None


@dataclass(frozen=True)
class Heatmap:
    """A matrix of counts, rows against columns; `numbers` are the tables shown under it (and instead of it in
    text outputs)."""

    row_labels: tuple[str, ...]
    column_labels: tuple[str, ...]
    values: tuple[tuple[int, ...], ...]
    numbers: tuple[Table, ...]
    key: str
    caption: str
    xlabel: str
    ylabel: str
    colorbar: str = ""
    console: bool = False


@dataclass(frozen=True)
class Section:
    """A titled group of blocks: a heading in report.md and report.html (nested sections go one level down)."""

    title: str
    body: tuple[Block, ...] = field(default_factory=tuple)
    key: str = ""


Block = Section | Table | Note | Forest | Heatmap | HeatGrid


def tables_of(block: Block) -> Sequence[Table]:
    """The tables a text output shows for a block."""
    if isinstance(block, Table):
        return (block,)
    if isinstance(block, Forest):
        return (block.numbers,)
    if isinstance(block, Heatmap):
        return block.numbers
    if isinstance(block, HeatGrid):
        return (block.numbers,)
    return ()
