"""Anytime-valid inference for sequential runs: betting e-processes and confidence sequences, e-BH.

The reference package, `confseq` (Howard, Waudby-Smith, Ramdas), cannot be a dependency: PyPI has only its
source (last release 2023), which needs the Boost headers and a build without isolation (its pinned pybind11 2.6
does not compile on Python 3.11), and its `betting` module fails to import under NumPy 2 (`np.float_`).
`expectation` needs Python ≥ 3.12. So this module writes out the direct formulas of Waudby-Smith & Ramdas
(2024), "Estimating means of bounded random variables by betting", JRSS-B 86(1). They match confseq 0.0.11,
built against Boost here, to 1e-12 in every capital and exactly in every interval (`bench/confseq_agreement.py`;
a test pins its values):

- capital `K_t(m) = Π_{i≤t} (1 + λ_i (x_i − m))` for values x in [0, 1], with *predictable* bets λ_i (computed
  from x_1..x_{i−1} only). Under H0: E[x_i | past] = m it is a nonnegative martingale, so by Ville's inequality
  P(sup_t K_t ≥ 1/α) ≤ α: a verdict read at any look, or at a data-dependent stop, keeps its error rate;
- the predictable plug-in empirical-Bernstein bets (their eq. 26, confseq's `lambda_predmix_eb`):
  λ_t = sqrt(2 log(1/a) / (σ̂²_{t−1} t log(1 + t))) with σ̂², μ̂ regularised by one pseudo-observation
  (mean 1/2, variance 1/4), truncated at c/m (bets on x > m) and c/(1 − m) (bets on x < m), c = 1/2;
- the hedged capital θ K⁺(m) + (1 − θ) K⁻(m), θ = 1/2 (a convex mixture of two test martingales is one) with
  those bets gives the confidence sequence {m : hedged capital < 1/α} (their Theorem 3): the interval;
- the verdict's e-process at the null m₀ is the average of two test martingales (an average of test
  martingales is one): the capital with the bets above (one-sided for `above`/`below`, hedged for `paired`),
  and the capital with their aGRAPA bets (approximate growth-rate adaptive, their Section 5.3; confseq's
  `lambda_aKelly`), λ_t = (μ̂_{t−1} − m₀) / (σ̂²_{t−1} + (μ̂_{t−1} − m₀)²), clipped to [−c/(1 − m₀), c/m₀]
  (two-sided), [0, c/m₀] (`above`) or [−c/(1 − m₀), 0] (`below`), c = 3/4. On the bench the first settles
  large rate effects soonest and the second moderate paired differences (in two thirds of the items); the
  average is within a look of the better one on each. Any predictable bet keeps Ville's bound, so the choice
  changes power, never validity. The verdict follows the e-value; the interval describes.

A family of m questions is corrected as Wang & Ramdas (2022, JRSS-B 84(3)) prescribe for e-values: e-BH at α
controls the false discovery rate under any dependence between the e-values (a run's questions share items),
and under the complete null that is the chance of any false finding. Its rule, e_(k) ≥ m / (α k), is BH's
step-up rule on p = 1/e (p_(k) ≤ α k / m), so scipy's `false_discovery_control` computes it; the e-values are
what make the step valid without BH's independence condition. A question whose e-value reaches m/α is
rejected by e-BH whatever the others are, which is what lets it settle before the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from engine.core._lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = (
    "GRID",
    "Hypothesis",
    "QuestionPath",
    "SequentialLook",
    "agrapa_bets",
    "e_bh",
    "e_process",
    "hedged_capital",
    "predictable_bets",
    "sequential_path",
)

GRID = 2001
"""Candidate means on [0, 1] where the confidence sequence is evaluated (resolution 1/2000)."""
_TRUNCATION = 0.5
_TEST_TRUNCATION = 0.75
_THETA = 0.5

Side = Literal["above", "below", "paired"]
Settled = Literal["finding", "futile"]


@dataclass(frozen=True)
class Hypothesis:
    """One question on values already mapped to [0, 1]: `above` (H0: mean ≤ null), `below` (H0: mean ≥ null)
    or `paired` (H0: mean = null, two-sided); `futility` settles it when the interval lies on the null side
    (inside null ± margin for `paired`)."""

    side: Side
    null: float
    margin: float = 0.0
    futility: bool = False


def predictable_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """λ_1..λ_n, each from the values before it (WSR eq. 26), not yet truncated."""
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    before = np.concatenate(([0.25], sigma2[:-1]))
    return np.asarray(np.sqrt(2 * np.log(1 / alpha) / (before * t * np.log1p(t))), dtype=np.float64)


def _log_capital(x: np.ndarray, m: np.ndarray, bets: np.ndarray, sign: int) -> np.ndarray:
    """log K_t(m) for every t (rows) and candidate m (columns); sign +1 bets on x > m, −1 on x < m."""
    cap = _TRUNCATION / (m if sign > 0 else 1 - m)
    lam = np.minimum(bets[:, None], cap[None, :])
    return np.asarray(np.cumsum(np.log1p(sign * lam * (x[:, None] - m[None, :])), axis=0), dtype=np.float64)


def hedged_capital(x: np.ndarray, m: np.ndarray, alpha: float) -> np.ndarray:
    """log of θ K⁺_t(m) + (1 − θ) K⁻_t(m) for every t and m: the two-sided e-process, tuned for level α."""
    bets = predictable_bets(x, alpha / 2)
    up, down = _log_capital(x, m, bets, 1), _log_capital(x, m, bets, -1)
    return np.asarray(np.logaddexp(np.log(_THETA) + up, np.log(1 - _THETA) + down), dtype=np.float64)


def e_bh(e_values: Sequence[float], alpha: float) -> list[bool]:
    """e-BH (Wang & Ramdas 2022): reject the k* largest e-values, k* = max{k : e_(k) ≥ m / (α k)}, which is
    scipy's BH step on p = 1/e."""
    values = np.asarray(e_values, dtype=np.float64)
    if values.size == 0:
        return []
    with np.errstate(divide="ignore", over="ignore"):
        p = np.minimum(1.0, 1.0 / values)
    adjusted = stats.false_discovery_control(p, method="bh")
    return [bool(a <= alpha) for a in adjusted]


