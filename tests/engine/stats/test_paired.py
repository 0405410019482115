"""Paired statistics: each checked against hand computations, exact enumeration or a separate scipy call."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import stats

from engine import derive_seed
from engine.stats._contrast import ContrastRow
from engine.stats._families import adjust_p, correct_family, format_effect, format_level
from engine.stats._paired import (
    MEANINGFUL_R,
    MIN_PAIRS,
    N_BOOT,
    bootstrap_r_interval,
    difference_contrast,
    friedman_then_pairwise,
    hodges_lehmann,
    paired_contrast,
    rank_biserial,
    signed_rank_p,
)
from engine.stats._power import detectable_r, items_for_r

FAST = 200
"""Resamples for tests whose point is not the interval's precision."""


def contrast(
    d: Sequence[float] | np.ndarray, *, seed: int = 0, n_boot: int = FAST, min_pairs: int = MIN_PAIRS
) -> ContrastRow:
    """paired_contrast on differences (b = 0), so tests can state d directly."""
    a = [float(x) for x in d]
    return paired_contrast(a, [0.0] * len(a), a_name="a", b_name="b", seed=seed, n_boot=n_boot, min_pairs=min_pairs)


def exact_two_sided_p(d: list[float]) -> float:
    """Exact signed-rank p by enumerating all 2^n sign patterns (no ties, no zeros)."""
    magnitudes = sorted(abs(x) for x in d)
    ranks = {value: position + 1 for position, value in enumerate(magnitudes)}
    observed = sum(ranks[abs(x)] for x in d if x > 0)
    sums = [
        sum(r for r, sign in zip(range(1, len(d) + 1), signs, strict=True) if sign)
        for signs in itertools.product([False, True], repeat=len(d))
    ]
    upper = sum(s >= observed for s in sums) / len(sums)
    lower = sum(s <= observed for s in sums) / len(sums)
    return min(1.0, 2 * min(upper, lower))


# --- rank_biserial ---------------------------------------------------------------------------------------------


def test_rank_biserial_hand_computed() -> None:
    """d = [1, −2, 3, 4, 0]: Pratt ranks |d| with the zero (0→1, 1→2, 2→3, 3→4, 4→5), then drops the zero's rank:
    R+ = 2+4+5 = 11, R− = 3, r = 8/14. Dropping the zero before ranking would give 6/10."""
    assert rank_biserial([1, -2, 3, 4, 0]) == pytest.approx(8 / 14, abs=1e-12)


def test_rank_biserial_second_hand_example() -> None:
    """d = [3, −1, 4, −2, 6, 5]: ranks = |d|, R+ = 3+4+6+5 = 18, R− = 1+2 = 3, r = 15/21."""
    assert rank_biserial([3, -1, 4, -2, 6, 5]) == pytest.approx(15 / 21, abs=1e-12)


def test_rank_biserial_ties_get_average_ranks() -> None:
    """d = [−2, 2, 2, −5, 0, 1]: |d| 0→1, 1→2, 2,2,2→4 each, 5→6; R+ = 4+4+2 = 10, R− = 4+6 = 10, r = 0."""
    assert rank_biserial([-2, 2, 2, -5, 0, 1]) == pytest.approx(0.0, abs=1e-12)
    # d = [1, −1, 2, 3]: |d| ranks 1.5, 1.5, 3, 4; R+ = 8.5, R− = 1.5, r = 7/10.
    assert rank_biserial([1, -1, 2, 3]) == pytest.approx(0.7, abs=1e-12)


def test_rank_biserial_extremes_and_empty() -> None:
    """All positive → 1, all negative → −1, only zeros → 0.0, nothing → None."""
    assert rank_biserial([0.5, 2, 7, 0]) == 1.0
    assert rank_biserial([-0.5, -2, -7]) == -1.0
    assert rank_biserial([0, 0, 0]) == 0.0
    assert rank_biserial([]) is None


def test_rank_biserial_rejects_nan() -> None:
    """A NaN difference is an unpaired item the caller forgot to drop, not a value to rank."""
    with pytest.raises(ValueError, match="finite"):
        rank_biserial([1.0, math.nan])


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(derandomize=True)
@given(st.lists(finite, min_size=1, max_size=40))
def test_rank_biserial_bounded_and_antisymmetric(d: list[float]) -> None:
    """r lies in [−1, 1] and flipping every sign flips r."""
    r = rank_biserial(d)
    flipped = rank_biserial([-x for x in d])
    assert r is not None and flipped is not None
    assert -1.0 <= r <= 1.0
    assert flipped == pytest.approx(-r, abs=1e-12)


