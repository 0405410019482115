"""The opposite (2×2 mismatch) design's five contrasts, checked by hand and against scipy."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from judges.fairness_mismatch import MISMATCH_CONTRASTS, mismatch_contrasts

FAST = 200


def planted_cells(n: int = 20, noise_sd: float = 0.0, seed: int = 0) -> dict[tuple[str, str], list[float]]:
    """Item difficulty k % 5; perceived female adds +1; optional per-cell noise."""
    rng = np.random.default_rng(seed)
    item = np.array([float(k % 5) for k in range(n)])
    cells = {}
    for stated in ("female", "male"):
        for perceived in ("female", "male"):
            bump = 1.0 if perceived == "female" else 0.0
            cells[(stated, perceived)] = [float(x) for x in item + bump + rng.normal(0, noise_sd, n)]
    return cells


def test_mismatch_planted_perceived_effect_by_hand() -> None:
    """Perceived female +1, no noise: FF − MM = +1, FM − MF = −1, perceived +1, stated 0, interaction 0."""
    found = mismatch_contrasts(planted_cells(), seed=3, n_boot=FAST)
    assert found.matched.mean_diff == 1.0 and found.matched.r == 1.0
    assert found.mismatched.mean_diff == -1.0 and found.mismatched.r == -1.0
    assert found.perceived.mean_diff == 1.0
    assert found.stated.mean_diff == 0.0 and found.stated.p == 1.0
    assert found.interaction.mean_diff == 0.0
    assert found.perceived.finding and not found.stated.finding and not found.interaction.finding
    assert (found.matched.a, found.matched.b) == ("female/female", "male/male")
    assert (found.mismatched.a, found.mismatched.b) == ("female/male", "male/female")
    assert (found.interaction.b, found.interaction.n) == ("0", 20)


def test_mismatch_with_noise_matches_per_item_formulas() -> None:
    """Noisy cells: each mean_diff is the mean of its per-item formula, and matched = perceived + stated."""
    cells = planted_cells(noise_sd=0.5, seed=17)
    ff, fm, mf, mm = (
        np.array(cells[key]) for key in [("female", "female"), ("female", "male"), ("male", "female"), ("male", "male")]
    )
    found = mismatch_contrasts(cells, seed=3, n_boot=FAST)
    assert found.matched.mean_diff == pytest.approx(np.mean(ff - mm), abs=1e-9)
    assert found.mismatched.mean_diff == pytest.approx(np.mean(fm - mf), abs=1e-9)
    assert found.perceived.mean_diff == pytest.approx(np.mean((ff + mf) / 2 - (fm + mm) / 2), abs=1e-9)
    assert found.stated.mean_diff == pytest.approx(np.mean((ff + fm) / 2 - (mf + mm) / 2), abs=1e-9)
    assert found.interaction.mean_diff == pytest.approx(np.mean(ff - fm - mf + mm), abs=1e-9)
    assert found.perceived.mean_diff is not None and found.stated.mean_diff is not None
    assert found.matched.mean_diff == pytest.approx(found.perceived.mean_diff + found.stated.mean_diff, abs=1e-9)
    assert found.perceived.p == pytest.approx(
        float(stats.wilcoxon((ff + mf) / 2 - (fm + mm) / 2, zero_method="pratt").pvalue), rel=1e-9
    )
    assert found.perceived.finding and not found.stated.finding
    json.dumps([getattr(found, name).model_dump(mode="json") for name in MISMATCH_CONTRASTS], allow_nan=False)


def test_mismatch_drops_items_missing_any_cell() -> None:
    """An item missing one cell leaves all five contrasts, so they stay on the same items."""
    cells = planted_cells(n=17)
    cells[("male", "female")][4] = math.nan
    cells[("female", "female")][9] = math.nan
    found = mismatch_contrasts(cells, seed=0, n_boot=FAST)
    every = (found.matched, found.mismatched, found.perceived, found.stated, found.interaction)
    assert {c.n for c in every} == {15}
    assert found.matched.n == 15 and found.stated.n == 15


def test_mismatch_custom_level_names_and_bad_cells() -> None:
    """Other level names work; a missing cell is rejected with the expected keys."""
    short = {"female": "w", "male": "m"}
    renamed = {(short[stated], short[perceived]): v for (stated, perceived), v in planted_cells().items()}
    found = mismatch_contrasts(renamed, seed=0, first="w", second="m", n_boot=FAST)
    assert found.perceived.mean_diff == 1.0
    assert (found.perceived.a, found.perceived.b) == ("perceived w", "perceived m")
    del renamed[("w", "m")]
    with pytest.raises(ValueError, match="cells"):
        mismatch_contrasts(renamed, seed=0, first="w", second="m")
