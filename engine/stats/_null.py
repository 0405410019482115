"""A null reference for descriptive effect sizes: what they look like with no effect, at the same size.

Mean |r| over noisy contrasts is positive even when nothing differs (0.22 at 20 items on an unbiased tutor,
issue 24), so a table of mean |r| means nothing without its null beside it. Under the null of a paired design
the condition labels of one item are exchangeable: permuting them within each item, and recomputing every
contrast on the permuted table, draws from the distribution the table would have with no effect, at the same
items, ties and missing values. One permutation per item and draw is shared by every metric of a dimension,
so the metrics keep their dependence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from engine.core._lazy import lazy_module
from engine.stats._paired import _DECIMALS, _pratt_r

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")

__all__ = ("NULL_DRAWS", "NullReference", "label_permutations", "null_reference", "rank_biserial_rows")

NULL_DRAWS = 2000
"""Permutations per null reference: a p of "larger than the null" resolves 1/2001, enough for Benjamini–
Hochberg at 0.05 over the ~60 headline means of a shipped fairness run to mark one mean on its own."""


def label_permutations(items: int, levels: int, *, draws: int, seed: int) -> npt.NDArray[np.int64]:
    """Independent uniform permutations of the level columns within each item: indices (draws, items, levels)."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((draws, items, levels)), axis=-1)


def rank_biserial_rows(d: FloatArray) -> FloatArray:
    """The rank-biserial r of `engine.stats.rank_biserial` along the last axis, for a batch of difference rows
    (the same rounding of float noise and the same Pratt ranks as the test's)."""
    values: FloatArray = np.asarray(np.round(np.asarray(d, dtype=np.float64), _DECIMALS) + 0.0, dtype=np.float64)
    return np.asarray(_pratt_r(values), dtype=np.float64)


class NullReference(BaseModel):
    """An observed statistic beside its permutation null.

    Attributes:
        observed: The statistic on the data.
        null_mean: Its expected value with no effect (mean over the permutations).
        null_low / null_high: The central 95% range of the null.
        p_larger: One-sided permutation p of "larger than the null", (1 + #{null ≥ observed}) / (draws + 1).
        draws: Permutations drawn.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    observed: float
    null_mean: float
    null_low: float
    null_high: float
    p_larger: float
    draws: int


def null_reference(observed: float, null: FloatArray) -> NullReference:
    """The null's mean, 95% range and the permutation p of `observed` being larger (ties count against it)."""
    values = np.asarray(null, dtype=np.float64)
    larger = int(np.sum(values >= observed - 1e-12))
    low, high = np.quantile(values, [0.025, 0.975])
    return NullReference(
        observed=float(observed),
        null_mean=float(np.mean(values)),
        null_low=float(low),
        null_high=float(high),
        p_larger=(1 + larger) / (values.size + 1),
        draws=int(values.size),
    )
