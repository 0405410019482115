"""Several tutors on the same units (item, condition, replicate): which differ, on what, and how they rank.

Every tutor of a study meets the same units, so the comparison is paired by design and item difficulty cancels
out. Per metric: an omnibus test over the tutors on the complete units (Friedman for scores; for a binary metric
the same statistic is Cochran's Q, which is Friedman's χ² with its tie correction on 0/1 data), then every pair's
paired contrast (`difference_contrast`: Wilcoxon p, rank-biserial r with its bootstrap interval, the mean
difference). One declared family: Benjamini–Hochberg over every pair × metric (`correct_family`), a pair being a
finding only when its metric's omnibus (BH over the metrics) passes as well. The ranking rests on a bootstrap
over items: each tutor's rank interval, and tutors whose intervals overlap are tied.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from engine.core._lazy import lazy_module
from engine.core._seeds import derive_seed
from engine.stats._contrast import ContrastRow
from engine.stats._families import adjust_p, correct_family
from engine.stats._paired import MIN_PAIRS, difference_contrast

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from scipy import stats

    FloatArray = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = (
    "FAMILY_METHOD",
    "FAMILY_Q",
    "CellCount",
    "FamilyCount",
    "Headline",
    "LeaderboardRow",
    "ModelScores",
    "OmnibusRow",
    "RankCorrelation",
    "TutorAssociation",
    "TutorComparison",
    "TutorPair",
    "association_across_tutors",
    "compare_models",
    "omnibus_test",
    "rank_intervals",
    "spearman_across_models",
)

FAMILY_METHOD = "bh"
FAMILY_Q = 0.05
"""A pair × metric is a finding when its BH-adjusted p over the whole family is at most this, and its metric's
omnibus (BH over the metrics) is too."""
N_BOOT_RANKS = 2000


class TutorPair(ContrastRow):
    """Two tutors compared on one metric over their shared units, with the mean difference's interval."""

    metric: str
    mean_low: float | None = None
    mean_high: float | None = None


class LeaderboardRow(BaseModel):
    """One tutor's place on the headline metric: its mean over the complete units and its bootstrap rank interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    rank_low: int
    rank_high: int
    tied_with: list[str]
    """The tutors whose rank intervals overlap this one's."""


class OmnibusRow(BaseModel):
    """Whether the tutors differ at all on one metric (Friedman, or Cochran's Q on 0/1 data), over complete units.

    `p_family` (BH over the metrics) and `passes` are the gate's: a metric that does not pass admits no finding
    among its pairs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str
    n: int
    binary: bool
    test: str | None
    statistic: float | None
    p: float | None
    status: str
    p_family: float | None = None
    passes: bool = False


class CellCount(BaseModel):
    """Two tutors over the table's cells: in how many B is worse than A on the headline, and the sign test's p."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    a: str
    b: str
    cells: int
    b_worse: int
    b_better: int
    p: float | None


class RankCorrelation(BaseModel):
    """Spearman's ρ across a few models, with the exact permutation p and the smallest p so few models can give."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rho: float
    p: float
    low: float | None
    high: float | None
    models: int
    min_p: float
    readable: bool


class TutorAssociation(BaseModel):
    """Spearman's ρ across tutors between two per-tutor means, its bootstrap interval over items and exact p."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rho: float
    low: float | None
    high: float | None
    tutors: int
    units: int
    p: float | None = None
    min_p: float | None = None
    readable: bool = False
    """Summaries written before the exact p have none of these three."""


@dataclass(frozen=True)
class Headline:
    """The metric a leaderboard ranks by, and which way is better."""

    metric: str
    lower_is_better: bool


@dataclass(frozen=True)
class ModelScores:
    """Per tutor, per unit (any hashable key of item, condition and replicate), that unit's metric values.

    `item_of` and `cell_of` map a unit to its item (the bootstrap's cluster) and to its table cell (e.g. the
    subject and condition), for the ranking and the cell-by-cell comparison."""

    labels: tuple[str, ...]
    scores: Mapping[str, Mapping[Any, Mapping[str, float]]]
    item_of: Mapping[Any, str]
    cell_of: Mapping[Any, str]
    reply_words: Mapping[str, Mapping[Any, float]] = field(default_factory=dict)
    """Per tutor and unit, the mean length of its replies in words (TutorCaseBench's text statistic)."""

    @property
    def metrics(self) -> list[str]:
        return sorted({m for label in self.labels for values in self.scores[label].values() for m in values})


