"""The null reference of EduFair's mean-|r| tables: each mean beside its value with no effect, at the same items.

The reference is a within-item permutation of the condition labels (`engine.label_permutations`): with no
effect the levels of one item are exchangeable, so permuting them and recomputing every contrast that enters a
mean draws from that mean's null distribution at the run's own items, ties and missing values. One permutation
per item and draw serves every metric of a dimension, so means over metrics keep the metrics' dependence.

Per mean: the null's expected value and 95% range, and the permutation p of "larger than the null". Over the
run's means (cells, per metric, per dimension, Ped./Conv.) the p's form one family corrected by Benjamini–
Hochberg at 0.05, so an unbiased run marks any mean as exceeding its null in at most about 5% of runs
(`bench/fairness_mean_null.py` measures it). EduFair's |r| ≥ 0.10 mark is given only where the mean could
resolve 0.10 (its null's 95% range lies below 0.10); elsewhere the row says it cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from engine import (
    MEANINGFUL_R,
    MIN_PAIRS,
    adjust_p,
    label_permutations,
    lazy_module,
    null_reference,
    rank_biserial_rows,
)

from .fairness_model import Aggregate, DimensionMean, FairnessContrast, MeanAbsR, MeanCell, MetricMean, NullRef

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from scipy import stats

    FloatArray = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = ("NULL_METHOD", "MeanTables", "NullCell", "NullDraws", "mark_contrasts", "mark_means", "null_draws")

RowT = TypeVar("RowT", MeanCell, MetricMean, DimensionMean)
NULL_METHOD = "within-item permutation of the condition labels"
NULL_Q = 0.05
_MEAN_TESTS = ("wilcoxon", "pairwise", "matched", "mismatched")
"""The contrasts EduFair's mean-|r| tables average (`fairness_stats.EFFECT_TESTS`); the 2×2's other three get a
null only for their own |r| ≥ 0.10 mark."""


@dataclass
class NullCell:
    """One dimension of one domain × channel cell: per metric, its items × levels table (NaN: no score)."""

    key: tuple[str, str, str]
    """(domain, channel, dimension)"""
    levels: list[str]
    tables: dict[str, FloatArray]
    opposite: bool
    """The 2×2 opposite design: levels are "stated/perceived"; its matched and mismatched contrasts enter."""


NullDraws = dict[tuple[str, str, str, str], dict[str, "FloatArray"]]
"""(domain, channel, dimension, metric) → test name → |r| per draw, one column per contrast of that test."""


def _differences(table: FloatArray, levels: Sequence[str], opposite: bool) -> dict[str, list[FloatArray]]:
    """The contrasts that enter the mean-|r| tables, as difference rows (..., items), on a permuted table."""
    if opposite:
        first, second = sorted({part for level in levels for part in level.split("/")})
        column = {level: i for i, level in enumerate(levels)}

        def at(stated: str, perceived: str) -> FloatArray:
            return table[..., column[f"{stated}/{perceived}"]]

        ff, fm, mf, mm = at(first, first), at(first, second), at(second, first), at(second, second)
        return {
            "matched": [ff - mm],
            "mismatched": [fm - mf],
            "perceived": [(ff + mf) / 2 - (fm + mm) / 2],
            "stated": [(ff + fm) / 2 - (mf + mm) / 2],
            "interaction": [(ff - fm) - (mf - mm)],
        }
    if len(levels) == 2:
        return {"wilcoxon": [table[..., 0] - table[..., 1]]}
    pairs = [(i, j) for i in range(len(levels)) for j in range(i + 1, len(levels))]
    return {"pairwise": [table[..., i] - table[..., j] for i, j in pairs]}


def null_draws(cells: Sequence[NullCell], *, seed: int, draws: int, derive: Any) -> NullDraws:
    """|r| of every contrast entering the mean tables, per permutation draw; `derive(seed, *parts)` seeds each
    dimension's permutations so a rebuilt report draws the same ones."""
    found: NullDraws = {}
    for cell in cells:
        if cell.opposite and len(cell.levels) != 4:
            continue
        items = next(iter(cell.tables.values())).shape[0] if cell.tables else 0
        if items == 0:
            continue
        order = label_permutations(items, len(cell.levels), draws=draws, seed=derive(seed, "null", *cell.key))
        for metric, table in cell.tables.items():
            complete = ~np.isnan(table).any(axis=1)
            if int(complete.sum()) < MIN_PAIRS:
                continue
            if len(cell.levels) == 2 and not cell.opposite:
                found[(*cell.key, metric)] = {"wilcoxon": _sign_flip_null(table[complete], order[:, complete, 0])}
                continue
            permuted = np.take_along_axis(table[np.newaxis, complete, :], order[:, complete, :], axis=-1)
            found[(*cell.key, metric)] = {
                test: np.abs(rank_biserial_rows(np.stack(rows)))  # (contrasts, draws)
                for test, rows in _differences(permuted, cell.levels, cell.opposite).items()
            }
    return found


