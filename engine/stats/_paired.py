"""Paired statistics (architecture §9): Wilcoxon, Friedman, rank-biserial r, its bootstrap CI, p adjustment.

Every level of a cell shares its items, so the question is whether the per-item differences between levels
lean one way. Item difficulty cancels out of those differences, which is why everything here works on pairs
(or complete rows) rather than on independent groups. The test is the Wilcoxon signed-rank test with Pratt's
zero handling; its p comes from the exact sign-flip distribution of the Pratt statistic (the distribution
scipy's permutation machinery enumerates, computed by convolution so it stays exact for any n with ties and
zeros), and the effect size r is computed from the very same ranks, so r and p cannot disagree in direction.
This module also decides which pairs enter, how degenerate samples are reported without scipy warnings, how
seeds are derived so that reruns reproduce every interval. A family of contrasts (p adjustment, table
rows) is engine/stats/_families.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from engine.core._lazy import lazy_module
from engine.core._seeds import derive_seed
from engine.stats._contrast import ContrastRow, Status

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from scipy import stats

    FloatArray = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = (
    "MEANINGFUL_R",
    "MIN_PAIRS",
    "N_BOOT",
    "Omnibus",
    "bootstrap_r_interval",
    "difference_contrast",
    "friedman_then_pairwise",
    "hodges_lehmann",
    "paired_contrast",
    "r_interval",
    "rank_biserial",
    "signed_rank_p",
)

MIN_PAIRS = 15
"""Fewer pairs than this are reported as insufficient and not tested, as in EduFair-Bench."""
MEANINGFUL_R = 0.10
"""|r| at or above this is practically meaningful (Funder and Ozer, 2019, as used by the paper)."""
N_BOOT = 10_000
"""Bootstrap resamples for the CI of r. At the paper's B = 1,000 an endpoint's Monte-Carlo SD was 0.02–0.08 on
this project's data: enough to move a reported interval across 0."""
_CONFIDENCE = 0.95
_DECIMALS = 12
"""Differences are rounded to this many decimals so float noise (0.1 + 0.2 − 0.3) is neither a signed
difference nor a broken tie; per-dialogue rates and counts never differ meaningfully below 1e-12."""


