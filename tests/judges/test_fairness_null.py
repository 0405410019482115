"""judges.fairness_null: the null reference of the mean-|r| tables, against the generic permutation path and
hand-built data."""

from __future__ import annotations

import numpy as np
import pytest

from engine import derive_seed, label_permutations, rank_biserial_rows
from judges.fairness_model import MeanCell, MetricMean
from judges.fairness_null import MeanTables, NullCell, mark_means, null_draws


def test_two_level_fast_path_equals_permuting_the_table() -> None:
    """Two levels: the sign-flip shortcut gives the |r| that permuting the table and ranking again gives."""
    rng = np.random.default_rng(3)
    table = np.round(rng.normal(size=(24, 2)), 1)
    table[5] = [0.3, 0.3]  # a tie
    table[7, 1] = np.nan  # an incomplete pair
    cell = NullCell(("all", "explicit", "gender"), ["female", "male"], {"m": table}, opposite=False)
    found = null_draws([cell], seed=9, draws=300, derive=derive_seed)[("all", "explicit", "gender", "m")]["wilcoxon"]
    order = label_permutations(24, 2, draws=300, seed=derive_seed(9, "null", "all", "explicit", "gender"))
    complete = ~np.isnan(table).any(axis=1)
    permuted = np.take_along_axis(table[np.newaxis, complete], order[:, complete], axis=-1)
    expected = np.abs(rank_biserial_rows(permuted[..., 0] - permuted[..., 1]))
    assert found.shape == (1, 300)
    assert found[0] == pytest.approx(expected, abs=1e-12)


def test_a_planted_gap_exceeds_its_null_and_noise_does_not() -> None:
    """One dimension, 40 items: metric `gap` has every item 1 point higher at one level, metric `noise` none.
    The per-metric means are the headline family: `gap` exceeds its null, `noise` does not; cells are never
    marked; 40 items cannot resolve |r| = 0.10."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=40)
    gap = np.column_stack([base + 1.0 + rng.normal(scale=0.3, size=40), base])
    noise = np.column_stack([base + rng.normal(size=40), base + rng.normal(size=40)])
    cell = NullCell(("all", "explicit", "gender"), ["female", "male"], {"gap": gap, "noise": noise}, False)
    draws = null_draws([cell], seed=1, draws=2000, derive=derive_seed)
    observed = {m: float(np.abs(rank_biserial_rows(t[:, 0] - t[:, 1]))) for m, t in (("gap", gap), ("noise", noise))}
    where = {"domain": "all", "channel": "explicit"}
    tables = MeanTables(
        cells=[
            MeanCell(**where, dimension="gender", metric=m, mean_abs_r=observed[m], contrasts=1, finding=False)
            for m in ("gap", "noise")
        ],
        by_metric=[MetricMean(**where, metric=m, mean_abs_r=observed[m]) for m in ("gap", "noise")],
        by_dimension=[],
        aggregates=[],
    )
    found = mark_means(tables, draws, ["gap", "noise"], [])
    gap_ref, noise_ref = (row.null for row in found.by_metric)
    assert gap_ref is not None and noise_ref is not None
    assert gap_ref.exceeds_null and gap_ref.p_larger == pytest.approx(1 / 2001)
    assert not noise_ref.exceeds_null
    # the null of |r| at 40 items: its mean over draws, straight from the draws
    assert noise_ref.null_mean == pytest.approx(float(draws[("all", "explicit", "gender", "noise")]["wilcoxon"].mean()))
    assert all(c.null is not None and not c.null.exceeds_null and c.null.p_family is None for c in found.cells)
    assert not gap_ref.resolves_meaningful and not gap_ref.meaningful
