"""simrun's betting statistics against the reference package, `confseq` (Howard, Waudby-Smith, Ramdas).

`engine/stats/_sequential.py` writes out Waudby-Smith & Ramdas (2024) in numpy because `confseq` cannot be a
dependency (docs/sequential.md, "Why the statistics are written out"). This script checks that choice. Where
`confseq` 0.0.11 is installed, it prints the largest disagreement on seeded data: bounded rates, a rare rate,
Beta values, and paired differences mapped to [0, 1]. It compares the one-sided and hedged capitals, the
verdict's e-process (the plug-in capital averaged with the aGRAPA capital; `confseq` calls those bets
`lambda_aKelly`) and the running-intersection confidence sequence at 1/2000 resolution.
`--reference` prints the values `tests/engine/stats/test_sequential.py` pins on a fixed 40-value input.

Installing `confseq` needs the Boost headers (`apt-get install libboost-dev`), a build without isolation
(its pinned pybind11 2.6 does not compile on Python 3.11) and a NumPy-2 alias for `np.float_`, which this
script sets before importing it.
Run: `pip install pybind11 scikit-build cmake && pip install --no-build-isolation confseq`, then
`python bench/confseq_agreement.py [--reference]`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from engine.stats._sequential import GRID, Hypothesis, e_process, hedged_capital, predictable_bets

ALPHA = 0.05
NULLS = (0.1, 0.2, 0.5, 0.63)
REFERENCE_X = (
    [0.403, 0.092, 0.577, 0.181, 0.295, 0.624, 0.365, 0.408, 0.363, 0.315, 0.644, 0.076, 0.126, 0.241, 0.171]
    + [0.361, 0.424, 0.597, 0.611, 0.658, 0.312, 0.498, 0.484, 0.622, 0.394, 0.718, 0.13, 0.319, 0.315, 0.388]
    + [0.766, 0.579, 0.309, 0.537, 0.029, 0.271, 0.33, 0.748, 0.207, 0.68]
)
"""The pinned input: 40 Beta(2, 3) draws, spelled out so no generator stream is involved."""


def _confseq() -> tuple[Any, Any]:
    """confseq's betting module and its bet functions, with its pre-NumPy-2 `np.float_` annotations resolvable."""
    if not hasattr(np, "float_"):
        np.float_ = np.float64  # type: ignore[attr-defined]
    return importlib.import_module("confseq.betting"), importlib.import_module("confseq.betting_strategies")


def reference_e_process(x: np.ndarray, h: Hypothesis) -> np.ndarray:
    """The verdict's e-process built from confseq's own capitals and bets."""
    betting, bets = _confseq()
    low, high = (0.0, None) if h.side == "above" else (None, 0.0) if h.side == "below" else (None, None)

    def agrapa(x: np.ndarray, m: float) -> np.ndarray:
        return np.asarray(np.clip(bets.lambda_aKelly(x, m, trunc_scale=0.75), low, high))

    theta = {"above": 1.0, "below": 0.0, "paired": 0.5}[h.side]
    plug_in = betting.betting_mart(x, h.null, alpha=ALPHA, theta=theta, convex_comb=True, trunc_scale=0.5)
    adaptive = betting.betting_mart(x, h.null, lambdas_fn_positive=agrapa, theta=1, trunc_scale=1)
    return np.asarray(0.5 * plug_in + 0.5 * adaptive)


def reference_cs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """confseq's running-intersection hedged CS on simrun's grid, without its one-step outward padding."""
    betting, bets = _confseq()
    step = 1 / (GRID - 1)

    def plug_in(x: np.ndarray, m: float) -> np.ndarray:
        return np.asarray(bets.lambda_predmix_eb(x, alpha=ALPHA / 2))

    low, high = betting.betting_cs(
        x, [plug_in], alpha=ALPHA, breaks=GRID - 1, running_intersection=True, convex_comb=True, trunc_scale=0.5
    )
    return np.asarray(low) + step, np.asarray(high) - step


