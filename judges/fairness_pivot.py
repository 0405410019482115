"""EduFair Tables 9–12 as simrun draws them: one table per cue channel and dimension, a row per domain, a column
per turn metric with its desirability mark, each cell the signed r with its interval, and the row's mean |r|.

A dimension of more than two levels (SES) has several pairs; a cell shows one r, the pair of its first and last
levels in the design's order (low- against high-income), as the paper's tables show one SES r per cell. The other
pairs stay in the contrasts table.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import Block, BlockCell, Note, Section, Strong, Table, family_caption, format_effect, format_fixed, format_p

from .fairness_model import FairnessContrast, FairnessResults
from .protocols import fairness_design
from .turn_quality import TURN_QUALITY_METRICS

__all__ = ("DESIRABLE", "pivot_tables")

DESIRABLE = {"answer_leakage": "↓"} | {m: "↑" for m in TURN_QUALITY_METRICS if m != "answer_leakage"}
"""EduFair's marks: less leakage is better, more of every other turn metric is better."""


def _pair(results: FairnessResults, domain: str, channel: str, dimension: str) -> tuple[str, str] | None:
    """The first and last levels of a dimension, in the order the run's means list them."""
    for means in results.means:
        if (means.domain, means.channel, means.dimension) == (domain, channel, dimension) and len(means.levels) >= 2:
            levels = list(means.levels)
            return levels[0], levels[-1]
    return None


def _cell(row: FairnessContrast | None) -> BlockCell:
    if row is None or row.r is None:
        return None
    text = format_effect(row)
    return Strong(f"{text}, p (family) {format_p(row.p_family)}") if row.finding else text


def _table(results: FairnessResults, channel: str, dimension: str, rows: Sequence[FairnessContrast]) -> Section:
    domains = sorted({c.domain for c in rows}, key=lambda d: (d != "all", d))
    body: list[tuple[BlockCell, ...]] = []
    shown_pair = ""
    for domain in domains:
        pair = _pair(results, domain, channel, dimension)
        by_metric: dict[str, FairnessContrast] = {}
        for c in rows:
            if c.domain == domain and c.test != "friedman" and (pair is None or {c.a, c.b} == set(pair)):
                by_metric.setdefault(c.metric, c)
        found = [by_metric.get(m) for m in TURN_QUALITY_METRICS]
        values = [abs(f.r) for f in found if f is not None and f.r is not None]
        mean = format_fixed(sum(values) / len(values), 3) if values else None
        body.append((domain, *(_cell(by_metric.get(m)) for m in TURN_QUALITY_METRICS), mean))
        if by_metric and not shown_pair:
            first = next(iter(by_metric.values()))
            shown_pair = f"{first.a} − {first.b}"
    table = Table(
        ("domain", *(f"{m} {DESIRABLE[m]}" for m in TURN_QUALITY_METRICS), "mean abs(r)"),
        tuple(body),
        caption=f"Signed rank-biserial r [95% interval] of {shown_pair or 'the pair'} per turn metric (bold: a "
        "finding, with the p (family) that decided it: "
        f"{family_caption(results.correction.method, results.correction.family_size, results.correction.q)}); "
        "↑ marks a metric where more is better, ↓ where less is better, so a positive r under ↑ (or a "
        "negative one under ↓) favours the first level.",
        key=f"pivot-{channel}-{dimension}",
        console_columns=(),
    )
    title = f"{dimension} · {fairness_design(channel, [dimension])}"
    return Section(title, (table,), key=f"pivot-{channel}-{dimension}")


def pivot_tables(results: FairnessResults) -> list[Block]:
    """The section of per-dimension pivots (none when the run has no contrast of a turn metric)."""
    rows = [c for c in results.contrasts if c.metric in TURN_QUALITY_METRICS]
    keys = sorted({(c.channel, c.dimension) for c in rows})
    if not keys:
        return []
    intro = Note(
        "One table per dimension, as EduFair's Tables 9–12 (there one per model; here the run's tutor): a row per "
        "domain ('all' pools them, simrun's addition), a column per turn metric."
    )
    sections = [_table(results, ch, d, [c for c in rows if (c.channel, c.dimension) == (ch, d)]) for ch, d in keys]
    title = "Signed r per dimension (EduFair Tables 9–12)"
    return [Section(title, (intro, *sections), key="pivot", provenance="EduFair Tables 9–12")]