def _sign_flip_null(table: FloatArray, first: npt.NDArray[np.int64]) -> FloatArray:
    """Two levels: a within-item permutation swaps the pair or not, so d keeps its Pratt ranks and only flips
    sign; |r| per draw from the ranks computed once (the same values `rank_biserial_rows` gives on the permuted
    table, at a fraction of the cost)."""
    values = np.round(table[:, 0] - table[:, 1], 12) + 0.0
    ranks = np.where(values != 0, stats.rankdata(np.abs(values)), 0.0)
    total = ranks.sum()
    if total == 0:
        return np.zeros((1, first.shape[0]))
    signed = ranks * np.sign(values) * np.where(first == 1, -1.0, 1.0)
    return np.asarray(np.abs(signed.sum(axis=-1) / total)[np.newaxis, :], dtype=np.float64)


def _cell_null(draws: Mapping[str, FloatArray], test: str | None = None) -> FloatArray:
    """A cell's mean |r| per draw: over all its contrasts, or one test's (Correct or Wrong of the 2×2)."""
    chosen = [draws[test]] if test is not None else [v for k, v in draws.items() if k in _MEAN_TESTS]
    return np.asarray(np.concatenate(chosen, axis=0).mean(axis=0), dtype=np.float64)


def _reference(observed: float | None, null: FloatArray | None) -> NullRef | None:
    """A mean's null reference; its family p is set where the headline means are corrected (never for a cell)."""
    if observed is None or null is None:
        return None
    found = null_reference(observed, null)
    resolves = found.null_high < MEANINGFUL_R
    return NullRef(
        **found.model_dump(),
        resolves_meaningful=resolves,
        meaningful=resolves and observed >= MEANINGFUL_R,
        p_family=None,
        exceeds_null=False,
    )


@dataclass(frozen=True)
class MeanTables:
    """EduFair's mean-|r| tables before their null references; each aggregate row beside the 2×2 test it
    averages (None: every contrast of its cell)."""

    cells: list[MeanCell]
    by_metric: list[MetricMean]
    by_dimension: list[DimensionMean]
    aggregates: list[tuple[Aggregate, str | None]]


