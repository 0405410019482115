"""The comparison of several tutors: the omnibus tests against their textbook formulas, the family's error rate
on null data and its power on a planted difference (a small deterministic version of bench/models_null.py),
rank intervals and the cell count."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from engine.report._models import _rho_interval
from engine.stats._models import (
    CellCount,
    Headline,
    LeaderboardRow,
    ModelScores,
    OmnibusRow,
    TutorPair,
    association_across_tutors,
    compare_models,
    omnibus_test,
    rank_intervals,
)

BINARY = np.array(
    [[1, 0, 0], [1, 1, 0], [1, 0, 1], [0, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=np.float64
)


def test_a_binary_omnibus_is_cochrans_q() -> None:
    """Q = (k − 1)(k ΣC² − N²) / (k N − ΣR²), χ² with k − 1 df, computed here from its definition."""
    k = BINARY.shape[1]
    columns, rows = BINARY.sum(axis=0), BINARY.sum(axis=1)
    total = BINARY.sum()
    q = (k - 1) * (k * (columns**2).sum() - total**2) / (k * total - (rows**2).sum())
    name, statistic, p = omnibus_test(BINARY)
    assert name == "cochran_q"
    assert statistic == pytest.approx(q) and p == pytest.approx(stats.chi2.sf(q, k - 1))


def test_a_score_omnibus_is_friedman_by_hand() -> None:
    """Without ties, χ² = 12 / (n k (k + 1)) ΣR² − 3 n (k + 1) over the within-unit ranks."""
    table = np.array([[0.1, 0.5, 0.9], [0.2, 0.7, 0.3], [0.4, 0.8, 0.6], [0.3, 0.9, 0.5]])
    n, k = table.shape
    ranks = np.array([[sorted(row).index(v) + 1 for v in row] for row in table]).sum(axis=0)
    expected = 12 / (n * k * (k + 1)) * (ranks**2).sum() - 3 * n * (k + 1)
    name, statistic, p = omnibus_test(table)
    assert name == "friedman" and statistic == pytest.approx(expected)
    assert p == pytest.approx(stats.chi2.sf(expected, k - 1))


def _data(rates: list[float], *, units: int, seed: int) -> ModelScores:
    """Each tutor's 0/1 outcome per unit, drawn independently at its rate; two units per item."""
    rng = np.random.default_rng(seed)
    labels = tuple(f"m{j}" for j in range(len(rates)))
    scores = {
        label: {u: {"harm": float(rng.random() < rate)} for u in range(units)}
        for label, rate in zip(labels, rates, strict=True)
    }
    return ModelScores(labels, scores, {u: f"i{u // 2}" for u in range(units)}, {u: f"c{u % 4}" for u in range(units)})


HEAD = Headline("harm", lower_is_better=True)


def test_identical_tutors_rarely_differ_and_a_planted_one_is_found() -> None:
    """Four copies of one tutor over 60 seeds: runs with any finding stay near the family's 5% (bound: 12%, the
    binomial's 99.9% quantile at 5% of 60); a tutor leaking at 0.6 among three at 0.3 is found on every seed."""
    null = [
        compare_models(_data([0.3] * 4, units=80, seed=seed), HEAD, seed=seed, n_boot=0).family.findings > 0
        for seed in range(60)
    ]
    assert sum(null) <= stats.binom.ppf(0.999, 60, 0.05)
    for seed in range(10):
        found = compare_models(_data([0.3, 0.3, 0.6, 0.3], units=80, seed=seed), HEAD, seed=seed, n_boot=0)
        assert {(r.a, r.b) for r in found.pairs if r.finding} >= {("m0", "m2"), ("m2", "m3")}


def test_a_metric_whose_omnibus_fails_has_no_finding() -> None:
    found = compare_models(_data([0.3] * 4, units=80, seed=3), HEAD, seed=3, n_boot=0)
    gated = [r for r in found.pairs if r.gated]
    assert not found.omnibus[0].passes and len(gated) == 6 and not any(r.finding for r in gated)


def test_the_comparisons_rows_are_its_typed_rows_and_the_gate_is_bh_over_the_metrics() -> None:
    """Every row of the comparison's JSON is its typed row key for key (no extra key, none missing), and each
    metric's omnibus p_family is scipy's Benjamini–Hochberg over the metrics' omnibus p."""
    data = _data([0.3, 0.3, 0.6, 0.3], units=40, seed=4)
    scores = {
        label: {u: {**v, "other": v["harm"] * 0.5} for u, v in units.items()} for label, units in data.scores.items()
    }
    found = compare_models(
        ModelScores(data.labels, scores, data.item_of, data.cell_of), HEAD, seed=4, n_boot=0
    ).as_json()
    for key, row_type in (("leaderboard", LeaderboardRow), ("omnibus", OmnibusRow), ("cells", CellCount)):
        assert found[key] and [row_type.model_validate(r).model_dump() for r in found[key]] == found[key]
    assert [TutorPair.model_validate(r).model_dump(mode="json") for r in found["pairs"]] == found["pairs"]
    omnibus = [OmnibusRow.model_validate(r) for r in found["omnibus"]]
    assert [row.metric for row in omnibus] == ["harm", "other"]
    expected = stats.false_discovery_control([row.p for row in omnibus if row.p is not None], method="bh")
    assert [row.p_family for row in omnibus] == pytest.approx(list(expected))
    assert all(row.passes == (row.p_family is not None and row.p_family <= 0.05) for row in omnibus)