class FamilyCount(BaseModel):
    """The declared family of pair × metric tests: its correction, level, how many were tested and found."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str
    q: float
    size: int
    findings: int


class TutorComparison(BaseModel):
    """The cross-tutor comparison: balance, leaderboard, omnibus and pairs per metric, cells, length vs headline."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    labels: list[str]
    headline: Headline
    units: dict[str, int]
    complete_units: int
    leaderboard: list[LeaderboardRow]
    omnibus: list[OmnibusRow]
    pairs: list[TutorPair]
    family: FamilyCount
    cells: list[CellCount]
    length_vs_headline: TutorAssociation | None

    def as_json(self) -> dict[str, Any]:
        """summary.json's `comparison`, key for key as it has always been written (pairs in JSON mode)."""
        return {
            "labels": list(self.labels),
            "headline": {"metric": self.headline.metric, "lower_is_better": self.headline.lower_is_better},
            "units": dict(self.units),
            "complete_units": self.complete_units,
            "leaderboard": [row.model_dump() for row in self.leaderboard],
            "omnibus": [row.model_dump() for row in self.omnibus],
            "pairs": [pair.model_dump(mode="json") for pair in self.pairs],
            "family": self.family.model_dump(),
            "cells": [row.model_dump() for row in self.cells],
            "length_vs_headline": self.length_vs_headline.model_dump() if self.length_vs_headline else None,
        }


def _complete(data: ModelScores) -> list[Any]:
    """The units every tutor has a record of, in a stable order."""
    common = set.intersection(*(set(data.scores[label]) for label in data.labels)) if data.labels else set()
    return sorted(common, key=repr)


def _table(data: ModelScores, units: Sequence[Any], metric: str) -> FloatArray:
    """Units × tutors; rows with a NaN anywhere dropped (every test sees the same units)."""
    table = np.array(
        [[data.scores[label][unit].get(metric, math.nan) for label in data.labels] for unit in units],
        dtype=np.float64,
    ).reshape(len(units), len(data.labels))
    return table


def _is_binary(table: FloatArray) -> bool:
    return bool(np.all((table == 0) | (table == 1)))


def omnibus_test(table: FloatArray) -> tuple[str, float, float]:
    """(test name, statistic, p) over complete rows: Friedman, or Cochran's Q for 0/1 data (the same χ²)."""
    name = "cochran_q" if _is_binary(table) else "friedman"
    if np.all(table == table[:, :1]):
        return name, 0.0, 1.0  # every unit ties across tutors: no evidence of any difference
    result = stats.friedmanchisquare(*(table[:, j] for j in range(table.shape[1])))
    return name, float(result.statistic), float(result.pvalue)


def _mean_interval(d: FloatArray, seed: int, n_boot: int) -> tuple[float | None, float | None]:
    if n_boot <= 0 or d.size < 2:
        return None, None
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    found = stats.bootstrap(
        (d,), np.mean, n_resamples=n_boot, method="percentile", vectorized=True, rng=np.random.default_rng(seed)
    ).confidence_interval
    return float(found.low), float(found.high)


def _metric_rows(
    data: ModelScores, units: Sequence[Any], metric: str, *, seed: int, n_boot: int, min_pairs: int
) -> tuple[OmnibusRow, list[TutorPair]]:
    table = _table(data, units, metric)
    table = table[~np.isnan(table).any(axis=1)]
    n = int(table.shape[0])
    status = "ok" if n >= max(min_pairs, 1) else "insufficient"
    test, statistic, p = omnibus_test(table) if status == "ok" and len(data.labels) > 2 else (None, None, None)
    omnibus = OmnibusRow(
        metric=metric, n=n, binary=_is_binary(table) if n else False, test=test, statistic=statistic, p=p, status=status
    )
    pairs: list[TutorPair] = []
    for i, j in itertools.combinations(range(len(data.labels)), 2):
        a, b = data.labels[i], data.labels[j]
        d = table[:, i] - table[:, j] if n else np.zeros(0)
        contrast = difference_contrast(
            d, a_name=a, b_name=b, seed=derive_seed(seed, metric, a, b), n_boot=n_boot, min_pairs=min_pairs
        )
        low, high = _mean_interval(d, derive_seed(seed, "mean", metric, a, b), n_boot if contrast.status == "ok" else 0)
        pairs.append(TutorPair(metric=metric, **contrast.model_dump(), mean_low=low, mean_high=high))
    return omnibus, pairs


def _gate(omnibus: Sequence[OmnibusRow], q: float) -> list[OmnibusRow]:
    """BH over the metrics' omnibus p: a metric whose omnibus does not pass admits no finding among its pairs."""
    tested = [p for row in omnibus if (p := row.p) is not None]
    adjusted = iter(adjust_p(tested, FAMILY_METHOD))
    gated = []
    for row in omnibus:
        p_family = None if row.p is None else next(adjusted)
        passes = row.status == "ok" and (p_family is None or p_family <= q)
        gated.append(row.model_copy(update={"p_family": p_family, "passes": passes}))
    return gated