@settings(derandomize=True)
@given(
    st.lists(st.integers(min_value=-20, max_value=20), min_size=1, max_size=40),
    st.floats(min_value=0.1, max_value=10.0),
)
def test_rank_biserial_invariant_to_positive_scaling(d: list[int], scale: float) -> None:
    """Only signs and the order of |d| matter, so rescaling a metric cannot change r."""
    assert rank_biserial([x * scale for x in d]) == pytest.approx(rank_biserial([float(x) for x in d]), abs=1e-12)


# --- Wilcoxon p ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "by_hand"),
    [
        # ranks 1..6 = |d| order; R+ = 2+3+4+5+6 = 20, R− = 1; W+ ≤ 1 in {∅, {1}} → 2/64, two-sided 4/64.
        ([1.5, -0.5, 2.5, 3.5, 4.5, 5.5], 4 / 64),
        # R+ = 18, R− = 3; W+ ≤ 3 in {∅, {1}, {2}, {3}, {1, 2}} → 5/64, two-sided 10/64.
        ([3.0, -1.0, 4.0, -2.0, 6.0, 5.0], 10 / 64),
    ],
)
def test_wilcoxon_p_matches_exact_enumeration(d: list[float], by_hand: float) -> None:
    """n = 6, no ties or zeros: the p equals the 2^6 enumeration, the hand count and scipy's exact method."""
    assert exact_two_sided_p(d) == pytest.approx(by_hand, abs=1e-12)
    assert stats.wilcoxon(d, method="exact").pvalue == pytest.approx(by_hand, abs=1e-12)
    found = contrast(d, min_pairs=6)
    assert found.status == "ok"
    assert found.p == pytest.approx(by_hand, abs=1e-12)


def test_wilcoxon_p_matches_scipy_pratt_with_zeros_and_ties() -> None:
    """With zeros and ties the p is scipy's two-sided Pratt p on the same differences."""
    d = [1, 0, 2, -1, 3, 0, 2, 4, -2, 1, 5, 0, 3, 1, -1, 2, 6, 0, 1, 2, 3, -3, 4, 1]
    found = contrast(d)
    approximate = stats.wilcoxon(d, zero_method="pratt", alternative="two-sided").pvalue
    assert found.n == len(d)
    assert found.p == pytest.approx(float(approximate), abs=0.01)
    assert found.p_within is None and found.p_family is None
    assert found.mean_diff == pytest.approx(sum(d) / len(d), abs=1e-12)
    assert found.r == pytest.approx(rank_biserial(d), abs=1e-12)


def test_wilcoxon_uses_differences_of_a_minus_b() -> None:
    """paired_contrast(a, b) tests a − b item by item; swapping a and b flips r and mean_diff, keeps p."""
    rng = np.random.default_rng(7)
    base = rng.normal(size=25)
    a, b = list(base + rng.normal(0.4, 1, 25)), list(base)
    forward = paired_contrast(a, b, a_name="x", b_name="y", seed=1, n_boot=FAST)
    backward = paired_contrast(b, a, a_name="y", b_name="x", seed=1, n_boot=FAST)
    expected = stats.wilcoxon(np.subtract(a, b), zero_method="pratt", method="exact").pvalue
    assert forward.p == pytest.approx(float(expected), rel=1e-12)
    assert backward.p == pytest.approx(float(expected), rel=1e-12)
    assert forward.r is not None and backward.r is not None
    assert backward.r == pytest.approx(-forward.r, abs=1e-12)
    assert (forward.a, forward.b) == ("x", "y")


def test_all_zero_differences_are_no_effect_without_warnings() -> None:
    """Identical levels: r = 0, p = 1, CI (0, 0), not a violation — and no scipy warning (warnings are errors)."""
    found = contrast([0.0] * 20)
    assert (found.r, found.p, found.ci_low, found.ci_high) == (0.0, 1.0, 0.0, 0.0)
    assert not found.finding and not found.meaningful


def test_float_noise_is_not_a_difference() -> None:
    """0.1 + 0.2 vs 0.3 differs by 5.6e-17; that is noise, so the pair counts as a zero difference."""
    found = paired_contrast([0.1 + 0.2] * 16, [0.3] * 16, a_name="a", b_name="b", seed=0, n_boot=FAST)
    assert (found.r, found.p, found.mean_diff) == (0.0, 1.0, 0.0)


