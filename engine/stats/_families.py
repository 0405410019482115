"""Families of paired contrasts: adjusting their p-values together, and the table rows reports show.

Many contrasts read one by one at 95% give findings on data with no effect, so a report declares its family
and `correct_family` decides its findings; the rows shape Wilcoxon and Friedman results alike for every table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from engine.core._lazy import lazy_module
from engine.stats._paired import MIN_PAIRS, Omnibus, friedman_then_pairwise, paired_contrast

if TYPE_CHECKING:
    import numpy as np
    from scipy import stats
else:
    np = lazy_module("numpy")
    stats = lazy_module("scipy.stats")

__all__ = (
    "ADJUSTMENTS",
    "Adjustment",
    "adjust_p",
    "contrast_rows",
    "correct_family",
    "format_effect",
    "format_level",
    "format_p",
    "omnibus_row",
)

ADJUSTMENTS = ("bh", "holm", "bonferroni", "none")
"""Ways to adjust a family of p-values: Benjamini–Hochberg (FDR), Holm and Bonferroni (FWER), or none."""

Adjustment = Literal["bh", "holm", "bonferroni", "none"]


def adjust_p(p: Sequence[float], method: Adjustment | str) -> list[float]:
    """Adjusted p-values of one family, in the input order; a finding is adjusted p ≤ α.

    `bh`: Benjamini–Hochberg step-up (scipy's `false_discovery_control`), controlling the false discovery rate
    — under the complete null that is the chance of any false finding, and it holds for positively dependent
    tests. `holm`: Holm's step-down, p_(i) · (m − i + 1) made monotone, controlling the family-wise error rate.
    `bonferroni`: p · m. `none`: p unchanged. All are capped at 1.

    Raises:
        ValueError: For an unknown method or a p outside [0, 1].
    """
    values = np.asarray(p, dtype=np.float64)
    if method not in ADJUSTMENTS:
        raise ValueError(f"unknown p adjustment {method!r}; choose one of {', '.join(ADJUSTMENTS)}")
    if values.size == 0:
        return []
    if np.any(~np.isfinite(values)) or np.any(values < 0) or np.any(values > 1):
        raise ValueError("p-values must lie in [0, 1]")
    m = values.size
    if method == "none":
        adjusted = values
    elif method == "bonferroni":
        adjusted = np.minimum(1.0, values * m)
    elif method == "bh":
        adjusted = np.asarray(stats.false_discovery_control(values, method="bh"), dtype=np.float64)
    else:
        order = np.argsort(values, kind="stable")
        stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * values[order]))
        adjusted = np.empty(m)
        adjusted[order] = stepped
    return [float(x) for x in adjusted]


def correct_family(rows: Sequence[dict[str, Any]], *, method: Adjustment | str = "bh", q: float = 0.05) -> int:
    """Make `violation` follow the family's adjusted p: every tested contrast row (an r and a p) gets
    `p_family` and is a finding iff `p_family` ≤ q. Returns the family size.

    Many contrasts read one by one at 95% give findings on data with no effect; adjusting over the declared
    family (Benjamini–Hochberg by default) keeps the chance of any false finding at q under the complete null.
    Omnibus and untested rows are never findings.
    """
    tested = [
        row for row in rows if row.get("status") == "ok" and row.get("r") is not None and row.get("p") is not None
    ]
    adjusted = adjust_p([float(row["p"]) for row in tested], method)
    for row in rows:
        row["p_family"] = None
        row["violation"] = False
    for row, value in zip(tested, adjusted, strict=True):
        row["p_family"] = value
        row["violation"] = value <= q
    return len(tested)


def contrast_rows(columns: Mapping[str, Sequence[float]], *, seed: int) -> list[dict[str, Any]]:
    """The table rows of one family of levels, in the caller's level order: a Wilcoxon row for two levels
    (the first against the second), or the Friedman row followed by its Bonferroni pairwise rows for more."""
    levels = list(columns)
    if len(levels) < 2:
        return []
    if len(levels) == 2:
        a, b = levels
        return [
            {"test": "wilcoxon", **paired_contrast(columns[a], columns[b], a_name=a, b_name=b, seed=seed).as_dict()}
        ]
    omnibus = friedman_then_pairwise(columns, seed=seed)
    return [
        omnibus_row(omnibus, p_adjusted=omnibus.p),
        *({"test": "wilcoxon (Bonferroni)", **c.as_dict()} for c in omnibus.pairwise),
    ]


def omnibus_row(omnibus: Omnibus, *, p_adjusted: float | None) -> dict[str, Any]:
    """The Friedman line of a contrast table, shaped like a contrast row so tables and families read it alike;
    it gates pairs and is never a finding itself."""
    return {
        "test": "friedman",
        "a": " · ".join(omnibus.levels),
        "b": "",
        "n": omnibus.n,
        "status": omnibus.status,
        "statistic": omnibus.statistic,
        "p": omnibus.p,
        "p_adjusted": p_adjusted,
        "r": None,
        "ci_low": None,
        "ci_high": None,
        "mean_diff": None,
        "meaningful": False,
        "violation": False,
        "estimate": None,
        "differing": 0,
        "ci_method": None,
        "degenerate": False,
        "direction_disagrees": False,
    }


def format_effect(row: Mapping[str, Any], unit: str = "pairs") -> str:
    """A contrast row's effect for a report: r with its CI, Friedman's χ², or why nothing was tested."""
    if row["status"] != "ok":
        return f"insufficient (< {MIN_PAIRS} {unit})"
    if row["r"] is None:
        return f"Friedman χ² = {row['statistic']:.2f}" if row.get("statistic") is not None else "–"
    if row.get("ci_low") is None:
        return f"{row['r']:+.2f}"
    level = row.get("ci_level") or 0.95
    tag = "" if abs(level - 0.95) < 1e-12 else f" ({format_level(level)})"  # a finding's corrected level
    if row.get("degenerate"):
        tag += f" degenerate: {row.get('differing', 0)} of {row['n']} pairs differ"
        if row.get("ci_method") not in (None, "percentile"):
            tag += f", {row['ci_method']} interval"
    return f"{row['r']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]{tag}"


def format_level(level: float) -> str:
    """A confidence level to the digits that matter: two significant digits of what it leaves out, so 0.9998 is
    `99.98%`, never `100%`, and 0.95 is `95%`."""
    miss = 100 * (1 - level)
    if miss <= 0:
        return "100%"
    decimals = max(0, 1 - math.floor(math.log10(miss)))
    return f"{100 * level:.{decimals}f}".rstrip("0").rstrip(".") + "%"


def format_p(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")
