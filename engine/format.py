"""Cell formatters shared by the reports, so a rate or a mean reads the same in every table.

Markdown and console cells show a missing value as "–"; HTML cells pass None on, and the table decides how
to show it. Contrast cells (p values, effects) live with their statistics in `engine.paired`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("format_pct", "format_rate", "nanmean", "pct_or_none")


def nanmean(values: Sequence[float]) -> float | None:
    """Mean of the values that are not NaN (NaN marks a missing score); None when there are none."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def format_pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def pct_or_none(value: float | None) -> str | None:
    return None if value is None else f"{value:.0%}"


def format_rate(row: Mapping[str, Any] | None) -> str:
    """A rate row (`engine.stats.rate(...).as_dict()`) as "rate [low, high]"."""
    if row is None or row.get("rate") is None:
        return "–"
    return f"{row['rate']:.0%} [{row['low']:.0%}, {row['high']:.0%}]"