@dataclass(frozen=True)
class QuestionPath:
    """One question at one look, on the [0, 1] scale: observations used, e-value, interval, settled state."""

    n: int
    e_value: float
    low: float
    high: float
    settled: Settled | None


@dataclass(frozen=True)
class SequentialLook:
    items: int
    """Items completed when this look was taken."""
    questions: tuple[QuestionPath, ...]

    @property
    def all_settled(self) -> bool:
        return all(q.settled is not None for q in self.questions)


def agrapa_bets(x: np.ndarray, null: float, side: Side) -> np.ndarray:
    """WSR's aGRAPA bets against `null`, each from the values before it, clipped to the side tested."""
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    var = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    mu_before, var_before = np.concatenate(([0.5], mu[:-1])), np.concatenate(([0.25], var[:-1]))
    gap = mu_before - null
    low = 0.0 if side == "above" else -_TEST_TRUNCATION / (1 - null)
    high = 0.0 if side == "below" else _TEST_TRUNCATION / null
    return np.asarray(np.clip(gap / (var_before + gap**2), low, high), dtype=np.float64)


def e_process(x: np.ndarray, h: Hypothesis, alpha: float) -> np.ndarray:
    """The question's e-value after each observation (level α tunes the first capital's bets)."""
    null = np.array([h.null])
    if h.side == "paired":
        plug_in = hedged_capital(x, null, alpha)[:, 0]
    else:
        plug_in = _log_capital(x, null, predictable_bets(x, alpha), 1 if h.side == "above" else -1)[:, 0]
    adaptive = np.cumsum(np.log1p(agrapa_bets(x, h.null, h.side) * (x - h.null)))
    return np.asarray(0.5 * np.exp(plug_in) + 0.5 * np.exp(adaptive), dtype=np.float64)


def _settled(h: Hypothesis, e: float, low: float, high: float, bar: float) -> Settled | None:
    if e >= bar:
        return "finding"
    if not h.futility:
        return None
    if h.side == "above":
        return "futile" if high < h.null else None
    if h.side == "below":
        return "futile" if low > h.null else None
    return "futile" if low > h.null - h.margin and high < h.null + h.margin else None


def _question_path(x: np.ndarray, counts: Sequence[int], h: Hypothesis, alpha: float, m: int) -> list[QuestionPath]:
    """The question's state at each look; frozen from the look where it settles (a stopped e-process)."""
    level = alpha / m
    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    inside = hedged_capital(x, grid, level) < np.log(1 / level) if x.size else np.zeros((0, grid.size), bool)
    e_path = e_process(x, h, level) if x.size else np.zeros(0)
    low, high = 0.0, 1.0
    path: list[QuestionPath] = []
    for n in counts:
        if path and path[-1].settled is not None:
            path.append(path[-1])
            continue
        e = float(e_path[n - 1]) if n else 1.0
        if n:
            kept = grid[inside[n - 1]]
            low, high = (max(low, float(kept[0])), min(high, float(kept[-1]))) if kept.size else (low, high)
            low, high = (low, high) if low <= high else (high, high)
        path.append(QuestionPath(n, e, low, high, _settled(h, e, low, high, m / alpha)))
    return path


def sequential_path(
    values: Sequence[Sequence[float] | np.ndarray],
    counts: Sequence[Sequence[int]],
    items: Sequence[int],
    hypotheses: Sequence[Hypothesis],
    alpha: float,
) -> list[SequentialLook]:
    """Every look of a sequential run: `values[q]` are question q's observations in [0, 1] in the plan's item
    order, `counts[k][q]` how many of them look k saw, `items[k]` the items complete at look k."""
    m = len(hypotheses)
    paths = [
        _question_path(np.asarray(values[q], dtype=np.float64), [c[q] for c in counts], hypotheses[q], alpha, m)
        for q in range(m)
    ]
    return [SequentialLook(items[k], tuple(p[k] for p in paths)) for k in range(len(items))]
