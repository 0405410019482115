"""Generic statistics for summaries, on scipy: rates with Wilson or cluster-bootstrap intervals, survival of censored
times."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from engine.core._lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")


__all__ = (
    "RESULT_CONFIG",
    "ClusteredRate",
    "DeltaInterval",
    "DiscreteHazard",
    "HazardStep",
    "Rate",
    "RateDifference",
    "SurvivalRow",
    "clustered_difference",
    "clustered_rate",
    "discrete_hazard",
    "rate",
    "survival_table",
)


RESULT_CONFIG = ConfigDict(extra="forbid", frozen=True)
"""A result read back from disk must have exactly the keys its model writes."""


class Rate(BaseModel):
    """A proportion with its 95% Wilson score interval (None when there is nothing to count)."""

    model_config = RESULT_CONFIG
    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None


def rate(k: int, n: int, *, confidence: float = 0.95) -> Rate:
    if n == 0:
        return Rate(k=k, n=n, rate=None, low=None, high=None)
    interval = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Rate(k=k, n=n, rate=k / n, low=float(interval.low), high=float(interval.high))


class ClusteredRate(BaseModel):
    """A pooled rate over clusters (replies per dialogue, replicates per case) with a cluster-bootstrap interval."""

    model_config = RESULT_CONFIG
    k: int
    n: int
    clusters: int
    rate: float | None
    low: float | None
    high: float | None
    method: str
    """`cluster_bootstrap`, or `wilson_on_clusters` where every resample gives the same rate (e.g. no events)."""


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
        return _clustered(k, n, clusters, None, None, None, "cluster_bootstrap")
    pooled = k / n
    if clusters < 2 or np.all(k_arr / n_arr == k_arr[0] / n_arr[0]):
        fallback = rate(round(pooled * clusters), clusters, confidence=confidence)
        return _clustered(k, n, clusters, pooled, fallback.low, fallback.high, "wilson_on_clusters")
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
    return _clustered(k, n, clusters, pooled, float(interval.low), float(interval.high), "cluster_bootstrap")


def _clustered(
    k: int, n: int, clusters: int, pooled: float | None, low: float | None, high: float | None, method: str
) -> ClusteredRate:
    return ClusteredRate(k=k, n=n, clusters=clusters, rate=pooled, low=low, high=high, method=method)


def _pooled_rate(k: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
    total = n.sum(axis=axis)
    return np.asarray(np.divide(k.sum(axis=axis), total, out=np.zeros_like(total), where=total > 0))


class RateDifference(BaseModel):
    """`b − a` of two pooled rates over clusters, with a cluster-bootstrap interval.

    `method` is `cluster_bootstrap` (clusters resampled: independently per group, or jointly when `paired`),
    or `newcombe_on_clusters` where resampling cannot vary (a group with < 2 clusters, or every cluster of both
    groups at one rate): Newcombe's hybrid score interval from the two groups' Wilson-on-clusters intervals.
    """

    model_config = RESULT_CONFIG
    a: ClusteredRate
    b: ClusteredRate
    delta: float | None
    low: float | None
    high: float | None
    method: str
    paired: bool


def _varies(k: np.ndarray, n: np.ndarray) -> bool:
    return bool(len(k) >= 2 and not np.all(k / n == k[0] / n[0]))


def clustered_difference(
    a_events: Sequence[int],
    a_trials: Sequence[int],
    b_events: Sequence[int],
    b_trials: Sequence[int],
    *,
    seed: int,
    paired: bool = False,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
) -> RateDifference:
    """Pooled rate of `b` minus pooled rate of `a`, each sum(events) / sum(trials) over its clusters.

    Unpaired (two sets of dialogues, e.g. single- vs multi-turn): each group's clusters are resampled on their
    own. Paired (`a_*[i]` and `b_*[i]` come from one cluster, e.g. a dialogue's first exchange and its later
    ones): clusters are resampled once and both rates recomputed on the same resample, which keeps their
    correlation. A paired cluster with no trials on one side still counts on the other.
    """
    arrays = [np.asarray(x, dtype=float) for x in (a_events, a_trials, b_events, b_trials)]
    if arrays[0].shape != arrays[1].shape or arrays[2].shape != arrays[3].shape:
        raise ValueError("events and trials need one entry per cluster")
    if paired and arrays[0].shape != arrays[2].shape:
        raise ValueError("paired groups need the same clusters")
    sub_seed = np.random.default_rng(seed).integers(2**32, size=2)
    a = clustered_rate(a_events, a_trials, seed=int(sub_seed[0]), confidence=confidence, n_resamples=n_resamples)
    b = clustered_rate(b_events, b_trials, seed=int(sub_seed[1]), confidence=confidence, n_resamples=n_resamples)
    if a.rate is None or b.rate is None:
        return RateDifference(a=a, b=b, delta=None, low=None, high=None, method="cluster_bootstrap", paired=paired)
    delta = b.rate - a.rate
    ka, na, kb, nb = arrays
    keep_a, keep_b = na > 0, nb > 0
    if paired:
        keep = keep_a | keep_b
        ka, na, kb, nb = ka[keep], na[keep], kb[keep], nb[keep]
        can_vary = len(ka) >= 2 and (_varies(ka[na > 0], na[na > 0]) or _varies(kb[nb > 0], nb[nb > 0]))
    else:
        ka, na, kb, nb = ka[keep_a], na[keep_a], kb[keep_b], nb[keep_b]
        can_vary = len(ka) >= 2 and len(kb) >= 2 and (_varies(ka, na) or _varies(kb, nb))
    if not can_vary:
        low, high = _newcombe(a, b)
        return RateDifference(a=a, b=b, delta=delta, low=low, high=high, method="newcombe_on_clusters", paired=paired)
    low, high = _bootstrap_difference((ka, na, kb, nb), paired=paired, seed=seed, confidence=confidence, n=n_resamples)
    return RateDifference(a=a, b=b, delta=delta, low=low, high=high, method="cluster_bootstrap", paired=paired)


def _bootstrap_difference(
    counts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], *, paired: bool, seed: int, confidence: float, n: int
) -> tuple[float, float]:
    """The percentile interval of rate b − rate a, resampling clusters (once for both sides when paired)."""
    ka, na, kb, nb = counts
    rng = np.random.default_rng(seed)
    if paired:

        def paired_delta(
            ka_: np.ndarray, na_: np.ndarray, kb_: np.ndarray, nb_: np.ndarray, axis: int = -1
        ) -> np.ndarray:
            return np.asarray(_pooled_rate(kb_, nb_, axis) - _pooled_rate(ka_, na_, axis))

        result = stats.bootstrap(
            (ka, na, kb, nb),
            paired_delta,
            paired=True,
            vectorized=True,
            n_resamples=n,
            confidence_level=confidence,
            method="percentile",
            random_state=rng,
        )
    else:

        def unpaired_delta(ia: np.ndarray, ib: np.ndarray, axis: int = -1) -> np.ndarray:
            ia_, ib_ = ia.astype(int), ib.astype(int)
            return np.asarray(_pooled_rate(kb[ib_], nb[ib_], axis) - _pooled_rate(ka[ia_], na[ia_], axis))

        result = stats.bootstrap(
            (np.arange(len(ka), dtype=float), np.arange(len(kb), dtype=float)),
            unpaired_delta,
            vectorized=True,
            n_resamples=n,
            confidence_level=confidence,
            method="percentile",
            random_state=rng,
        )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def _newcombe(a: ClusteredRate, b: ClusteredRate) -> tuple[float, float]:
    """Newcombe (1998, method 10): the difference's interval from each rate's own interval."""
    assert a.rate is not None and a.low is not None and a.high is not None
    assert b.rate is not None and b.low is not None and b.high is not None
    delta = b.rate - a.rate
    low = delta - float(np.hypot(b.rate - b.low, a.high - a.rate))
    high = delta + float(np.hypot(b.high - b.rate, a.rate - a.low))
    return max(-1.0, low), min(1.0, high)


class SurvivalRow(BaseModel):
    """One time of a Kaplan–Meier table: those at risk, the events, and the share still without one."""

    model_config = RESULT_CONFIG
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
        rows.append(SurvivalRow(turn=turn, at_risk=at_risk, events=events, surviving=float(estimate.evaluate(turn))))
    return rows


class HazardStep(BaseModel):
    """One time of a discrete hazard: first events among those still at risk, with a Wilson interval."""

    model_config = RESULT_CONFIG
    turn: int
    at_risk: int
    events: int
    hazard: float | None
    low: float | None
    high: float | None


class DeltaInterval(BaseModel):
    """A difference of two rates with its interval and the method that gave it (a `RateDifference` without its
    two rates)."""

    model_config = RESULT_CONFIG
    delta: float | None
    low: float | None
    high: float | None
    method: str


class DiscreteHazard(BaseModel):
    model_config = RESULT_CONFIG
    per_turn: list[HazardStep]
    first: ClusteredRate
    later: ClusteredRate
    later_minus_first: DeltaInterval


def discrete_hazard(
    times: Sequence[int], observed: Sequence[bool], *, seed: int, confidence: float = 0.95, n_resamples: int = 10_000
) -> DiscreteHazard:
    """Discrete-time hazard of the event: at each time, and at time 1 against every later time.

    `h_t = events at t / at risk at t` (the survival table's counts, so `1 − h_t` are its factors), for every
    time from 1 to the last, with a Wilson interval (a subject is at risk at most once per time). The
    pooled later hazard is `Σ_{t>1} events / Σ_{t>1} at risk`; each subject (a dialogue) is a cluster
    contributing its exposures after time 1, so its interval and that of `later − first` (paired: the same
    subjects) come from the cluster bootstrap. A flat hazard puts 0 inside the difference's interval;
    escalation puts the interval above 0.
    """
    t = np.asarray(times, dtype=int)
    seen = np.asarray(observed, dtype=bool)
    if t.shape != seen.shape:
        raise ValueError("times and observed need one entry per subject")
    keep = t > 0
    t, seen = t[keep], seen[keep]
    per_time = []
    for turn in range(1, int(t.max(initial=0)) + 1):
        at_risk, events = int(np.sum(t >= turn)), int(np.sum((t == turn) & seen))
        found = rate(events, at_risk, confidence=confidence)
        per_time.append(
            HazardStep(turn=turn, at_risk=at_risk, events=events, hazard=found.rate, low=found.low, high=found.high)
        )
    first_events = ((t == 1) & seen).astype(int).tolist()
    first_trials = [1] * len(t)
    later_events = ((t > 1) & seen).astype(int).tolist()
    later_trials = np.maximum(t - 1, 0).tolist()
    difference = clustered_difference(
        first_events,
        first_trials,
        later_events,
        later_trials,
        seed=seed,
        paired=True,
        confidence=confidence,
        n_resamples=n_resamples,
    )
    return DiscreteHazard(
        per_turn=per_time,
        first=difference.a,
        later=difference.b,
        later_minus_first=DeltaInterval(
            delta=difference.delta, low=difference.low, high=difference.high, method=difference.method
        ),
    )