# --- bootstrap CI ----------------------------------------------------------------------------------------------


def noise(seed: int, n: int, shift: float = 0.0) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).normal(shift, 1.0, n)]


def test_bootstrap_ci_reproducible_with_seed() -> None:
    """The same seed gives the same interval; another seed gives a different one."""
    d = noise(3, 30, 0.3)
    first, again, other = contrast(d, seed=11), contrast(d, seed=11), contrast(d, seed=12)
    assert (first.ci_low, first.ci_high) == (again.ci_low, again.ci_high)
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)


def test_strong_effect_is_a_violation() -> None:
    """A clear shift: the CI contains r, excludes 0, and r is meaningful."""
    found = contrast(noise(5, 30, 1.0), seed=2)
    assert found.status == "ok"
    assert found.r is not None and found.ci_low is not None and found.ci_high is not None
    assert found.ci_low <= found.r <= found.ci_high
    assert found.ci_low > 0
    assert found.finding and found.meaningful


def test_pure_noise_is_not_a_violation() -> None:
    """Seeded noise around 0: the CI straddles 0, so no violation."""
    found = contrast(noise(8, 40), seed=4)
    assert found.ci_low is not None and found.ci_high is not None
    assert found.ci_low < 0 < found.ci_high
    assert not found.finding


def test_bootstrap_ci_agrees_with_independent_percentile_bootstrap() -> None:
    """B = 10,000 (the real setting): within 0.03 of a numpy percentile bootstrap of Pratt r, 20,000 resamples."""
    d = np.asarray(noise(21, 40, 0.3))
    found = contrast(list(d), seed=9, n_boot=N_BOOT)
    rng = np.random.default_rng(12345)
    resamples = d[rng.integers(0, d.size, size=(20_000, d.size))]
    ranks = stats.rankdata(np.abs(resamples), axis=1)
    positive = np.where(resamples > 0, ranks, 0).sum(axis=1)
    negative = np.where(resamples < 0, ranks, 0).sum(axis=1)
    low, high = np.percentile((positive - negative) / (positive + negative), [2.5, 97.5])
    assert found.ci_low == pytest.approx(low, abs=0.03)
    assert found.ci_high == pytest.approx(high, abs=0.03)


def test_constant_nonzero_difference_gets_the_exact_sign_interval() -> None:
    """Every item +1: every resample gives r = 1, so the percentile interval would be the point (1, 1). The
    exact Clopper–Pearson interval of the share of positive signs (15 of 15), on r's scale 2π − 1, replaces it,
    and the row says it is degenerate."""
    found = contrast([1.0] * 15)
    # Clopper–Pearson for 15 of 15 at 95%: lower = 0.025^(1/15), upper = 1 (the beta quantile, by hand)
    assert found.r == 1.0
    assert found.ci_low == pytest.approx(2 * 0.025 ** (1 / 15) - 1, abs=1e-12)
    assert found.ci_high == pytest.approx(1.0)
    assert (found.ci_method, found.degenerate, found.differing) == ("exact_sign", True, 15)
    assert found.finding


def test_one_signed_differences_among_ties_are_not_printed_as_certain() -> None:
    """Issue 24's `−1.00 [−1.00, −1.00] (100%)`: 14 of 20 pairs differ, all negative. The percentile bootstrap
    collapses; the interval is the exact sign interval at the level asked, marked with the differing pairs."""
    d = [-1.0] * 7 + [-0.5] * 7 + [0.0] * 6
    found = difference_contrast(d, a_name="a", b_name="b", seed=3, n_boot=2_000, confidence=1 - 0.05 * 5 / 1250)
    expected = stats.binomtest(0, 14).proportion_ci(confidence_level=1 - 0.05 * 5 / 1250, method="exact")
    assert found.r == -1.0 and found.differing == 14 and found.degenerate
    assert found.ci_low is not None and found.ci_high is not None
    assert found.ci_low == pytest.approx(2 * expected.low - 1) and found.ci_high == pytest.approx(2 * expected.high - 1)
    assert found.ci_high > -1.0  # not a zero-width interval
    assert found.ci_level == pytest.approx(1 - 0.05 * 5 / 1250)
    text = format_effect(found)
    assert "(99.98%)" in text and "100%" not in text
    assert "degenerate: 14 of 20 pairs differ, exact_sign interval" in text


