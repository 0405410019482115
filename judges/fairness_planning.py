"""Before anything is spent: the family a fairness plan will test, and per cell its item pairs and the smallest
|r| it detects with 80% power under the declared correction."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from engine import Episode, detectable_r, format_fixed, format_pct, format_setting, format_sig, items_for_r
from personas.fairness import FairnessAnalysis

from .conversation_stats import CONVERSATION_STATS
from .fairness_blocks import ALL_DOMAINS
from .fairness_text import CORRECTION_NAMES
from .fairness_ties import TieShares
from .turn_quality import TURN_QUALITY_METRICS

__all__ = ("PLANNING_R", "planning_lines")

PLANNING_R = 0.3
"""A cell that cannot resolve |r| = 0.3 with 80% power is flagged before the run (a moderate gap, twice and
three times EduFair's 0.10 mark)."""


def _contrasts_per_dimension(pool: Sequence[Episode], channel: str) -> dict[str, int]:
    """How many contrasts each dimension of a channel tests: 5 for the opposite design, else its pairs."""
    levels: dict[str, set[str]] = defaultdict(set)
    opposite: set[str] = set()
    for e in pool:
        if e.condition.get("channel", "") == channel and e.condition.get("dimension") != "baseline":
            levels[e.condition.get("dimension", "")].add(e.condition.get("level", ""))
            if any(k.startswith("perceived_") for k in e.condition):
                opposite.add(e.condition.get("dimension", ""))
    return {d: 5 if d in opposite else len(v) * (len(v) - 1) // 2 for d, v in sorted(levels.items()) if len(v) > 1}


def _planned(episodes: Sequence[Episode]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (domain, channel) cell, its item pairs and the size of its part of the family."""
    domains = sorted({e.item.domain for e in episodes})
    cells = [ALL_DOMAINS, *domains] if len(domains) > 1 else domains
    metrics = len(TURN_QUALITY_METRICS) + len(CONVERSATION_STATS)
    planned: dict[tuple[str, str], dict[str, int]] = {}
    for domain in cells:
        pool = [e for e in episodes if domain == ALL_DOMAINS or e.item.domain == domain]
        for channel in sorted({e.condition.get("channel", "") for e in pool}):
            contrasts = _contrasts_per_dimension(pool, channel)
            if contrasts:
                n = len({e.item.id for e in pool})
                planned[(domain, channel)] = {"pairs": n, "family": sum(contrasts.values()) * metrics}
    return planned


def planning_lines(
    episodes: Sequence[Episode],
    analysis: FairnessAnalysis,
    *,
    power_r: float | None = None,
    ties: TieShares | None = None,
) -> list[str]:
    """The planning note: the family a plan will test, per cell its pairs and detectable |r|, and with `power_r`
    the items per cell that detect |r| = power_r with no ties and with `ties`' mean and most tied metric (seconds
    of search, so only when asked)."""
    planned = _planned(episodes)
    if not planned:
        return []
    run_family = sum(cell["family"] for cell in planned.values())
    method = CORRECTION_NAMES[analysis.correction]
    lines = [
        f"planning: a family of {run_family} contrasts"
        + (" per run" if analysis.family == "run" else " (corrected per domain cell)")
        + f", {method} at q = {format_setting(analysis.q)}; 80% power for one real gap among them "
        "(exact signed-rank test, continuous differences; ties and zeros cost more):"
    ]
    alpha_run = analysis.q if analysis.correction == "none" else analysis.q / run_family
    if power_r is not None:
        lines.append(_power_line(power_r, alpha_run, ties))
    short = 0
    cache: dict[tuple[int, float], float | None] = {}
    for (domain, channel), cell in planned.items():
        m = run_family if analysis.family == "run" else sum(c["family"] for (d, _), c in planned.items() if d == domain)
        alpha = analysis.q if analysis.correction == "none" else analysis.q / m
        key = (cell["pairs"], alpha)
        if key not in cache:
            cache[key] = detectable_r(cell["pairs"], alpha)
        r = cache[key]
        shown = "none (too few pairs for that level)" if r is None else f"|r| ≥ {format_fixed(r)}"
        warn = r is None or r > PLANNING_R
        short += warn
        lines.append(
            f"  {channel} · domain {domain}: {cell['pairs']} item pairs, detectable {shown}"
            + (f"  (warning: cannot resolve |r| = {PLANNING_R})" if warn else "")
        )
    if short:
        lines.append(
            f"warning: {short} of {len(planned)} cells cannot resolve |r| = {PLANNING_R} with 80% power; add items "
            "or narrow the family (fewer dimensions, `design.analysis.family: domain`)."
        )
    return lines


def _power_line(power_r: float, alpha: float, ties: TieShares | None) -> str:
    """Items per cell for |r| = power_r with no ties, at the measured mean tie share and at the most tied metric's."""
    shares = [("continuous differences", 0.0)]
    if ties is not None:
        metric, most = ties.most
        shares += [
            (f"{format_pct(ties.mean)} tied pairs (the mean over metrics)", ties.mean),
            (f"{format_pct(most)} ({metric})", most),
        ]
    sizes = [items_for_r(power_r, alpha, tie_share=t) for _, t in shares]
    parts = [
        f"{'more than 1000' if n is None else n} with {label}" for n, (label, _) in zip(sizes, shares, strict=True)
    ]
    return (
        f"  items per cell for |r| = {format_setting(power_r)} at 80% power, level {format_sig(alpha, 2)} "
        "per contrast: "
        + ", ".join(parts)
        + (f"; tie shares from this plan run on the calibrated sim, {ties.items} items per source" if ties else "")
    )