def ours_cs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """simrun's interval at every t, from the same hedged capital and grid `sequential_path` uses, before a
    question freezes at its stop."""
    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    inside = hedged_capital(x, grid, ALPHA) < np.log(1 / ALPHA)
    low = np.maximum.accumulate([grid[row][0] for row in inside])
    high = np.minimum.accumulate([grid[row][-1] for row in inside])
    return np.asarray(low), np.asarray(high)


def _log_gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.log(a) - np.log(b))))


def _e_gap(side: Literal["above", "below", "paired"]) -> Callable[[np.ndarray, float], float]:
    def gap(x: np.ndarray, m: float) -> float:
        h = Hypothesis(side, m)
        return _log_gap(e_process(x, h, ALPHA), reference_e_process(x, h))

    return gap


def agreement() -> None:
    betting, _ = _confseq()
    rng = np.random.default_rng(31)
    data: dict[str, np.ndarray] = {
        "rate 0.3 (Bernoulli)": rng.binomial(1, 0.3, 300).astype(float),
        "rate 0.05 (Bernoulli)": rng.binomial(1, 0.05, 300).astype(float),
        "Beta(2, 5)": rng.beta(2, 5, 300),
        "paired d in {-1,0,1}, (d+1)/2": (rng.choice([-1, 0, 1], 300, p=[0.2, 0.5, 0.3]) + 1) / 2,
        "paired d ~ N(0.1, 0.3), (d+1)/2": (np.clip(rng.normal(0.1, 0.3, 300), -1, 1) + 1) / 2,
    }
    checks: dict[str, Callable[[np.ndarray, float], float]] = {
        "hedged capital": lambda x, m: _log_gap(
            np.exp(hedged_capital(x, np.array([m]), ALPHA)[:, 0]),
            betting.betting_mart(x, m, alpha=ALPHA, theta=0.5, convex_comb=True, trunc_scale=0.5),
        ),
        "one-sided capital (above)": lambda x, m: _log_gap(
            np.cumprod(1 + np.minimum(predictable_bets(x, ALPHA), 0.5 / m) * (x - m)),
            betting.betting_mart(x, m, alpha=ALPHA, theta=1, trunc_scale=0.5),
        ),
        "e-process (above)": _e_gap("above"),
        "e-process (below)": _e_gap("below"),
        "e-process (paired)": _e_gap("paired"),
    }
    print(f"simrun vs confseq, alpha {ALPHA}, 300 values per data set, nulls {NULLS}")
    print(f"{'data':34s} {'largest |log simrun - log confseq|':>36s}  {'CS largest |gap|':>16s}")
    for name, x in data.items():
        gap = max(check(x, m) for check in checks.values() for m in NULLS)
        (lo, hi), (rlo, rhi) = ours_cs(x), reference_cs(x)
        cs_gap = float(max(np.max(np.abs(lo - rlo)), np.max(np.abs(hi - rhi))))
        print(f"{name:34s} {gap:36.1e}  {cs_gap:16.1e}  at t=300 [{lo[-1]:.4f}, {hi[-1]:.4f}]")


def reference() -> None:
    x = np.array(REFERENCE_X)
    print("X =", REFERENCE_X)
    for h in (Hypothesis("above", 0.3), Hypothesis("below", 0.6), Hypothesis("paired", 0.5)):
        e = reference_e_process(x, h)
        print(f"{h.side} {h.null}: e at 10, 20, 40 =", [float(f"{v:.12g}") for v in e[[9, 19, 39]]])
    low, high = reference_cs(x)
    print("CS at 10, 20, 40 =", [(round(float(low[i]), 4), round(float(high[i]), 4)) for i in (9, 19, 39)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reference", action="store_true", help="print the values the test pins")
    args = parser.parse_args()
    reference() if args.reference else agreement()


if __name__ == "__main__":
    main()