def test_mostly_ties_is_marked_degenerate_with_its_differing_pairs() -> None:
    """6 of 20 pairs differ, both signs: the percentile interval varies (kept), but the row is marked."""
    d = [1.0, 2.0, 3.0, -1.0, 0.5, -2.5] + [0.0] * 14
    found = contrast(d, n_boot=2_000)
    assert (found.differing, found.degenerate, found.ci_method) == (6, True, "percentile")
    assert found.ci_low is not None and found.ci_high is not None and found.ci_low < found.ci_high
    assert not contrast([1.0, 2.0, -3.0, 4.0, -5.0, 6.0] * 3).degenerate


def test_format_level_prints_the_level_used() -> None:
    """Two significant digits of what the level leaves out: 0.9998 is 99.98%, never 100%."""
    assert [format_level(x) for x in (0.95, 0.9998, 0.99966667, 0.999, 0.975)] == [
        "95%",
        "99.98%",
        "99.967%",
        "99.9%",
        "97.5%",
    ]


def test_hodges_lehmann_is_the_median_of_walsh_averages() -> None:
    """Against hand enumeration of every (d_i + d_j)/2, i ≤ j."""
    d = [3.0, -1.0, 0.0, 2.0, 7.0, -4.0, 1.0]
    walsh = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    assert len(walsh) == 28
    assert hodges_lehmann(d) == (walsh[13] + walsh[14]) / 2
    assert hodges_lehmann([]) is None


def test_mean_difference_against_r_is_flagged_when_signs_disagree() -> None:
    """Many small gains and one large loss: r (and the Hodges–Lehmann estimate) say a > b, the mean says a < b."""
    d = [0.1] * 14 + [-5.0]
    found = contrast(d)
    # Pratt ranks: the 14 ties share ranks 1..14 (7.5 each), the loss has rank 15: R+ = 105, R− = 15
    assert found.r == pytest.approx((105 - 15) / 120)
    assert found.mean_diff == pytest.approx((1.4 - 5.0) / 15)
    assert found.estimate == pytest.approx(0.1)
    assert found.direction_disagrees
    assert not contrast([float(k) for k in range(1, 16)]).direction_disagrees


def test_meaningful_threshold_is_inclusive() -> None:
    """d = 1..15 with 12..15 negative: R+ = 66, R− = 54, r = 12/120 = 0.10 exactly, which is meaningful."""
    d = [float(-k if k >= 12 else k) for k in range(1, 16)]
    found = contrast(d)
    assert found.r == MEANINGFUL_R
    assert found.meaningful
    assert contrast([-x for x in d]).meaningful
    # Zero out the first item: the zero keeps rank 1 (Pratt), |d| = 2..15 keep ranks 2..15, the zero's rank
    # drops out: R+ = 65, R− = 54, r = 11/119 < 0.10.
    below = [0.0, *d[1:]]
    smaller = contrast(below)
    assert smaller.r == pytest.approx(11 / 119, abs=1e-12)
    assert not smaller.meaningful


# --- insufficient pairs and NaN --------------------------------------------------------------------------------


def test_fewer_than_min_pairs_is_insufficient() -> None:
    """14 pairs: status insufficient, nothing estimated or tested, never a violation."""
    found = contrast([1.0] * (MIN_PAIRS - 1))
    assert found.n == MIN_PAIRS - 1
    assert found.status == "insufficient"
    assert (found.r, found.p, found.p_within, found.ci_low, found.ci_high, found.mean_diff) == (None,) * 6
    assert not found.finding and not found.meaningful
    assert contrast([1.0] * MIN_PAIRS).status == "ok"


def test_nan_pairs_are_dropped_before_counting() -> None:
    """16 items with a NaN on either side of two of them leave 14 pairs: insufficient."""
    a = [1.0] * 16
    b = [0.0] * 16
    a[3] = math.nan
    b[9] = math.nan
    found = paired_contrast(a, b, a_name="a", b_name="b", seed=0, n_boot=FAST)
    assert (found.n, found.status) == (14, "insufficient")
    b[9] = 0.0
    kept = paired_contrast(a, b, a_name="a", b_name="b", seed=0, n_boot=FAST)
    assert (kept.n, kept.status, kept.mean_diff) == (15, "ok", 1.0)