class Omnibus(BaseModel):
    """More than two levels: Friedman first, then (p < 0.10) pairwise Wilcoxon with Bonferroni.

    Attributes:
        levels: Level names in the caller's order; pairwise contrasts follow it.
        n: Complete items (no NaN in any level) entering both Friedman and the pairwise contrasts.
        status: "insufficient" when n < the minimum pairs; then nothing is tested.
        statistic: Friedman chi-square.
        p: Friedman p; 1.0 when every item scores the same at every level.
        pairwise: Every pair (i < j in level order, a = levels[i]) when p < alpha, else empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    levels: tuple[str, ...]
    n: int
    status: Status
    statistic: float | None
    p: float | None
    pairwise: tuple[ContrastRow, ...]


def _pratt_sums(d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """R+ and R− along the last axis: average ranks of |d| over all pairs, zeros included (Pratt)."""
    ranks = stats.rankdata(np.abs(d), axis=-1)
    return np.sum(np.where(d > 0, ranks, 0.0), axis=-1), np.sum(np.where(d < 0, ranks, 0.0), axis=-1)


def _pratt_r(d: FloatArray) -> FloatArray:
    """Rank-biserial r along the last axis; 0 where every difference is 0. Shared by r and its bootstrap."""
    positive, negative = _pratt_sums(d)
    total = positive + negative
    return np.where(total > 0, (positive - negative) / np.where(total > 0, total, 1.0), 0.0)


def rank_biserial(d: Sequence[float]) -> float | None:
    """Matched-pairs rank-biserial correlation of differences, on the Wilcoxon-Pratt test's own ranks.

    r = (R+ − R−)/(R+ + R−), where |d| is ranked over *all* pairs, zeros included, with average ranks for ties,
    and R± sum those ranks over the positive and negative differences (the zeros' ranks drop out of both).
    Ranking after dropping the zeros instead gives a different r (up to 0.25 apart on tied rates) that can
    contradict the test. A sample of only zeros is no effect, r = 0.

    Args:
        d: Paired differences a − b, finite.

    Returns:
        r in [−1, 1], or None for an empty sample (nothing to estimate).

    Raises:
        ValueError: If a difference is NaN or infinite; drop incomplete pairs first.
    """
    values = np.asarray(d, dtype=np.float64)
    if values.size == 0:
        return None
    if not np.all(np.isfinite(values)):
        raise ValueError("rank_biserial needs finite differences; drop pairs with a missing score first")
    return float(_pratt_r(values))


def _bootstrap_statistic(sample: FloatArray, axis: int = -1) -> FloatArray:
    """r for a whole batch of resamples at once (scipy's vectorized bootstrap calls it once per batch)."""
    return _pratt_r(np.moveaxis(np.asarray(sample, dtype=np.float64), axis, -1))


EXACT_MAX_PAIRS = 1000
"""Up to this many pairs the p is exact; beyond, scipy's normal approximation (tie- and Pratt-corrected) is
indistinguishable from it and the convolution would grow as n³."""


def _sign_flip_distribution(doubled: npt.NDArray[np.int64]) -> FloatArray:
    """P(2·R+ = t) for t = 0 … Σ doubled when each doubled rank joins R+ with probability ½, independently."""
    distribution = np.zeros(int(doubled.sum()) + 1)
    distribution[0] = 1.0
    reach = 0
    for step in doubled:
        distribution[step : reach + step + 1] += distribution[: reach + 1]
        distribution[: reach + step + 1] *= 0.5
        reach += int(step)
    return distribution


def signed_rank_p(d: Sequence[float] | FloatArray) -> float:
    """Two-sided Wilcoxon signed-rank p with Pratt zeros, from the exact sign-flip distribution.

    Under the null every non-zero difference is equally likely positive or negative, with its Pratt rank fixed;
    the p is 2·min(P(R+ ≤ observed), P(R+ ≥ observed)), capped at 1 — what
    `scipy.stats.wilcoxon(d, zero_method="pratt", method=PermutationMethod(n_resamples=2**n))` enumerates.
    Average ranks are multiples of ½, so the distribution of 2·R+ lives on the integers and is built by one
    convolution per pair: exact for any n, with ties and zeros, in milliseconds (scipy's enumeration takes
    minutes at n = 20). The normal approximation, which scipy uses with ties or zeros above 13 pairs, was off
    by up to 0.145 at n ≤ 20 on this project's data.

    Args:
        d: Paired differences, finite (round float noise away first).

    Returns:
        The p-value; 1.0 when every difference is 0 or there are none.
    """
    values = np.asarray(d, dtype=np.float64)
    nonzero = values != 0
    if not np.any(nonzero):
        return 1.0
    if values.size > EXACT_MAX_PAIRS:
        return float(stats.wilcoxon(values, zero_method="pratt", method="asymptotic").pvalue)
    doubled = np.rint(2 * stats.rankdata(np.abs(values))[nonzero]).astype(np.int64)
    distribution = _sign_flip_distribution(doubled)
    observed = int(doubled[values[nonzero] > 0].sum())
    lower = float(distribution[: observed + 1].sum())
    upper = float(distribution[observed:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def bootstrap_r_interval(
    d: Sequence[float] | FloatArray, *, seed: int, confidence: float = 0.95, n_boot: int = N_BOOT
) -> tuple[float, float]:
    """Percentile bootstrap interval of r over pairs (resampled with replacement), vectorised.

    Args:
        d: Paired differences, finite, at least one.
        seed: Seeds the resampling, so reruns reproduce the interval.
        confidence: Two-sided level, e.g. 1 − α/m for an interval at a Bonferroni level.
        n_boot: Resamples; an interval at level L rests on about n_boot·(1 − L)/2 resamples per tail.

    Returns:
        (low, high); the point itself when every difference is equal (every resample is the sample).
    """
    values = np.asarray(d, dtype=np.float64)
    if np.all(values == values[0]):
        r = float(_pratt_r(values))
        return r, r
    interval = _r_bootstrap(values, "percentile", seed=seed, confidence=confidence, n_boot=n_boot)
    return float(interval.low), float(interval.high)


def _r_bootstrap(values: FloatArray, method: str, *, seed: int, confidence: float, n_boot: int) -> Any:
    """scipy's bootstrap interval of r over pairs by `method` (percentile, or BCa where percentile collapses)."""
    return stats.bootstrap(
        (values,),
        _bootstrap_statistic,
        n_resamples=n_boot,
        method=method,
        confidence_level=confidence,
        vectorized=True,
        rng=np.random.default_rng(seed),
    ).confidence_interval


def hodges_lehmann(d: Sequence[float] | FloatArray) -> float | None:
    """The Hodges–Lehmann location of paired differences: the median of the Walsh averages (d_i + d_j)/2, i ≤ j.

    It is the estimator that inverts the signed-rank test, so its sign follows the test's ranks where a mean can
    be pulled the other way by one large difference; None for an empty sample.
    """
    values = np.asarray(d, dtype=np.float64)
    if values.size == 0:
        return None
    i, j = np.triu_indices(values.size)
    return float(np.median((values[i] + values[j]) / 2))


@dataclass(frozen=True)
class RInterval:
    """An interval of r with how it was made (see `ContrastRow.ci_method`) and whether to distrust it."""

    low: float
    high: float
    method: str
    degenerate: bool


def _sign_interval(values: FloatArray, confidence: float) -> tuple[float, float]:
    """Clopper–Pearson on the share of positive signs among the differing pairs, mapped to r's scale (2π − 1)."""
    nonzero = values[values != 0]
    found = stats.binomtest(int(np.sum(nonzero > 0)), int(nonzero.size)).proportion_ci(
        confidence_level=confidence, method="exact"
    )
    return 2 * float(found.low) - 1, 2 * float(found.high) - 1


def r_interval(
    d: Sequence[float] | FloatArray, *, seed: int, confidence: float = 0.95, n_boot: int = N_BOOT
) -> RInterval:
    """The interval of r over pairs, with a method that does not collapse.

    The percentile bootstrap first. It collapses to a point when every differing pair leans one way (each
    resample then gives r = ±1: `−1.00 [−1.00, −1.00]` with 14 of 20 pairs differing, issue 24); then scipy's
    BCa, and where resamples cannot vary at all, the exact Clopper–Pearson interval of the share of positive
    signs among the differing pairs, on r's scale. Every pair tied: r = 0 with no interval to speak of, marked.
    """
    values = np.asarray(d, dtype=np.float64)
    differing = int(np.sum(values != 0))
    mostly_ties = differing < values.size / 2
    if differing == 0:
        return RInterval(0.0, 0.0, "ties", True)
    nonzero = values[values != 0]
    if np.all(nonzero > 0) or np.all(nonzero < 0):
        low, high = _sign_interval(values, confidence)
        return RInterval(low, high, "exact_sign", True)
    low, high = bootstrap_r_interval(values, seed=seed, confidence=confidence, n_boot=n_boot)
    if high > low:
        return RInterval(low, high, "percentile", mostly_ties)
    bca = _r_bootstrap(values, "BCa", seed=seed, confidence=confidence, n_boot=n_boot)
    if np.isfinite(bca.low) and np.isfinite(bca.high) and bca.high > bca.low:
        return RInterval(float(bca.low), float(bca.high), "bca", True)
    low, high = _sign_interval(values, confidence)
    return RInterval(low, high, "exact_sign", True)


def difference_contrast(
    d: Sequence[float] | FloatArray,
    *,
    a_name: str,
    b_name: str,
    seed: int,
    n_boot: int = N_BOOT,
    min_pairs: int = MIN_PAIRS,
    confidence: float = _CONFIDENCE,
) -> ContrastRow:
    """A contrast from its per-item differences a − b: the single place that decides status, p, r and CI.

    Callers that build differences themselves (a 2×2 design's main effects, an interaction) use this; NaN
    differences are missing pairs and are dropped. `n_boot = 0` skips the interval (ci_low = ci_high = None),
    for callers that decide on p alone and need speed, such as power simulations. `confidence` sets the
    interval's level (a report over a family gives its findings' intervals at the corrected level).
    The row's `finding` is its own reading (the interval excludes 0) until a family correction decides it.

    Raises:
        ValueError: If a difference is infinite.
    """
    values = np.asarray(d, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not np.all(np.isfinite(values)):
        raise ValueError(f"scores for {a_name} vs {b_name} must be finite numbers or NaN (missing), not infinite")
    values = np.round(values, _DECIMALS) + 0.0  # + 0.0 turns −0.0 into 0.0
    n = int(values.size)
    if n == 0 or n < min_pairs:
        return ContrastRow(test="wilcoxon", a=a_name, b=b_name, n=n, status="insufficient")
    r = float(_pratt_r(values))
    p = signed_rank_p(values)
    ci_low: float | None = None
    ci_high: float | None = None
    interval: RInterval | None = None
    if n_boot > 0:
        interval = r_interval(values, seed=seed, confidence=confidence, n_boot=n_boot)
        ci_low, ci_high = interval.low, interval.high
    mean = float(np.mean(values))
    return ContrastRow(
        test="wilcoxon",
        a=a_name,
        b=b_name,
        n=n,
        status="ok",
        r=r,
        ci_low=ci_low,
        ci_high=ci_high,
        ci_level=None if interval is None else confidence,
        p=p,
        mean_diff=mean,
        meaningful=abs(r) >= MEANINGFUL_R,
        finding=ci_low is not None and ci_high is not None and (ci_low > 0 or ci_high < 0),
        estimate=hodges_lehmann(values),
        differing=int(np.sum(values != 0)),
        ci_method=None if interval is None else interval.method,
        degenerate=interval is not None and interval.degenerate,
        direction_disagrees=mean * r < 0,
    )


def paired_contrast(
    a: Sequence[float],
    b: Sequence[float],
    *,
    a_name: str,
    b_name: str,
    seed: int,
    n_boot: int = N_BOOT,
    min_pairs: int = MIN_PAIRS,
) -> ContrastRow:
    """Two levels of one cell compared item by item.

    Args:
        a: Scores at level `a_name`; a[i] and b[i] belong to the same item.
        b: Scores at level `b_name`.
        a_name: Level name reported as the minuend.
        b_name: Level name reported as the subtrahend.
        seed: Seeds the bootstrap, so the CI (and so the row's own finding) is reproducible.
        n_boot: Bootstrap resamples.
        min_pairs: Below this many complete pairs the contrast is "insufficient": no r, p or CI.

    Returns:
        The contrast; differences below 1e-12 are treated as 0 (float noise, not a gap).

    Raises:
        ValueError: If `a` and `b` differ in length (they would not be paired by item) or hold an infinity.
    """
    left = np.asarray(a, dtype=np.float64)
    right = np.asarray(b, dtype=np.float64)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"paired scores must be two equal-length lists, got {left.shape} and {right.shape}")
    keep = ~(np.isnan(left) | np.isnan(right))
    return difference_contrast(
        left[keep] - right[keep], a_name=a_name, b_name=b_name, seed=seed, n_boot=n_boot, min_pairs=min_pairs
    )


def _complete_items(columns: Mapping[str, Sequence[float]], levels: tuple[str, ...]) -> FloatArray:
    """Items × levels, keeping only the items scored at every level (so every test sees the same items)."""
    if len(levels) < 3:
        raise ValueError(f"Friedman needs at least three levels, got {list(levels)}; use paired_contrast for two")
    lengths = {len(columns[level]) for level in levels}
    if len(lengths) != 1:
        raise ValueError(f"every level needs one score per item; lengths differ: {sorted(lengths)}")
    table = np.column_stack([np.asarray(columns[level], dtype=np.float64) for level in levels])
    table = table[~np.isnan(table).any(axis=1)]
    if not np.all(np.isfinite(table)):
        raise ValueError("scores must be finite numbers or NaN (missing), not infinite")
    return table


def _friedman(table: FloatArray) -> tuple[float, float]:
    """Friedman's χ² and p over complete items."""
    if np.all(table == table[:, :1]):
        # Every item ties across all levels: scipy would divide by a zero tie correction.
        return 0.0, 1.0
    result = stats.friedmanchisquare(*(table[:, j] for j in range(table.shape[1])))
    return float(result.statistic), float(result.pvalue)


def friedman_then_pairwise(
    columns: Mapping[str, Sequence[float]],
    *,
    seed: int,
    alpha: float = 0.10,
    n_boot: int = N_BOOT,
    min_pairs: int = MIN_PAIRS,
    always_pairs: bool = False,
) -> Omnibus:
    """A dimension with three or more levels (SES): Friedman, then Bonferroni pairwise Wilcoxon if p < alpha.

    The omnibus gate keeps a three-level dimension from getting three uncorrected chances at a violation.
    Items with a NaN at any level are dropped, so Friedman and every pairwise contrast see the same items.
    A pairwise contrast's `p_within` is min(1, p × number of pairs), but its `finding` still comes from
    its own (unadjusted) 95% bootstrap CI, as in the paper: the gate is the Friedman p, not a widened CI.

    Args:
        columns: Level name → scores, each indexed by item in the same order; insertion order is level order.
        seed: Family seed; each pairwise contrast derives its own bootstrap seed from it and the level names.
        alpha: Friedman p below which the pairwise contrasts are run.
        n_boot: Bootstrap resamples per pairwise contrast.
        min_pairs: Below this many complete items the family is "insufficient" and not tested.
        always_pairs: Compute the pairwise contrasts whatever the Friedman p (as descriptions: a caller that
            reports them must still honour the gate before calling any a finding).

    Returns:
        The omnibus result with its pairwise contrasts (empty unless p < alpha or `always_pairs`).

    Raises:
        ValueError: With fewer than three levels (use paired_contrast), columns of unequal length, or an infinity.
    """
    levels = tuple(columns)
    table = _complete_items(columns, levels)
    n = int(table.shape[0])
    if n == 0 or n < min_pairs:
        return Omnibus(levels=levels, n=n, status="insufficient", statistic=None, p=None, pairwise=())
    statistic, p = _friedman(table)
    if not p < alpha and not always_pairs:
        return Omnibus(levels=levels, n=n, status="ok", statistic=statistic, p=p, pairwise=())
    pairs = list(itertools.combinations(range(len(levels)), 2))
    pairwise: list[ContrastRow] = []
    for i, j in pairs:
        contrast = difference_contrast(
            table[:, i] - table[:, j],
            a_name=levels[i],
            b_name=levels[j],
            seed=derive_seed(seed, levels[i], levels[j]),
            n_boot=n_boot,
            min_pairs=min_pairs,
        )
        within = None if contrast.p is None else min(1.0, contrast.p * len(pairs))
        pairwise.append(contrast.model_copy(update={"test": "wilcoxon (Bonferroni)", "p_within": within}))
    return Omnibus(levels=levels, n=n, status="ok", statistic=statistic, p=p, pairwise=tuple(pairwise))
