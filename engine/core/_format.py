"""Cell formatters shared by the reports, so a rate or a mean reads the same in every table.

Markdown and console cells show a missing value as "–"; HTML cells pass None on, and the table decides how
to show it. Contrast cells (p values, effects) live with their statistics in `engine.stats._paired`. Console
tables of every kind pass through `fit_to_width` where the command line prints them.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table

__all__ = ("RateStyle", "fit_to_width", "format_pct", "format_rate", "nanmean", "pct_or_none")


def nanmean(values: Sequence[float]) -> float | None:
    """Mean of the values that are not NaN (NaN marks a missing score); None when there are none."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def format_pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def pct_or_none(value: float | None) -> str | None:
    return None if value is None else f"{value:.0%}"


RateStyle = Literal["short", "precise", "compact"]


def format_rate(row: Mapping[str, Any] | None, style: RateStyle = "short") -> str:
    """A rate row (`engine.stats._rates.rate(...).as_dict()`) as text; "–" when nothing was counted.

    `short` is "62% [55%, 68%]"; `precise` adds a decimal and n, "62.0% [55.1%–68.4%] n=120"; `compact` is
    for narrow heatmap cells, "62 [55–68]". One function, so every report reads a rate the same way.
    """
    if not row or row.get("rate") is None:
        return "–"
    rate, low, high = row["rate"], row["low"], row["high"]
    if style == "precise":
        return f"{rate:.1%} [{low:.1%}–{high:.1%}] n={row['n']}"
    if style == "compact":
        return f"{rate * 100:.0f} [{low * 100:.0f}–{high * 100:.0f}]"
    return f"{rate:.0%} [{low:.0%}, {high:.0%}]"


def fit_to_width(renderable: RenderableType, width: int) -> RenderableType:
    """Every table in `renderable` made readable at `width` columns, never with a header cut to "…".

    A table that fits is left alone. One whose longest words fit wraps its cells at spaces (a word too long
    for its column folds rather than ending in "…"). One that cannot fit even so is stacked: each row
    becomes a block of "column  value" lines, so a wide summary still reads on an 80-column terminal.
    """
    if isinstance(renderable, Group):
        return Group(*(fit_to_width(part, width) for part in renderable.renderables))
    if not isinstance(renderable, Table):
        return renderable
    console = Console(width=100_000)  # unclamped: what the table would like
    measured = console.measure(renderable)
    if measured.maximum <= width:
        return renderable
    if measured.minimum <= width:
        for column in renderable.columns:
            column.overflow, column.no_wrap = "fold", False
        _keep_words_whole(renderable, width)
        return renderable
    return _stacked(renderable)


def _keep_words_whole(table: Table, width: int) -> None:
    """Rich may squeeze a column below its longest word; a minimum width per column prevents that, unless
    the minimums then overflow `width` (rich counts them differently), in which case folding stays."""
    console = Console(width=100_000)
    before = [column.min_width for column in table.columns]
    for column in table.columns:
        cells = [column.header, *column._cells]  # rich keeps a column's cells here
        words = max(Measurement.get(console, console.options, cell).minimum for cell in cells)
        column.min_width = max(column.min_width or 0, words)
    probe = Console(width=width * 2, file=io.StringIO(), record=True)  # wide enough to show an overflow
    probe.print(table, width=width)
    if max(map(len, probe.export_text().splitlines()), default=0) > width:
        for column, minimum in zip(table.columns, before, strict=True):
            column.min_width = minimum


def _stacked(table: Table) -> Table:
    stacked = Table(title=table.title, caption=table.caption, show_header=False, box=box.SIMPLE_HEAD)
    stacked.add_column(style="bold", overflow="fold")
    stacked.add_column(overflow="fold")
    cells = [column._cells for column in table.columns]  # rich keeps a column's cells here
    for index in range(table.row_count):
        for column, column_cells in zip(table.columns, cells, strict=True):
            stacked.add_row(column.header, column_cells[index])
        stacked.rows[-1].end_section = True
    return stacked
