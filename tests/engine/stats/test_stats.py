"""engine.stats._rates: Wilson intervals and Kaplan–Meier tables, checked against hand computations."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from engine.stats._rates import (
    Rate,
    SurvivalRow,
    clustered_difference,
    clustered_rate,
    discrete_hazard,
    rate,
    survival_table,
)


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval written out from its textbook formula (no scipy)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize(("k", "n"), [(8, 10), (0, 20), (20, 20), (37, 120), (1, 1), (5, 7)])
def test_rate_matches_hand_computed_wilson_interval(k: int, n: int) -> None:
    """rate(k, n) gives k/n with the 95% Wilson score interval, to 1e-9."""
    found = rate(k, n)
    low, high = wilson(k, n)
    assert (found.k, found.n) == (k, n)
    assert found.rate == pytest.approx(k / n, abs=1e-12)
    assert found.low == pytest.approx(low, abs=1e-9)
    assert found.high == pytest.approx(high, abs=1e-9)


def test_rate_known_values() -> None:
    """Pins reference values: 8/10 → [0.4902, 0.9433]; 0/20 → [0, 0.1611]."""
    assert rate(8, 10).low == pytest.approx(0.490162, abs=1e-6)
    assert rate(8, 10).high == pytest.approx(0.943318, abs=1e-6)
    assert rate(0, 20).low == pytest.approx(0.0, abs=1e-12)
    assert rate(0, 20).high == pytest.approx(0.161125, abs=1e-6)
    assert rate(20, 20).high == pytest.approx(1.0, abs=1e-12)


def test_rate_other_confidence_level() -> None:
    """The confidence keyword changes the interval as the Wilson formula says (90% is narrower)."""
    found = rate(37, 120, confidence=0.90)
    low, high = wilson(37, 120, 0.90)
    assert found.low == pytest.approx(low, abs=1e-9)
    assert found.high == pytest.approx(high, abs=1e-9)
    wide = rate(37, 120)
    assert wide.low is not None and wide.high is not None and found.low is not None and found.high is not None
    assert wide.low < found.low and found.high < wide.high


def test_rate_of_nothing_has_none_fields() -> None:
    """n = 0 gives a Rate with rate, low and high all None."""
    assert rate(0, 0) == Rate(k=0, n=0, rate=None, low=None, high=None)
    assert rate(0, 0).model_dump() == {"k": 0, "n": 0, "rate": None, "low": None, "high": None}


def test_rate_dumps_every_field() -> None:
    """The model dumps k, n, rate, low, high as plain values."""
    found = rate(37, 120).model_dump()
    assert set(found) == {"k", "n", "rate", "low", "high"}
    assert found["k"] == 37 and found["n"] == 120
    assert found["rate"] == pytest.approx(37 / 120)


def test_survival_table_matches_hand_computed_kaplan_meier() -> None:
    """KM with a tie between an event and a censoring: S(t) = Π over event times of (1 − d/n), censored at risk."""
    times = [1, 2, 2, 3, 5, 5]
    observed = [True, True, False, True, False, True]
    # t=1: 6 at risk, 1 event → 5/6
    # t=2: 5 at risk (the one censored at 2 is still at risk), 1 event → 5/6 · 4/5 = 2/3
    # t=3: 3 at risk, 1 event → 2/3 · 2/3 = 4/9
    # t=5: 2 at risk, 1 event (the other censored) → 4/9 · 1/2 = 2/9
    expected = [(1, 6, 1, 5 / 6), (2, 5, 1, 2 / 3), (3, 3, 1, 4 / 9), (5, 2, 1, 2 / 9)]
    rows = survival_table(times, observed)
    assert [(r.turn, r.at_risk, r.events) for r in rows] == [e[:3] for e in expected]
    for row, (_, _, _, surviving) in zip(rows, expected, strict=True):
        assert row.surviving == pytest.approx(surviving, abs=1e-12)


def test_survival_table_input_order_does_not_matter() -> None:
    """Rows come out sorted by turn whatever the order of the input pairs."""
    times = [5, 2, 1, 5, 3, 2]
    observed = [False, True, True, True, True, False]
    assert survival_table(times, observed) == survival_table([1, 2, 2, 3, 5, 5], [True, True, False, True, False, True])


def test_survival_table_all_censored_stays_at_one() -> None:
    """With no events, every row has zero events and survival 1."""
    rows = survival_table([2, 3, 3], [False, False, False])
    assert rows == [
        SurvivalRow(turn=2, at_risk=3, events=0, surviving=1.0),
        SurvivalRow(turn=3, at_risk=2, events=0, surviving=1.0),
    ]


def test_survival_table_all_observed_reaches_zero() -> None:
    """With every time an event, survival falls to 0 at the last time."""
    rows = survival_table([1, 2, 2, 4], [True, True, True, True])
    assert [(r.turn, r.at_risk, r.events) for r in rows] == [(1, 4, 1), (2, 3, 2), (4, 1, 1)]
    assert [r.surviving for r in rows] == pytest.approx([3 / 4, 1 / 4, 0.0], abs=1e-12)


def test_survival_table_of_nothing_is_empty() -> None:
    """No times give no rows."""
    assert survival_table([], []) == []


def _numpy_cluster_bootstrap(k: list[int], n: list[int], seed: int, b: int = 20_000) -> tuple[float, float]:
    """The cluster bootstrap written out with numpy alone: resample clusters, pool, take percentiles."""
    rng = np.random.default_rng(seed)
    ks, ns = np.asarray(k, float), np.asarray(n, float)
    picks = rng.integers(0, len(ks), size=(b, len(ks)))
    pooled = ks[picks].sum(axis=1) / ns[picks].sum(axis=1)
    return float(np.percentile(pooled, 2.5)), float(np.percentile(pooled, 97.5))


def test_clustered_rate_matches_an_independent_cluster_bootstrap() -> None:
    """Point estimate is the pooled rate; the interval agrees with a numpy-only bootstrap within Monte-Carlo error."""
    k, n = [0, 1, 5, 6, 0, 2, 4, 6, 1, 0], [6, 5, 6, 6, 7, 5, 8, 6, 5, 6]
    found = clustered_rate(k, n, seed=3)
    low, high = _numpy_cluster_bootstrap(k, n, seed=11)
    assert (found.k, found.n, found.clusters, found.method) == (25, 60, 10, "cluster_bootstrap")
    assert found.rate == pytest.approx(25 / 60)
    assert found.low == pytest.approx(low, abs=0.02)
    assert found.high == pytest.approx(high, abs=0.02)


def test_clustered_rate_is_wider_than_wilson_when_clusters_are_all_or_nothing() -> None:
    """Dialogues that either always or never leak carry the information of one trial each, not six."""
    k, n = [6, 0, 6, 0, 0, 6, 0, 0, 6, 0], [6] * 10
    clustered = clustered_rate(k, n, seed=0)
    naive = rate(sum(k), sum(n))
    assert clustered.high is not None and clustered.low is not None
    assert naive.high is not None and naive.low is not None
    assert clustered.high - clustered.low > 1.5 * (naive.high - naive.low)


def test_clustered_rate_falls_back_to_wilson_on_clusters_without_variation() -> None:
    """No events in 20 dialogues: the interval is Wilson(0, 20), not a zero-width bootstrap [0, 0]."""
    found = clustered_rate([0] * 20, [5] * 20, seed=0)
    wilson_low, wilson_high = wilson(0, 20)
    assert found.method == "wilson_on_clusters"
    assert found.rate == 0.0
    assert found.low == pytest.approx(wilson_low)
    assert found.high == pytest.approx(wilson_high)


def test_clustered_rate_edge_cases() -> None:
    """No trials gives no rate; empty clusters are dropped; mismatched lengths are a programming error."""
    assert clustered_rate([], [], seed=0).rate is None
    assert clustered_rate([1, 0], [0, 0], seed=0).rate is None
    assert clustered_rate([1, 2, 0], [2, 4, 0], seed=0).clusters == 2
    with pytest.raises(ValueError, match="one entry per cluster"):
        clustered_rate([1], [1, 2], seed=0)


def _numpy_difference(
    a: tuple[list[int], list[int]], b: tuple[list[int], list[int]], seed: int, *, paired: bool, reps: int = 20_000
) -> tuple[float, float]:
    """b − a pooled rates under a numpy-only cluster bootstrap (one draw for both groups when paired)."""
    rng = np.random.default_rng(seed)
    ka, na, kb, nb = (np.asarray(x, float) for x in (*a, *b))
    pa = rng.integers(0, len(ka), size=(reps, len(ka)))
    pb = pa if paired else rng.integers(0, len(kb), size=(reps, len(kb)))
    deltas = kb[pb].sum(1) / nb[pb].sum(1) - ka[pa].sum(1) / na[pa].sum(1)
    return float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))


def test_clustered_difference_matches_an_independent_bootstrap() -> None:
    """Unpaired: single replies vs dialogues of 4–7 replies; the interval agrees with numpy's within MC error."""
    single = ([1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0], [1] * 12)
    multi = ([2, 0, 5, 1, 3, 0, 4, 2], [6, 4, 7, 5, 6, 4, 7, 6])
    found = clustered_difference(*single, *multi, seed=5)
    low, high = _numpy_difference(single, multi, seed=9, paired=False)
    assert found.delta == pytest.approx(17 / 45 - 4 / 12)
    assert (found.a.n, found.b.n, found.b.clusters, found.method) == (12, 45, 8, "cluster_bootstrap")
    assert found.low == pytest.approx(low, abs=0.03)
    assert found.high == pytest.approx(high, abs=0.03)