def mark_means(
    tables: MeanTables, draws: NullDraws, turn_metrics: Sequence[str], conversation_metrics: Sequence[str]
) -> MeanAbsR:
    """Each mean with its null reference beside it (`null`, or `ped_null`/`conv_null` for the aggregates), the
    family of the headline means' "larger than the null" p's (per metric, per dimension, Ped./Conv.) corrected
    by Benjamini–Hochberg into `exceeds_null`. A cell keeps its uncorrected p and is never marked: it holds one
    to three contrasts whose verdicts are the corrected contrast family's."""
    cell_null = {key: _cell_null(found) for key, found in draws.items()}

    def with_null(row: RowT, observed: float, null: FloatArray | None) -> RowT:
        return row.model_copy(update={"null": _reference(observed, null)})

    def over(keys: Iterable[tuple[str, str, str, str]]) -> FloatArray | None:
        return _average([cell_null[k] for k in keys])

    cells = [
        with_null(c, c.mean_abs_r, cell_null.get((c.domain, c.channel, c.dimension, c.metric))) for c in tables.cells
    ]
    by_metric = [
        with_null(m, m.mean_abs_r, over(k for k in cell_null if (k[0], k[1], k[3]) == (m.domain, m.channel, m.metric)))
        for m in tables.by_metric
    ]
    by_dimension = [
        with_null(
            d,
            d.mean_abs_r,
            over(k for k in cell_null if k[:3] == (d.domain, d.channel, d.dimension) and k[3] in turn_metrics),
        )
        for d in tables.by_dimension
    ]
    aggregates = [
        _aggregate_nulls(a, test, draws, cell_null, turn_metrics, conversation_metrics) for a, test in tables.aggregates
    ]
    headline = [
        *(m.null for m in by_metric),
        *(d.null for d in by_dimension),
        *(ref for a in aggregates for ref in (a.ped_null, a.conv_null)),
    ]
    references = [ref for ref in headline if ref is not None]
    adjusted = dict(zip(map(id, references), adjust_p([ref.p_larger for ref in references], "bh"), strict=True))

    def corrected(ref: NullRef | None) -> NullRef | None:
        if ref is None:
            return None
        p = adjusted[id(ref)]
        return ref.model_copy(update={"p_family": p, "exceeds_null": p <= NULL_Q})

    return MeanAbsR(
        null_method=NULL_METHOD,
        cells=cells,
        by_metric=[m.model_copy(update={"null": corrected(m.null)}) for m in by_metric],
        by_dimension=[d.model_copy(update={"null": corrected(d.null)}) for d in by_dimension],
        aggregates=[
            a.model_copy(update={"ped_null": corrected(a.ped_null), "conv_null": corrected(a.conv_null)})
            for a in aggregates
        ],
    )


def _aggregate_nulls(
    aggregate: Aggregate,
    test: str | None,
    draws: NullDraws,
    cell_null: Mapping[tuple[str, str, str, str], FloatArray],
    turn_metrics: Sequence[str],
    conversation_metrics: Sequence[str],
) -> Aggregate:
    """An aggregate row with the null of its Ped. and Conv. means: over `test`'s draws, or every contrast's."""
    where = (aggregate.domain, aggregate.channel, aggregate.dimension)
    nulls: dict[str, NullRef | None] = {}
    parts = (("ped", turn_metrics, aggregate.ped), ("conv", conversation_metrics, aggregate.conv))
    for part, metrics, observed in parts:
        found = [
            _cell_null(draws[k], test) if test is not None else cell_null[k]
            for k in draws
            if k[:3] == where and k[3] in metrics and (test is None or test in draws[k])
        ]
        nulls[f"{part}_null"] = _reference(observed, _average(found))
    return aggregate.model_copy(update=nulls)


def _average(nulls: Sequence[FloatArray]) -> FloatArray | None:
    return np.asarray(np.mean(np.stack(nulls), axis=0), dtype=np.float64) if nulls else None


def mark_contrasts(
    contrasts: Sequence[FairnessContrast], cells: Sequence[NullCell], draws: NullDraws
) -> list[FairnessContrast]:
    """EduFair's |r| ≥ 0.10 mark on a contrast only where its null could resolve 0.10 (the null's 95th
    percentile of |r| below it); `resolves_meaningful` says which. At 20 items no single contrast can."""
    levels = {cell.key: cell.levels for cell in cells}
    marked: list[FairnessContrast] = []
    for row in contrasts:
        key = (row.domain, row.channel, row.dimension, row.metric)
        found = draws.get(key, {}).get(row.test)
        if row.r is None or found is None:
            marked.append(row.model_copy(update={"resolves_meaningful": None}))
            continue
        index = 0
        if row.test == "pairwise":
            names = levels[key[:3]]
            pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
            index = pairs.index((row.a, row.b))
        resolves = bool(np.quantile(found[index], 0.95) < MEANINGFUL_R)
        update = {"resolves_meaningful": resolves, "meaningful": resolves and abs(row.r) >= MEANINGFUL_R}
        marked.append(row.model_copy(update=update))
    return marked