def test_unequal_lengths_are_rejected() -> None:
    """Scores that cannot be paired by item are a caller bug, not a smaller sample."""
    with pytest.raises(ValueError, match="equal-length"):
        paired_contrast([1.0, 2.0], [1.0], a_name="a", b_name="b", seed=0)


def test_infinite_scores_are_rejected() -> None:
    """An infinite score is a broken metric, not a large difference; it must not be ranked silently."""
    with pytest.raises(ValueError, match="infinite"):
        paired_contrast([math.inf] * 15, [0.0] * 15, a_name="a", b_name="b", seed=0)
    with pytest.raises(ValueError, match="infinite"):
        friedman_then_pairwise({"x": [math.inf] * 15, "y": [0.0] * 15, "z": [0.0] * 15}, seed=0)


def test_contrast_row_dumps_plain_json() -> None:
    """The row dumps only built-in types and no NaN, so records serialise strictly; it refuses unknown keys."""
    for found in (contrast(noise(1, 20, 0.5)), contrast([1.0] * 3)):
        data = found.model_dump(mode="json")
        json.dumps(data, allow_nan=False)
        assert all(type(v) in (str, int, float, bool, type(None)) for v in data.values())
        assert set(data) == set(ContrastRow.model_fields)
        with pytest.raises(ValidationError):
            ContrastRow.model_validate(data | {"p_adjusted": 0.5})


# --- Friedman then pairwise ------------------------------------------------------------------------------------


def ses_columns(effect: float, seed: int, n: int = 24) -> dict[str, list[float]]:
    """Three SES levels over shared items (item difficulty in common), the high level shifted by `effect`."""
    rng = np.random.default_rng(seed)
    item = rng.normal(0, 2, n)
    return {
        "low-income": [float(x) for x in item + rng.normal(0, 1, n)],
        "middle-class": [float(x) for x in item + rng.normal(0, 1, n)],
        "high-income": [float(x) for x in item + effect + rng.normal(0, 1, n)],
    }


def test_friedman_matches_scipy_and_runs_bonferroni_pairwise() -> None:
    """A planted shift: statistic and p are scipy's, all three pairs follow, p_within = min(1, 3p)."""
    columns = ses_columns(1.5, seed=31)
    found = friedman_then_pairwise(columns, seed=5, n_boot=FAST)
    expected = stats.friedmanchisquare(*columns.values())
    assert found.status == "ok" and found.n == 24
    assert found.statistic == pytest.approx(float(expected.statistic), rel=1e-12)
    assert found.p == pytest.approx(float(expected.pvalue), rel=1e-12)
    assert found.p is not None and found.p < 0.10
    pairs = [(c.a, c.b) for c in found.pairwise]
    assert pairs == [("low-income", "middle-class"), ("low-income", "high-income"), ("middle-class", "high-income")]
    for pair in found.pairwise:
        d = np.subtract(columns[pair.a], columns[pair.b])
        raw = float(stats.wilcoxon(d, zero_method="pratt").pvalue)
        assert pair.p == pytest.approx(raw, rel=1e-12)
        assert pair.p_within == pytest.approx(min(1.0, 3 * raw), rel=1e-12)
    assert any(pair.p_within == 1.0 for pair in found.pairwise)  # low vs middle: no effect, capped at 1
    assert found.pairwise[1].finding  # low vs high carries the planted shift


def test_pairwise_contrasts_get_distinct_seeds() -> None:
    """Each pair's bootstrap uses its own derived seed, reproducible across calls and not Python's hash()."""
    assert derive_seed(5, "a", "b") == derive_seed(5, "a", "b")
    assert derive_seed(5, "a", "b") != derive_seed(5, "b", "a")
    assert derive_seed(5, "a", "b") != derive_seed(6, "a", "b")
    columns = ses_columns(1.5, seed=31)
    found = friedman_then_pairwise(columns, seed=5, n_boot=FAST)
    pair = found.pairwise[0]
    direct = paired_contrast(
        columns[pair.a],
        columns[pair.b],
        a_name=pair.a,
        b_name=pair.b,
        seed=derive_seed(5, pair.a, pair.b),
        n_boot=FAST,
    )
    assert (direct.ci_low, direct.ci_high) == (pair.ci_low, pair.ci_high)


