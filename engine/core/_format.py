"""The one place a report's numbers become text, so a rate, a mean, a latency or a difference in percentage
points reads the same in every table of every output.

Every formatter shows a missing value as "–" (`pct_or_none` passes None on, for HTML cells whose table decides),
never prints "-0.00", and takes its precision as `digits`. p values, effect sizes and interval levels are
formatted beside their statistics (`engine.stats._families`), which call nothing here. Console tables of every
kind pass through `fit_to_width` where the command line prints them. A test fails on a numeric format spec in a
report module outside this one.
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

__all__ = (
    "MISSING",
    "RateStyle",
    "fit_to_width",
    "format_count",
    "format_estimate",
    "format_interval",
    "format_ms",
    "format_fixed",
    "format_pct",
    "format_points",
    "format_rate",
    "format_setting",
    "format_sig",
    "format_usd",
    "nanmean",
    "pct_or_none",
)

MISSING = "–"
"""What every formatter shows for a value that is not there."""


def nanmean(values: Sequence[float]) -> float | None:
    """Mean of the values that are not NaN (NaN marks a missing score); None when there are none."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def _fixed(value: float, digits: int, *, signed: bool = False) -> str:
    text = f"{value:+,.{digits}f}" if signed else f"{value:,.{digits}f}"
    if text.lstrip("+-").strip("0.,") == "":  # a rounded zero has no sign ("-0.00" reads as a negative)
        return ("+" if signed else "") + text.lstrip("+-")
    return text


def format_fixed(value: float | None, digits: int = 2, *, signed: bool = False) -> str:
    """A mean, a score or a statistic with `digits` decimals ("0.42", "+0.42" when `signed`)."""
    return MISSING if value is None or math.isnan(value) else _fixed(value, digits, signed=signed)


def format_interval(low: float | None, high: float | None, digits: int = 2, *, signed: bool = False) -> str:
    """An interval's bounds, "[0.30, 0.55]"; "–" when either is missing."""
    if low is None or high is None:
        return MISSING
    return f"[{format_fixed(low, digits, signed=signed)}, {format_fixed(high, digits, signed=signed)}]"


def format_estimate(
    value: float | None, low: float | None = None, high: float | None = None, digits: int = 2, *, signed: bool = False
) -> str:
    """An estimate with its interval, "0.42 [0.30, 0.55]"; the estimate alone when it has no interval."""
    shown = format_fixed(value, digits, signed=signed)
    if value is None or low is None or high is None:
        return shown
    return f"{shown} {format_interval(low, high, digits, signed=signed)}"


def format_pct(value: float | None, digits: int = 0, *, signed: bool = False) -> str:
    """A share as a percentage, "62%" ("62.0%" with `digits=1`)."""
    if value is None or math.isnan(value):
        return MISSING
    return _fixed(value * 100, digits, signed=signed) + "%"


def pct_or_none(value: float | None, digits: int = 0) -> str | None:
    """`format_pct` for an HTML cell, which shows None its own way."""
    return None if value is None else format_pct(value, digits)


def format_points(
    value: float | None, low: float | None = None, high: float | None = None, digits: int = 1, *, unit: str = " pp"
) -> str:
    """A difference of two shares in signed percentage points, "+3.2 pp [+1.0, +5.4]"."""
    if value is None or math.isnan(value):
        return MISSING
    text = _fixed(value * 100, digits, signed=True) + unit
    if low is None or high is None:
        return text
    return f"{text} [{_fixed(low * 100, digits, signed=True)}, {_fixed(high * 100, digits, signed=True)}]"


def format_ms(value: float | None, digits: int = 1) -> str:
    """A latency in milliseconds with thousands separated, "1,234.5" (the unit is in the column's name)."""
    return format_fixed(value, digits)


def format_sig(value: float | None, digits: int = 3) -> str:
    """A value of any size to `digits` significant digits ("0.00123", "4.2e+03"), for a statistic whose range
    is unknown (an e-value, a χ², a gate's measurement)."""
    return MISSING if value is None else f"{value:.{digits}g}"


def format_setting(value: float | None) -> str:
    """A configured number as its author wrote it ("0.05", "2", "1e-06"): a setting, not a measurement."""
    return MISSING if value is None else f"{value:g}"


def format_count(value: float | None, *, compact: bool = False) -> str:
    """A count with thousands separated, "12,345"; `compact` shortens one from 10,000 up for a one-line status,
    "12.3k", "4.5M"."""
    if value is None:
        return MISSING
    if compact and value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if compact and value >= 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value:,.0f}"


def format_usd(usd: float | None) -> str:
    """Dollars to the cent, or to a hundredth of a cent below $10 (a sim run costs fractions of one)."""
    if usd is None:
        return "price unknown"
    return f"${usd:,.4f}" if usd < 10 else f"${usd:,.2f}"


RateStyle = Literal["short", "precise", "compact"]


def format_rate(row: Mapping[str, Any] | None, style: RateStyle = "short") -> str:
    """A rate row (`engine.stats._rates.rate(...).as_dict()`) as text; "–" when nothing was counted.

    `short` is "62% [55%, 68%]"; `precise` adds a decimal and n, "62.0% [55.1%–68.4%] n=120"; `compact` is
    for narrow heatmap cells, "62 [55–68]". One function, so every report reads a rate the same way.
    """
    if not row or row.get("rate") is None:
        return MISSING
    rate, low, high = row["rate"], row["low"], row["high"]
    if style == "precise":
        return f"{format_pct(rate, 1)} [{format_pct(low, 1)}–{format_pct(high, 1)}] n={row['n']}"
    if style == "compact":
        return f"{_fixed(rate * 100, 0)} [{_fixed(low * 100, 0)}–{_fixed(high * 100, 0)}]"
    return f"{format_pct(rate)} [{format_pct(low)}, {format_pct(high)}]"


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
