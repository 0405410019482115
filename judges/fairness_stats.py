"""The fairness statistics: the contrasts of one dimension × metric, the family they form and its correction,
and EduFair's mean-|r| tables over them, on the typed rows of `judges.fairness_model`."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import (
    MIN_PAIRS,
    ContrastRow,
    EpisodeRecord,
    correct_family,
    derive_seed,
    difference_contrast,
    friedman_then_pairwise,
    lazy_module,
    omnibus_row,
)
from personas.fairness import FairnessAnalysis

from .conversation_stats import CONVERSATION_STATS
from .fairness_mismatch import mismatch_differences
from .fairness_model import Aggregate, Correction, DimensionMean, FairnessContrast, MeanAbsR, MeanCell, MetricMean
from .fairness_null import MeanTables, NullDraws, mark_means
from .turn_quality import TURN_QUALITY_METRICS

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

__all__ = ("AGGREGATE_LABELS", "EFFECT_TESTS", "Tested", "contrasts_of", "correct", "mean_abs_r", "opposite_keys")

EFFECT_TESTS = ("wilcoxon", "pairwise", "matched", "mismatched")
"""Rows whose |r| enters EduFair's mean-|r| tables: a dimension's contrasts, and Correct vs Wrong of the 2×2."""
AGGREGATE_LABELS = {
    "name_gender": "Gender (same ethnicity)",
    "name_ethnicity": "Ethnicity (same gender)",
    "name_both": "Both (gender and ethnicity differ)",
    "matched": "Correct (genders match)",
    "mismatched": "Wrong (genders differ)",
}
MAX_CI_RESAMPLES = 200_000

CellKey = tuple[str, str, str, str]
"""(domain, channel, dimension, metric)"""


@dataclass
class Tested:
    """A contrast row, whether it enters the family, and how to recompute it at another confidence level (for a
    finding's interval)."""

    row: FairnessContrast
    d: Any
    seed: int
    entered: bool


def opposite_keys(group: Sequence[EpisodeRecord]) -> tuple[str, str] | None:
    """The (stated, perceived) condition keys of an opposite-design dimension, e.g. student_gender."""
    if not group:
        return None
    stated = [k for k in group[0].condition if k.startswith("student_")]
    for key in stated:
        perceived = "perceived_" + key.removeprefix("student_")
        if perceived in group[0].condition:
            return key, perceived
    return None


def _row(where: Mapping[str, str], contrast: ContrastRow, **update: Any) -> FairnessContrast:
    return FairnessContrast(**where, **(contrast.model_dump() | update))


def _opposite(
    group: Sequence[EpisodeRecord],
    columns: dict[str, list[float]],
    keys: tuple[str, str],
    where: Mapping[str, str],
    seed: int,
    n_boot: int,
) -> list[Tested]:
    """Opposite design: levels are "<stated>/<perceived>"; a missing cell leaves NaNs, dropped by the tests."""
    stated_key, perceived_key = keys
    first, second = sorted({r.condition[stated_key] for r in group} | {r.condition[perceived_key] for r in group})
    missing = [math.nan] * len(next(iter(columns.values())))
    cells = {(s, p): columns.get(f"{s}/{p}", missing) for s in (first, second) for p in (first, second)}
    found = []
    for name, (d, a_name, b_name) in mismatch_differences(cells, first=first, second=second).items():
        contrast_seed = derive_seed(seed, name)
        contrast = difference_contrast(d, a_name=a_name, b_name=b_name, seed=contrast_seed, n_boot=n_boot)
        found.append(Tested(_row(where, contrast, test=name), d, contrast_seed, contrast.status == "ok"))
    return found


def _levels(
    columns: dict[str, list[float]],
    levels: list[str],
    where: Mapping[str, str],
    seed: int,
    analysis: FairnessAnalysis,
    n_boot: int,
) -> list[Tested]:
    """Three or more levels: the Friedman row (never in the family), then every pair, gated by its p."""
    omnibus = friedman_then_pairwise(
        {level: columns[level] for level in levels},
        seed=seed,
        alpha=analysis.omnibus_alpha,
        n_boot=n_boot,
        always_pairs=True,
    )
    found = [Tested(_row(where, omnibus_row(omnibus)), None, seed, False)]
    table = np.column_stack([np.asarray(columns[level], dtype=np.float64) for level in levels])
    table = table[~np.isnan(table).any(axis=1)]
    gate_open = omnibus.p is not None and omnibus.p < analysis.omnibus_alpha
    for contrast in omnibus.pairwise:
        i, j = levels.index(contrast.a), levels.index(contrast.b)
        row = _row(where, contrast, test="pairwise", omnibus_p=omnibus.p, gated=not gate_open)
        seed_of = derive_seed(seed, contrast.a, contrast.b)
        found.append(Tested(row, table[:, i] - table[:, j], seed_of, contrast.status == "ok"))
    return found


def contrasts_of(
    group: Sequence[EpisodeRecord],
    columns: dict[str, list[float]],
    levels: list[str],
    where: Mapping[str, str],
    seed: int,
    analysis: FairnessAnalysis,
    n_boot: int,
) -> list[Tested]:
    """The contrasts of one dimension × metric (`where` names its domain, channel, dimension and metric), each
    marked whether it enters the family."""
    opposite = opposite_keys(group)
    if opposite is not None:
        return _opposite(group, columns, opposite, where, seed, n_boot)
    if len(levels) < 2:
        return []
    if len(levels) == 2:
        a, b = levels
        d = np.subtract(columns[a], columns[b])
        contrast = difference_contrast(d, a_name=a, b_name=b, seed=seed, n_boot=n_boot)
        return [Tested(_row(where, contrast), d, seed, contrast.status == "ok")]
    return _levels(columns, levels, where, seed, analysis, n_boot)


def _families(tested: list[Tested], analysis: FairnessAnalysis) -> dict[str, list[Tested]]:
    """The declared families of the tested rows; a row outside every family gets its final verdict here."""
    families: dict[str, list[Tested]] = defaultdict(list)
    for test in tested:
        if test.entered and test.row.p is not None:
            families["run" if analysis.family == "run" else f"domain {test.row.domain}"].append(test)
        else:
            test.row = test.row.model_copy(update={"p_family": None, "family": None, "finding": False})
    return families


def _widen(findings: Sequence[Tested], level: float, n_boot: int) -> None:
    """A finding's interval at the corrected level, with enough resamples to resolve its tails."""
    for test in findings:
        resamples = min(MAX_CI_RESAMPLES, max(n_boot, math.ceil(50 / (1 - level))))
        wide = difference_contrast(
            test.d,
            a_name=test.row.a,
            b_name=test.row.b,
            seed=test.seed,
            n_boot=resamples,
            confidence=level,
        )
        test.row = test.row.model_copy(update={"ci_low": wide.ci_low, "ci_high": wide.ci_high, "ci_level": level})


def correct(tested: list[Tested], analysis: FairnessAnalysis, n_boot: int) -> Correction:
    """Correct every family's p-values (`correct_family`), and widen the findings' intervals."""
    sizes: dict[str, int] = {}
    for name, members in _families(tested, analysis).items():
        rows = correct_family([t.row for t in members], method=analysis.correction, q=analysis.q, family=name)
        for test, row in zip(members, rows, strict=True):
            test.row = row
        sizes[name] = len(members)
        findings = [t for t in members if t.row.finding]
        if n_boot > 0:
            _widen(findings, _finding_level(analysis, len(members), len(findings)), n_boot)
    tested_rows = [t.row for t in tested if t.row.r is not None and t.row.status == "ok"]
    return Correction(
        method=analysis.correction,
        q=analysis.q,
        family=analysis.family,
        family_size=sum(sizes.values()),
        families=sizes,
        findings=sum(1 for t in tested if t.row.finding),
        tested=len(tested_rows),
        insufficient=sum(1 for t in tested if t.row.status != "ok"),
        omnibus_alpha=analysis.omnibus_alpha,
        min_pairs=MIN_PAIRS,
    )


def _finding_level(analysis: FairnessAnalysis, m: int, findings: int) -> float:
    """The confidence level matching the correction: 1 − q/m (Bonferroni, Holm), 1 − q·R/m (BH), 1 − q."""
    if analysis.correction == "none" or m == 0:
        return 1 - analysis.q
    if analysis.correction == "bh":
        return 1 - analysis.q * max(findings, 1) / m
    return 1 - analysis.q / m


def _aggregates(
    cell_r: Mapping[CellKey, list[float]], by_test: Mapping[CellKey, dict[str, float]]
) -> list[tuple[Aggregate, str | None]]:
    """EduFair Tables 5 and 7: Ped./Conv. means of the implicit dimensions and of Correct vs Wrong, each beside
    the 2×2 test it averages (None: every contrast)."""
    aggregates: list[tuple[Aggregate, str | None]] = []
    for domain, channel, dimension in sorted({k[:3] for k in cell_r}):
        if channel == "explicit":
            continue
        groups = ("matched", "mismatched") if channel == "opposite" else (None,)
        for test in groups:
            means: dict[str, float | None] = {}
            for name, metrics in (("ped", TURN_QUALITY_METRICS), ("conv", CONVERSATION_STATS)):
                keys = [(domain, channel, dimension, metric) for metric in metrics]
                found = [
                    by_test[key][test] if test is not None else float(np.mean(cell_r[key]))
                    for key in keys
                    if key in cell_r and (test is None or test in by_test[key])
                ]
                means[name] = float(np.mean(found)) if found else None
            label = AGGREGATE_LABELS.get(test or dimension, dimension)
            row = Aggregate(
                domain=domain, channel=channel, dimension=dimension, label=label, ped=means["ped"], conv=means["conv"]
            )
            aggregates.append((row, test))
    return aggregates


def mean_abs_r(contrasts: Sequence[FairnessContrast], null: NullDraws | None = None) -> MeanAbsR:
    """EduFair's mean-|r| tables: per cell, per metric (over dimensions), per dimension (over the five turn
    metrics), and the Ped./Conv. aggregates of the implicit dimensions and of Correct vs Wrong; each mean with
    its null reference beside it (`judges.fairness_null`) when the permutation draws are given."""
    cell_r: dict[CellKey, list[float]] = defaultdict(list)
    by_test: dict[CellKey, dict[str, float]] = defaultdict(dict)
    for c in contrasts:
        if c.test not in EFFECT_TESTS or c.r is None:
            continue
        key = (c.domain, c.channel, c.dimension, c.metric)
        cell_r[key].append(abs(c.r))
        by_test[key][c.test] = abs(c.r)
    flagged = {(c.domain, c.channel, c.dimension, c.metric) for c in contrasts if c.finding}
    cells = [
        MeanCell(
            domain=k[0],
            channel=k[1],
            dimension=k[2],
            metric=k[3],
            mean_abs_r=float(np.mean(v)),
            contrasts=len(v),
            finding=k in flagged,
        )
        for k, v in cell_r.items()
    ]
    per_metric: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    per_dimension: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for cell in cells:
        per_metric[(cell.domain, cell.channel, cell.metric)].append(cell.mean_abs_r)
        if cell.metric in TURN_QUALITY_METRICS:
            per_dimension[(cell.domain, cell.channel, cell.dimension)].append(cell.mean_abs_r)
    tables = MeanTables(
        cells=cells,
        by_metric=[
            MetricMean(domain=d, channel=ch, metric=m, mean_abs_r=float(np.mean(v)))
            for (d, ch, m), v in per_metric.items()
        ],
        by_dimension=[
            DimensionMean(domain=d, channel=ch, dimension=dim, mean_abs_r=float(np.mean(v)))
            for (d, ch, dim), v in per_dimension.items()
        ],
        aggregates=_aggregates(cell_r, by_test),
    )
    return mark_means(tables, null or {}, TURN_QUALITY_METRICS, CONVERSATION_STATS)