def _item_weights(items: Sequence[str], seed: int, n_boot: int) -> FloatArray:
    """Resamples × units: how often each unit's item is drawn in each bootstrap resample of whole items."""
    names, index = np.unique(np.asarray(items), return_inverse=True)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(names), np.full(len(names), 1 / len(names)), size=n_boot).astype(np.float64)
    weights: FloatArray = counts[:, index]
    return weights


def association_across_tutors(
    x: FloatArray, y: FloatArray, items: Sequence[str], *, seed: int, n_boot: int = N_BOOT_RANKS
) -> TutorAssociation | None:
    """Spearman's ρ across tutors between two per-tutor means over the same units (units × tutors each), with a
    95% interval from a bootstrap over items; None below three tutors or without spread."""
    if x.shape[1] < 3 or x.shape[0] == 0:
        return None
    mean_x, mean_y = x.mean(axis=0), y.mean(axis=0)
    if np.ptp(mean_x) == 0 or np.ptp(mean_y) == 0:
        return None
    weights = _item_weights(items, seed, n_boot)
    total = weights.sum(axis=1, keepdims=True)
    draws = [
        float(stats.spearmanr(bx, by).statistic)
        for bx, by in zip((weights @ x) / total, (weights @ y) / total, strict=True)
        if np.ptp(bx) > 0 and np.ptp(by) > 0
    ]
    low, high = np.percentile(draws, [2.5, 97.5]) if draws else (math.nan, math.nan)
    rho = float(stats.spearmanr(mean_x, mean_y).statistic)
    exact = spearman_across_models(mean_x.tolist(), mean_y.tolist(), seed=seed)
    return TutorAssociation(
        rho=rho,
        low=float(low),
        high=float(high),
        tutors=int(x.shape[1]),
        units=int(x.shape[0]),
        p=exact.p if exact else None,
        min_p=exact.min_p if exact else None,
        readable=bool(exact and exact.readable),
    )


def spearman_across_models(x: Sequence[float], y: Sequence[float], *, seed: int = 0) -> RankCorrelation | None:
    """Spearman's ρ across models between two per-model figures (TutorCaseBench Fig. 7), its exact permutation p
    and Fisher-z 95% interval (scipy's Pearson on the ranks, which is Spearman's ρ).

    `min_p` is the smallest p so few models can give at all (their ranks in perfect agreement): with four models
    it is 1/12, so no correlation across four can be significant whatever the data. None below three models (or
    missing values leave fewer) or when either figure has no spread."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys = xs[keep], ys[keep]
    if len(xs) < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return None
    rx, ry = stats.rankdata(xs), stats.rankdata(ys)
    found = stats.pearsonr(rx, ry, method=stats.PermutationMethod(rng=np.random.default_rng(seed)))
    best = stats.pearsonr(rx, rx, method=stats.PermutationMethod(rng=np.random.default_rng(seed)))
    low, high = stats.pearsonr(rx, ry).confidence_interval() if len(xs) > 3 else (math.nan, math.nan)
    return RankCorrelation(
        rho=float(found.statistic),
        p=float(found.pvalue),
        low=None if math.isnan(low) else float(low),
        high=None if math.isnan(high) else float(high),
        models=len(xs),
        min_p=float(best.pvalue),
        readable=bool(best.pvalue <= FAMILY_Q),
    )


def rank_intervals(
    table: FloatArray, items: Sequence[str], *, lower_is_better: bool, seed: int, n_boot: int = N_BOOT_RANKS
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Each tutor's mean's 95% interval and rank interval (1 = best) from a bootstrap over items (clusters).

    Returns (rank_low, rank_high, mean_ci) with mean_ci of shape (2, tutors)."""
    weights = _item_weights(items, seed, n_boot)
    means = (weights @ table) / weights.sum(axis=1, keepdims=True)
    ranks = stats.rankdata(means if lower_is_better else -means, method="min", axis=1)
    low = np.floor(np.percentile(ranks, 2.5, axis=0))
    high = np.ceil(np.percentile(ranks, 97.5, axis=0))
    return low, high, np.percentile(means, [2.5, 97.5], axis=0)