def test_paired_clustered_difference_matches_an_independent_bootstrap() -> None:
    """Paired: each dialogue's first exchange vs its later ones, resampled together."""
    first = ([1, 0, 0, 1, 0, 0, 1, 0, 0, 0], [1] * 10)
    later = ([0, 1, 1, 0, 1, 0, 0, 1, 1, 0], [0, 3, 2, 0, 5, 6, 0, 1, 4, 6])
    found = clustered_difference(*first, *later, seed=2, paired=True)
    low, high = _numpy_difference(first, later, seed=4, paired=True)
    assert found.delta == pytest.approx(5 / 27 - 3 / 10)
    assert found.paired and found.method == "cluster_bootstrap"
    assert found.low == pytest.approx(low, abs=0.03)
    assert found.high == pytest.approx(high, abs=0.03)


def test_clustered_difference_falls_back_to_newcombe() -> None:
    """No variation at all (0 events everywhere): Newcombe's interval from the two Wilson-on-clusters intervals."""
    found = clustered_difference([0] * 10, [1] * 10, [0] * 8, [5] * 8, seed=0)
    a_low, a_high = wilson(0, 10)
    b_low, b_high = wilson(0, 8)
    assert found.method == "newcombe_on_clusters" and found.delta == 0.0
    assert found.low == pytest.approx(-math.hypot(0 - b_low, a_high - 0))
    assert found.high == pytest.approx(math.hypot(b_high - 0, 0 - a_low))
    assert clustered_difference([], [], [1], [2], seed=0).delta is None