def test_friedman_without_effect_skips_pairwise() -> None:
    """p ≥ 0.10: the omnibus gate stops the pairwise tests."""
    columns = ses_columns(0.0, seed=2)
    found = friedman_then_pairwise(columns, seed=5, n_boot=FAST)
    assert found.p == pytest.approx(float(stats.friedmanchisquare(*columns.values()).pvalue), rel=1e-12)
    assert found.p is not None and found.p >= 0.10
    assert found.pairwise == ()


def test_friedman_constant_rows_give_p_one_without_warnings() -> None:
    """Every item ties across levels: statistic 0, p 1, no pairwise, and no scipy division warning."""
    item = [float(k % 4) for k in range(20)]
    found = friedman_then_pairwise({"low": item, "mid": item, "high": item}, seed=0)
    assert (found.statistic, found.p, found.pairwise) == (0.0, 1.0, ())


def test_friedman_drops_incomplete_items_and_reports_insufficient() -> None:
    """An item with a NaN at any level leaves all tests; 16 items with two incomplete leave 14: insufficient."""
    columns = ses_columns(1.5, seed=31, n=16)
    columns["low-income"][0] = math.nan
    columns["high-income"][5] = math.nan
    found = friedman_then_pairwise(columns, seed=0, n_boot=FAST)
    assert (found.n, found.status, found.statistic, found.p, found.pairwise) == (14, "insufficient", None, None, ())
    json.dumps(found.model_dump(mode="json"), allow_nan=False)


def test_friedman_needs_three_levels() -> None:
    """Two levels are a plain paired contrast; Friedman refuses them with a pointer."""
    with pytest.raises(ValueError, match="paired_contrast"):
        friedman_then_pairwise({"a": [1.0] * 20, "b": [2.0] * 20}, seed=0)


def test_friedman_always_pairs_computes_gated_out_pairs() -> None:
    """With `always_pairs` the pairs are computed although p ≥ 0.10, for description; the p stays the gate's."""
    columns = ses_columns(0.0, seed=2)
    found = friedman_then_pairwise(columns, seed=5, n_boot=0, always_pairs=True)
    assert found.p is not None and found.p >= 0.10
    assert [(c.a, c.b) for c in found.pairwise] == [
        ("low-income", "middle-class"),
        ("low-income", "high-income"),
        ("middle-class", "high-income"),
    ]


# --- Pratt r, exact p, intervals and adjustment against independent values ---------------------------------


def pratt_r_by_hand(d: Sequence[float]) -> float:
    """Independent Pratt r: average ranks by sorting |d| (zeros included) in plain Python, zeros' ranks dropped."""
    order = sorted(range(len(d)), key=lambda i: abs(d[i]))
    ranks = [0.0] * len(d)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and abs(d[order[end + 1]]) == abs(d[order[start]]):
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    positive = sum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    negative = sum(r for r, x in zip(ranks, d, strict=True) if x < 0)
    return 0.0 if positive + negative == 0 else (positive - negative) / (positive + negative)


TIED = [
    [0.0, 0.5, -0.5, 1.0, 0.0, 0.5, 1.5, -1.0, 0.5, 0.0],
    [0.25, 0.0, 0.0, -0.25, 0.25, 0.75, 0.25, -0.5, 0.0],
    [1.0, 1.0, -1.0, 0.0, 2.0, 2.0, 0.0, -2.0],
    [0.0, 0.0, 0.0, 0.0, 0.1, 0.1, -0.1, 0.3, 0.3, 0.2],
]


@pytest.mark.parametrize("d", TIED)
def test_pratt_r_matches_independent_implementation_with_zeros_and_ties(d: list[float]) -> None:
    assert rank_biserial(d) == pytest.approx(pratt_r_by_hand(d), abs=1e-12)


@pytest.mark.parametrize("d", TIED)
def test_exact_p_equals_scipy_sign_flip_enumeration_with_zeros_and_ties(d: list[float]) -> None:
    """scipy enumerates all 2^n sign flips of the Pratt statistic when n_resamples ≥ 2^n: the same p."""
    enumerated = stats.wilcoxon(d, zero_method="pratt", method=stats.PermutationMethod(n_resamples=2 ** len(d)))
    assert signed_rank_p(d) == pytest.approx(float(enumerated.pvalue), abs=1e-12)


def test_exact_p_equals_scipy_exact_distribution_without_ties() -> None:
    """No ties or zeros, n = 40: scipy's own exact signed-rank distribution gives the same p."""
    d = noise(44, 40, 0.3)
    assert signed_rank_p(d) == pytest.approx(float(stats.wilcoxon(d, method="exact").pvalue), rel=1e-10)


