"""engine.stats._null: the permutation null of |r|, checked against exact enumeration and separate scipy calls."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from engine.stats._null import label_permutations, null_reference, rank_biserial_rows
from engine.stats._paired import rank_biserial


def pratt_r(d: np.ndarray) -> float:
    """Kerby's r on Pratt ranks, written out with scipy's rankdata."""
    ranks = stats.rankdata(np.abs(d))
    plus, minus = ranks[d > 0].sum(), ranks[d < 0].sum()
    return 0.0 if plus + minus == 0 else float((plus - minus) / (plus + minus))


def test_rows_match_rank_biserial_one_by_one() -> None:
    rng = np.random.default_rng(4)
    rows = np.round(rng.normal(size=(50, 18)), 1)
    rows[:, :4] = 0.0
    found = rank_biserial_rows(rows)
    assert found == pytest.approx([pratt_r(row) for row in rows], abs=1e-12)
    assert found == pytest.approx([rank_biserial(row) for row in rows], abs=1e-12)


def test_permutations_are_uniform_within_items() -> None:
    """Each of the 3! orders of three levels appears about equally often, independently per item."""
    order = label_permutations(40, 3, draws=3000, seed=1)
    assert order.shape == (3000, 40, 3)
    assert np.all(np.sort(order, axis=-1) == np.arange(3))
    codes = order[..., 0] * 3 + order[..., 1]
    counts = np.bincount(codes.ravel(), minlength=9)[[1, 2, 3, 5, 6, 7]]
    assert stats.chisquare(counts).pvalue > 0.001


def test_two_level_null_mean_matches_exact_sign_flip_enumeration() -> None:
    """With two levels a within-item permutation flips the sign of d; E|r| over all 2^12 flips, enumerated by
    hand, is what the permutation draws estimate."""
    d = np.array([3.0, -1.0, 0.0, 2.0, 2.0, -4.0, 1.0, 5.0, 0.5, -0.5, 1.5, 0.0])
    exact = np.mean([abs(pratt_r(d * np.array(s))) for s in itertools.product([1, -1], repeat=d.size)])
    table = np.column_stack([d, np.zeros_like(d)])
    order = label_permutations(d.size, 2, draws=4000, seed=7)
    permuted = np.take_along_axis(table[np.newaxis], order, axis=-1)
    null = np.abs(rank_biserial_rows(permuted[..., 0] - permuted[..., 1]))
    assert null.mean() == pytest.approx(exact, abs=4 * null.std() / np.sqrt(null.size))


def test_reference_p_counts_ties_against_the_observed_value() -> None:
    null = np.array([0.1, 0.2, 0.2, 0.3, 0.5])
    found = null_reference(0.2, null)
    assert found.p_larger == pytest.approx((1 + 4) / 6)
    assert found.null_mean == pytest.approx(0.26)
    assert (found.null_low, found.null_high) == pytest.approx(tuple(np.quantile(null, [0.025, 0.975])))
    assert null_reference(0.6, null).p_larger == pytest.approx(1 / 6)
