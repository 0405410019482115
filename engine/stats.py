"""Generic statistics for summaries, on scipy: rates with Wilson or cluster-bootstrap intervals, survival of censored
times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ("ClusteredRate", "Rate", "SurvivalRow", "clustered_rate", "rate", "survival_table")


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
class ClusteredRate:
    """A pooled rate over clusters (replies per dialogue, replicates per case) with a cluster-bootstrap interval."""

    k: int
    n: int
    clusters: int
    rate: float | None
    low: float | None
    high: float | None
    method: str
    """`cluster_bootstrap`, or `wilson_on_clusters` where every resample gives the same rate (e.g. no events)."""

    def as_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def clustered_rate(
    events: Sequence[int],
    trials: Sequence[int],
    *,
    seed: int,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
) -> ClusteredRate:
    """sum(events) / sum(trials), with a percentile interval from resampling whole clusters.

    Replies of one dialogue share the dialogue's history, so they are not independent trials: a Wilson
    interval over replies is too narrow. Resampling clusters keeps their correlation. Where every resample
    gives one value (all clusters at 0% or 100%), the interval would have zero width; the Wilson interval
    with clusters as trials is used instead, the conservative reading of the same data.
    """
    k_arr = np.asarray(events, dtype=float)
    n_arr = np.asarray(trials, dtype=float)
    if k_arr.shape != n_arr.shape:
        raise ValueError("events and trials need one entry per cluster")
    keep = n_arr > 0
    k_arr, n_arr = k_arr[keep], n_arr[keep]
    k, n, clusters = int(k_arr.sum()), int(n_arr.sum()), int(keep.sum())
    if n == 0:
        return ClusteredRate(k, n, clusters, None, None, None, "cluster_bootstrap")
    pooled = k / n
    if clusters < 2 or np.all(k_arr / n_arr == k_arr[0] / n_arr[0]):
        fallback = rate(round(pooled * clusters), clusters, confidence=confidence)
        return ClusteredRate(k, n, clusters, pooled, fallback.low, fallback.high, "wilson_on_clusters")
    result = stats.bootstrap(
        (k_arr, n_arr),
        _pooled_rate,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return ClusteredRate(k, n, clusters, pooled, float(interval.low), float(interval.high), "cluster_bootstrap")


def _pooled_rate(k: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
    total = n.sum(axis=axis)
    return np.asarray(np.divide(k.sum(axis=axis), total, out=np.zeros_like(total), where=total > 0))


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