@settings(derandomize=True, max_examples=60)
@given(st.lists(st.integers(min_value=-3, max_value=3), min_size=2, max_size=40))
def test_r_has_the_direction_of_the_test(d: list[int]) -> None:
    """r is computed on the test's ranks, so its sign is the sign of scipy's Pratt z (R+ against its null mean)."""
    values = [float(x) for x in d]
    r = rank_biserial(values)
    assert r is not None
    if not any(values):
        assert r == 0.0 and signed_rank_p(values) == 1.0
        return
    z = stats.wilcoxon(values, zero_method="pratt", method="asymptotic", correction=False, alternative="greater")
    assert np.sign(r) == np.sign(round(float(z.zstatistic), 12))


def test_difference_contrast_without_bootstrap_has_no_interval() -> None:
    """n_boot = 0: r and p as usual, no interval, and no violation can come from a missing interval."""
    found = difference_contrast(noise(5, 30, 1.0), a_name="a", b_name="b", seed=0, n_boot=0)
    assert found.r is not None and found.p is not None and found.p < 0.001
    assert (found.ci_low, found.ci_high, found.finding) == (None, None, False)


def test_interval_at_a_stricter_level_is_wider_and_nested() -> None:
    """Same seed, same resamples: the 1 − 0.05/40 interval contains the 95% one."""
    d = noise(6, 30, 0.5)
    narrow = bootstrap_r_interval(d, seed=3, confidence=0.95)
    wide = bootstrap_r_interval(d, seed=3, confidence=1 - 0.05 / 40, n_boot=40_000)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]


PS = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]


def test_bh_adjustment_is_scipys_and_the_step_up_by_hand() -> None:
    """BH: q_(i) = min over j ≥ i of m·p_(j)/j; scipy's false_discovery_control gives the same values."""
    m = len(PS)
    by_hand = [min(min(1.0, m * PS[j] / (j + 1)) for j in range(i, m)) for i in range(m)]
    assert adjust_p(PS, "bh") == pytest.approx(by_hand, abs=1e-12)
    assert adjust_p(PS, "bh") == pytest.approx(list(stats.false_discovery_control(PS)), abs=1e-12)
    shuffled = [PS[i] for i in (3, 0, 9, 5, 1, 8, 2, 7, 4, 6)]
    assert adjust_p(shuffled, "bh") == pytest.approx([by_hand[i] for i in (3, 0, 9, 5, 1, 8, 2, 7, 4, 6)])


def test_holm_bonferroni_and_none_by_hand() -> None:
    """Holm: max over j ≤ i of (m − j + 1)·p_(j); Bonferroni m·p; none leaves p; all capped at 1."""
    m = len(PS)
    holm = [max(min(1.0, (m - j) * PS[j]) for j in range(i + 1)) for i in range(m)]
    assert adjust_p(PS, "holm") == pytest.approx(holm, abs=1e-12)
    assert adjust_p(PS, "bonferroni") == pytest.approx([min(1.0, m * p) for p in PS], abs=1e-12)
    assert adjust_p(PS, "none") == PS
    assert adjust_p([], "bh") == []
    with pytest.raises(ValueError, match="unknown"):
        adjust_p(PS, "sidak")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        adjust_p([1.5], "bh")


def test_exact_p_is_uniform_enough_under_the_null() -> None:
    """Symmetric tied differences, 400 draws of n = 20: P(p ≤ 0.05) stays at or below 0.05 (+ MC error)."""
    rng = np.random.default_rng(2026)
    draws = np.round(rng.normal(size=(400, 20)) * 1.2) / 2
    rejections = sum(signed_rank_p(row) <= 0.05 for row in draws)
    assert rejections / 400 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 400)


# --- planning ------------------------------------------------------------------------------------------------


def test_detectable_r_has_the_power_it_claims_under_an_independent_check() -> None:
    """n = 20, α = 0.05: at a normal shift whose mean Pratt r equals the figure, scipy's exact test rejects in
    about 80% of fresh samples (600 draws: within ±0.06)."""
    r = detectable_r(20, 0.05)
    assert r is not None and 0.5 < r < 0.8
    rng = np.random.default_rng(99)
    draws = rng.standard_normal((600, 20))

    def mean_r(shift: float) -> float:
        d = draws + shift
        ranks = stats.rankdata(np.abs(d), axis=1)
        positive, negative = np.where(d > 0, ranks, 0).sum(axis=1), np.where(d < 0, ranks, 0).sum(axis=1)
        return float(np.mean((positive - negative) / (positive + negative)))

    low, high = 0.0, 3.0
    for _ in range(20):
        middle = (low + high) / 2
        low, high = (middle, high) if mean_r(middle) < r else (low, middle)
    rejected = [stats.wilcoxon(row + high, method="exact").pvalue <= 0.05 for row in draws]
    assert float(np.mean(rejected)) == pytest.approx(0.8, abs=0.06)