def _leaderboard(
    data: ModelScores, units: Sequence[Any], headline: Headline, *, seed: int, n_boot: int
) -> list[LeaderboardRow]:
    table = _table(data, units, headline.metric)
    kept = [unit for unit, row in zip(units, table, strict=True) if not np.isnan(row).any()]
    table = table[~np.isnan(table).any(axis=1)]
    if not kept:
        return []
    low, high, ci = rank_intervals(
        table, [data.item_of[u] for u in kept], lower_is_better=headline.lower_is_better, seed=seed, n_boot=n_boot
    )
    means = table.mean(axis=0)
    sign = 1.0 if headline.lower_is_better else -1.0
    order = sorted(range(len(data.labels)), key=lambda j: (int(low[j]), int(high[j]), sign * float(means[j])))
    return [
        LeaderboardRow(
            model=data.labels[j],
            n=len(kept),
            mean=float(means[j]),
            ci_low=float(ci[0, j]),
            ci_high=float(ci[1, j]),
            rank_low=int(low[j]),
            rank_high=int(high[j]),
            tied_with=[data.labels[k] for k in order if k != j and low[k] <= high[j] and low[j] <= high[k]],
        )
        for j in order
    ]


def _column_means(table: FloatArray) -> FloatArray:
    """Each tutor's mean over its scored units in a cell; NaN where it has none (without numpy's warning)."""
    present = ~np.isnan(table)
    counts = present.sum(axis=0)
    sums = np.where(present, table, 0.0).sum(axis=0)
    means: FloatArray = np.divide(sums, counts, out=np.full(table.shape[1], np.nan), where=counts > 0)
    return means


def _cells(data: ModelScores, units: Sequence[Any], headline: Headline) -> list[CellCount]:
    """Per pair, over the table's cells: in how many is B worse than A on the headline (a sign test over cells)."""
    by_cell: dict[str, list[Any]] = {}
    for unit in units:
        by_cell.setdefault(data.cell_of[unit], []).append(unit)
    means = {
        cell: _column_means(_table(data, cell_units, headline.metric)) for cell, cell_units in sorted(by_cell.items())
    }
    rows: list[CellCount] = []
    sign = 1.0 if headline.lower_is_better else -1.0
    for i, j in itertools.combinations(range(len(data.labels)), 2):
        gaps = [sign * (m[j] - m[i]) for m in means.values() if not np.isnan(m[[i, j]]).any()]
        worse, better = sum(g > 1e-12 for g in gaps), sum(g < -1e-12 for g in gaps)
        p = float(stats.binomtest(worse, worse + better).pvalue) if worse + better else None
        rows.append(CellCount(a=data.labels[i], b=data.labels[j], cells=len(gaps), b_worse=worse, b_better=better, p=p))
    return rows


def compare_models(
    data: ModelScores,
    headline: Headline,
    *,
    seed: int,
    n_boot: int = 2000,
    min_pairs: int = MIN_PAIRS,
    q: float = FAMILY_Q,
) -> TutorComparison:
    """The cross-tutor comparison, typed: balance, leaderboard, omnibus and pairs per metric, cells."""
    units = _complete(data)
    metrics = data.metrics
    omnibus: list[OmnibusRow] = []
    pairs: list[TutorPair] = []
    for metric in metrics:
        row, rows = _metric_rows(data, units, metric, seed=seed, n_boot=n_boot, min_pairs=min_pairs)
        omnibus.append(row)
        pairs.extend(rows)
    omnibus = _gate(omnibus, q)
    passes = {row.metric: row.passes for row in omnibus}
    gated = [pair.model_copy(update={"gated": not passes[pair.metric]}) for pair in pairs]
    pairs = correct_family(gated, method=FAMILY_METHOD, q=q, family="pairs × metrics")
    return TutorComparison(
        labels=list(data.labels),
        headline=headline,
        units={label: len(data.scores[label]) for label in data.labels},
        complete_units=len(units),
        leaderboard=_leaderboard(data, units, headline, seed=derive_seed(seed, "ranks"), n_boot=N_BOOT_RANKS),
        omnibus=omnibus,
        pairs=pairs,
        family=FamilyCount(
            method=FAMILY_METHOD,
            q=q,
            size=sum(pair.tested for pair in pairs),
            findings=sum(pair.finding for pair in pairs),
        ),
        cells=_cells(data, units, headline),
        length_vs_headline=_length_association(data, units, headline, seed=derive_seed(seed, "length")),
    )


def _length_association(
    data: ModelScores, units: Sequence[Any], headline: Headline, *, seed: int
) -> TutorAssociation | None:
    if not data.reply_words:
        return None
    words = np.array(
        [[data.reply_words.get(label, {}).get(u, math.nan) for label in data.labels] for u in units], dtype=np.float64
    ).reshape(len(units), len(data.labels))
    scores = _table(data, units, headline.metric)
    keep = ~(np.isnan(words).any(axis=1) | np.isnan(scores).any(axis=1))
    items = [data.item_of[u] for u, w, v in zip(units, words, scores, strict=True) if not np.isnan([*w, *v]).any()]
    return association_across_tutors(words[keep], scores[keep], items, seed=seed)