def test_rank_intervals_separate_distinct_tutors_and_tie_identical_ones() -> None:
    table = np.column_stack([np.full(20, 0.1), np.full(20, 0.5), np.full(20, 0.9)])
    low, high, _ = rank_intervals(table, [f"i{n}" for n in range(20)], lower_is_better=True, seed=1, n_boot=200)
    assert low.tolist() == high.tolist() == [1, 2, 3]
    same = compare_models(_data([0.3, 0.3], units=60, seed=2), HEAD, seed=2, n_boot=0).leaderboard
    assert all(row.tied_with for row in same)


def test_the_cell_count_says_where_b_is_worse() -> None:
    """Cells c0..c3: m1 is worse in c0 and c1, better in c2, equal in c3; the sign test is over the three."""
    outcomes = {"c0": (0, 1), "c1": (0, 1), "c2": (1, 0), "c3": (1, 1)}
    units = list(itertools.product(outcomes, range(2)))
    scores = {f"m{j}": {(cell, r): {"harm": float(outcomes[cell][j])} for cell, r in units} for j in range(2)}
    data = ModelScores(("m0", "m1"), scores, {u: f"{u[0]}-{u[1]}" for u in units}, {u: u[0] for u in units})
    (row,) = compare_models(data, HEAD, seed=0, n_boot=0, min_pairs=1).cells
    assert (row.cells, row.b_worse, row.b_better) == (4, 2, 1)
    assert row.p == pytest.approx(stats.binomtest(2, 3).pvalue)


def test_reply_length_and_the_headline_are_correlated_across_tutors() -> None:
    """ρ is scipy's Spearman of the tutors' means, and its interval holds it; fewer than three tutors: none."""
    rng = np.random.default_rng(5)
    words = rng.normal([40, 80, 120, 160], 10, size=(30, 4))
    harm = rng.normal([0.1, 0.2, 0.4, 0.3], 0.05, size=(30, 4))
    items = [f"i{n // 2}" for n in range(30)]
    found = association_across_tutors(words, harm, items, seed=1, n_boot=300)
    assert found is not None
    assert found.rho == pytest.approx(stats.spearmanr(words.mean(axis=0), harm.mean(axis=0)).statistic)
    assert found.low is not None and found.high is not None
    assert found.low <= found.rho <= found.high and found.tutors == 4
    assert association_across_tutors(words[:, :2], harm[:, :2], items, seed=1) is None
    rankings = [stats.spearmanr(words.mean(axis=0), p).statistic for p in itertools.permutations(harm.mean(axis=0))]
    assert found.p == pytest.approx(sum(abs(r) >= abs(found.rho) - 1e-12 for r in rankings) / 24)
    assert found.min_p == pytest.approx(2 / 24) and not found.readable, "four tutors: never p <= 0.05"


def test_a_zero_width_rho_interval_is_said_in_words_not_as_plus_one_in_brackets() -> None:
    """Four tutors ordered alike in every resample give ρ = 1 with no spread; the report says so rather than
    printing "+1.00 [+1.00, +1.00]", and a spread interval keeps its brackets."""
    rng = np.random.default_rng(3)
    words = rng.normal([40, 80, 120, 160], 0.1, size=(30, 4))
    harm = rng.normal([0.1, 0.2, 0.3, 0.4], 0.001, size=(30, 4))
    items = [f"i{n // 2}" for n in range(30)]
    same = association_across_tutors(words, harm, items, seed=1, n_boot=200)
    assert same is not None and same.low == same.high == same.rho == pytest.approx(1.0)
    text = _rho_interval(same)
    assert text.startswith("+1.00, the same in every bootstrap resample") and "[" not in text
    spread = association_across_tutors(
        rng.normal([40, 50, 60, 70], 40, size=(30, 4)), rng.normal([0.1, 0.15, 0.2, 0.25], 0.3, size=(30, 4)), items,
        seed=1, n_boot=300,
    )  # fmt: skip
    assert spread is not None and spread.low is not None and spread.high is not None and spread.low < spread.high
    assert (
        _rho_interval(spread)
        == f"{spread.rho:+.2f} [{spread.low:+.2f}, {spread.high:+.2f}] (95%, bootstrap over items)"
    )
