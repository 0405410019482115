"""Generic statistics for summaries, on scipy: rates with Wilson intervals, survival of censored times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ("Rate", "SurvivalRow", "rate", "survival_table")


@dataclass(frozen=True)
class Rate:
    """A proportion with its 95% Wilson score interval (None when there is nothing to count)."""

    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def rate(k: int, n: int, *, confidence: float = 0.95) -> Rate:
    if n == 0:
        return Rate(k, n, None, None, None)
    interval = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Rate(k, n, k / n, float(interval.low), float(interval.high))


@dataclass(frozen=True)
class SurvivalRow:
    turn: int
    at_risk: int
    events: int
    surviving: float
    """Kaplan–Meier estimate of the share still without the event after this turn."""


def survival_table(times: Sequence[int], observed: Sequence[bool]) -> list[SurvivalRow]:
    """Kaplan–Meier table of discrete times; `observed[i]` False means censored (the event never came)."""
    if not times:
        return []
    t = np.asarray(times, dtype=float)
    seen = np.asarray(observed, dtype=bool)
    estimate = stats.ecdf(stats.CensoredData(uncensored=t[seen], right=t[~seen])).sf
    rows: list[SurvivalRow] = []
    for turn in sorted({int(x) for x in t}):
        at_risk = int(np.sum(t >= turn))
        events = int(np.sum((t == turn) & seen))
        rows.append(SurvivalRow(turn, at_risk, events, float(estimate.evaluate(turn))))
    return rows