def test_discrete_hazard_counts_every_exchange() -> None:
    """h_t hand-counted at every t; first exchange vs the pooled later ones, their paired difference."""
    times = [1, 3, 3, 2, 4, 4, 1, 2]
    observed = [True, True, False, False, True, False, False, True]
    found = discrete_hazard(times, observed, seed=1)
    per_turn = [(r.turn, r.at_risk, r.events) for r in found.per_turn]
    assert per_turn == [(1, 8, 1), (2, 6, 1), (3, 4, 1), (4, 2, 1)]
    assert found.per_turn[2].hazard == pytest.approx(1 / 4)
    assert (found.per_turn[2].low, found.per_turn[2].high) == pytest.approx(wilson(1, 4))
    first, later = found.first, found.later
    assert (first.k, first.n) == (1, 8)
    # exposures after exchange 1: 6 + 4 + 2 = 12 (at risk at 2, 3, 4), 3 first harms among them
    assert (later.k, later.n) == (3, 12)
    difference = found.later_minus_first
    assert difference.delta == pytest.approx(3 / 12 - 1 / 8)
    assert difference.low is not None and difference.delta is not None and difference.high is not None
    assert difference.low < difference.delta < difference.high


def test_discrete_hazard_is_flat_on_a_constant_hazard_and_rising_on_escalation() -> None:
    """Simulated first-harm times: constant 20% per exchange → the contrast covers 0; 10% then +15 pp → above 0."""
    rng = np.random.default_rng(7)

    def simulate(hazards: list[float], dialogues: int = 300) -> tuple[list[int], list[bool]]:
        times, observed = [], []
        for _ in range(dialogues):
            for t, h in enumerate(hazards, 1):
                if rng.random() < h:
                    times.append(t)
                    observed.append(True)
                    break
            else:
                times.append(len(hazards))
                observed.append(False)
        return times, observed

    flat = discrete_hazard(*simulate([0.2] * 6), seed=0).later_minus_first
    rising = discrete_hazard(*simulate([0.1, 0.25, 0.4, 0.55, 0.7, 0.85]), seed=0).later_minus_first
    assert flat.low is not None and flat.high is not None and rising.low is not None
    assert flat.low <= 0.0 <= flat.high
    assert rising.low > 0.1