def test_detectable_r_grows_with_the_correction_and_shrinks_with_pairs() -> None:
    """Stricter α or fewer pairs need a larger |r|; when even r = 1 cannot reach α the answer is None."""
    base = detectable_r(20, 0.05)
    strict = detectable_r(20, 0.05 / 200)
    more = detectable_r(60, 0.05 / 200)
    assert base is not None and strict is not None and more is not None
    assert base < strict and more < strict
    # n = 15: the smallest two-sided exact p is 2 / 2^15 ≈ 6.1e-5, so α = 5e-5 is out of reach, 7e-5 is not
    assert detectable_r(15, 5e-5) is None
    assert detectable_r(15, 7e-5) is not None
    assert pytest.approx(float(stats.wilcoxon(np.arange(1.0, 16.0), method="exact").pvalue)) == 2 / 2**15


def test_correct_family_marks_findings_by_scipys_benjamini_hochberg() -> None:
    """Tested rows get scipy's BH-adjusted p; omnibus and insufficient rows are never findings."""
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    rows = [ContrastRow(test="wilcoxon", a="x", b="y", n=20, status="ok", r=0.3, p=p, finding=True) for p in ps]
    rows += [
        ContrastRow(test="friedman", a="x · y · z", b="", n=20, status="ok", p=0.0001),
        ContrastRow(test="wilcoxon", a="x", b="y", n=3, status="insufficient"),
    ]
    corrected = correct_family(rows)
    expected = stats.false_discovery_control(ps, method="bh")
    assert [row.p_family for row in corrected[: len(ps)]] == pytest.approx(list(expected))
    assert [row.finding for row in corrected] == [bool(q <= 0.05) for q in expected] + [False, False]
    assert sum(row.finding for row in corrected) == 2  # 0.039 alone would pass, not after the correction
    assert all(row.finding for row in rows[: len(ps)])  # new rows: the inputs are unchanged
    assert {row.family_method for row in corrected[: len(ps)]} == {"bh"}
    gated = correct_family([rows[0].model_copy(update={"gated": True})])
    assert gated[0].p_family == ps[0] and not gated[0].finding  # counted in the family, never a finding


def test_items_for_r_is_the_smallest_n_that_detects_r() -> None:
    """Against detectable_r itself at n and n − 1, and tied pairs only padding n (n · (1 − t) informative)."""
    n = items_for_r(0.5, 0.05, draws=300)
    assert n is not None
    assert detectable_r(n, 0.05, draws=300) <= 0.5 < detectable_r(n - 1, 0.05, draws=300)  # type: ignore[operator]
    tied = items_for_r(0.5, 0.05, tie_share=0.25, draws=300)
    assert tied is not None and int(tied * 0.75) >= n > int((tied - 1) * 0.75)
    assert items_for_r(0.01, 0.05, max_items=64, draws=100) is None


def test_items_for_r_power_holds_under_scipy_exact_wilcoxon() -> None:
    """Independent check: at the planned n, continuous differences shifted so that scipy's exact signed-rank
    test rejects at α = 0.05 in ≥ 80% of samples give a mean r near the target (within Monte-Carlo error)."""
    n = items_for_r(0.5, 0.05, draws=400)
    assert n is not None
    rng = np.random.default_rng(2)
    noise = rng.standard_normal((400, n))

    def power_and_r(shift: float) -> tuple[float, float]:
        d = noise + shift
        p = np.array([stats.wilcoxon(row, method="exact").pvalue for row in d])
        return float(np.mean(p <= 0.05)), float(np.mean([rank_biserial(row) for row in d]))

    low, high = 0.0, 2.0
    for _ in range(12):
        middle = (low + high) / 2
        low, high = (low, middle) if power_and_r(middle)[0] >= 0.8 else (middle, high)
    assert power_and_r(high)[1] == pytest.approx(0.5, abs=0.06)
