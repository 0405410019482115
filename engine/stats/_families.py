"""Families of paired contrasts: adjusting their p-values together, and the table rows reports show.

Many contrasts read one by one at 95% give findings on data with no effect, so a report declares its family
and `correct_family` decides its findings; the rows shape Wilcoxon and Friedman results alike for every table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeVar

from engine.core._lazy import lazy_module
from engine.stats._contrast import ContrastRow
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


Row = TypeVar("Row", bound=ContrastRow)


def correct_family(
    rows: Sequence[Row], *, method: Adjustment | str = "bh", q: float = 0.05, family: str | None = None
) -> list[Row]:
    """New rows whose verdicts follow the family's adjusted p: every tested row gets `p_family`, the family's
    name and method, and is a finding iff `p_family` ≤ q and it is not gated; omnibus and untested rows leave
    the family with no finding.

    Many contrasts read one by one at 95% give findings on data with no effect; adjusting over the declared
    family (Benjamini–Hochberg by default) keeps the chance of any false finding at q under the complete null.
    """
    tested = [i for i, row in enumerate(rows) if row.tested]
    adjusted = dict(zip(tested, adjust_p([float(rows[i].p or 0.0) for i in tested], method), strict=True))
    name = family if family is not None else "report"
    found: list[Row] = []
    for i, row in enumerate(rows):
        if i in adjusted:
            value = adjusted[i]
            update = {"p_family": value, "family": name, "family_method": method}
            found.append(row.model_copy(update=update | {"finding": value <= q and not row.gated}))
        else:
            found.append(row.model_copy(update={"p_family": None, "family": None, "finding": False}))
    return found


def contrast_rows(columns: Mapping[str, Sequence[float]], *, seed: int) -> list[ContrastRow]:
    """The table rows of one family of levels, in the caller's level order: a Wilcoxon row for two levels
    (the first against the second), or the Friedman row followed by its Bonferroni pairwise rows for more."""
    levels = list(columns)
    if len(levels) < 2:
        return []
    if len(levels) == 2:
        a, b = levels
        return [paired_contrast(columns[a], columns[b], a_name=a, b_name=b, seed=seed)]
    omnibus = friedman_then_pairwise(columns, seed=seed)
    return [omnibus_row(omnibus), *omnibus.pairwise]


def omnibus_row(omnibus: Omnibus) -> ContrastRow:
    """The Friedman line of a contrast table, a contrast row so tables and families read it alike; it gates
    pairs and is never a finding itself."""
    return ContrastRow(
        test="friedman",
        a=" · ".join(omnibus.levels),
        b="",
        n=omnibus.n,
        status=omnibus.status,
        statistic=omnibus.statistic,
        p=omnibus.p,
    )


def format_effect(row: ContrastRow, unit: str = "pairs") -> str:
    """A contrast row's effect for a report: r with its CI, Friedman's χ², or why nothing was tested."""
    if row.status != "ok":
        return f"insufficient (< {MIN_PAIRS} {unit})"
    if row.r is None:
        return f"Friedman χ² = {row.statistic:.2f}" if row.statistic is not None else "–"
    if row.ci_low is None or row.ci_high is None:
        return f"{row.r:+.2f}"
    level = row.ci_level or 0.95
    tag = "" if abs(level - 0.95) < 1e-12 else f" ({format_level(level)})"  # a finding's corrected level
    if row.degenerate:
        tag += f" degenerate: {row.differing} of {row.n} pairs differ"
        if row.ci_method not in (None, "percentile"):
            tag += f", {row.ci_method} interval"
    return f"{row.r:+.2f} [{row.ci_low:+.2f}, {row.ci_high:+.2f}]{tag}"


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
