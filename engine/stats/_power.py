"""Planning a paired design before anything is spent: the smallest |r| n pairs detect, and the pairs a target
|r| needs, under the exact signed-rank test at the level a family's correction implies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core._lazy import lazy_module
from engine.stats._paired import _sign_flip_distribution

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = ("detectable_r", "items_for_r")


def detectable_r(n: int, alpha: float, power: float = 0.8, *, draws: int = 1000, seed: int = 0) -> float | None:
    """The smallest |r| that n pairs detect with `power` at two-sided level `alpha` — a planning figure.

    The rejection region is the exact signed-rank test's (no ties, no zeros); the alternative is a normal
    location shift of continuous differences, its power and its expected r estimated from `draws` seeded
    Monte-Carlo samples, the shift found by bisection. Ties and zero differences (frequent with per-dialogue
    rates) cost further power, so the figure is a lower bound on what a real run needs.

    Returns:
        |r| in (0, 1], or None when even r = 1 (every difference on one side) cannot reach `alpha` with n pairs.
    """
    if n < 1:
        return None
    doubled = 2 * np.arange(1, n + 1, dtype=np.int64)
    upper_tail = np.cumsum(_sign_flip_distribution(doubled)[::-1])[::-1]  # P(2R+ ≥ t)
    reachable = np.nonzero(upper_tail <= alpha / 2)[0]
    if reachable.size == 0:
        return None
    critical = int(reachable[0])
    total = n * (n + 1)  # 2·(R+ + R−)
    noise = np.random.default_rng(seed).standard_normal((draws, n))

    def at(shift: float) -> tuple[float, float]:
        d = noise + shift
        twice_positive = 2 * np.sum(np.where(d > 0, stats.rankdata(np.abs(d), axis=1), 0.0), axis=1)
        rejected = (twice_positive >= critical) | (total - twice_positive >= critical)
        return float(np.mean(rejected)), float(np.mean(2 * twice_positive / total - 1))

    low, high = 0.0, 8.0
    for _ in range(14):
        middle = (low + high) / 2
        if at(middle)[0] >= power:
            high = middle
        else:
            low = middle
    return min(1.0, at(high)[1])


def items_for_r(
    r: float,
    alpha: float,
    power: float = 0.8,
    *,
    tie_share: float = 0.0,
    max_items: int = 1000,
    draws: int = 500,
    seed: int = 0,
) -> int | None:
    """Items per cell for the exact signed-rank test to detect |r| = `r` with `power` at two-sided `alpha`.

    The smallest n whose informative pairs, n · (1 − `tie_share`), reach `detectable_r` ≤ r: a zero difference
    carries no sign, so tied pairs (a metric's rate equal at both levels; 25–49% of pairs per metric on the
    calibrated sim, see docs/statistics.md) only pad n. None when even `max_items` items fall short (the exact
    null distribution grows as n³; beyond a thousand pairs the question is not one of planning).
    """
    if not 0 < r <= 1 or not 0 <= tie_share < 1:
        raise ValueError("r must be in (0, 1] and tie_share in [0, 1)")

    def informative(n: int) -> int:
        return int(n * (1 - tie_share))

    def enough(n: int) -> bool:
        found = detectable_r(informative(n), alpha, power, draws=draws, seed=seed)
        return found is not None and found <= r

    high = 8
    while not enough(high):  # doubling first: detectable_r costs about n² per call
        if high >= max_items:
            return None
        high = min(2 * high, max_items)
    low = high // 2 + 1 if high > 8 else 1
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return low
