"""What the `fairness` report shows, once for report.md, the terminal and report.html.

A finding (adjusted p ≤ q over the run's family) is bold in the tables and drawn in red, its interval at the
corrected level. The shaded band of a forest plot marks |r| < 0.10, EduFair's descriptive mark, never a verdict.
The terminal shows the family, the findings and the mean-|r| tables; the files show everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import (
    MEANINGFUL_R,
    MIN_PAIRS,
    SIMRUN_ADDITION,
    Block,
    BlockCell,
    Forest,
    ForestPanel,
    GridPanel,
    HeatGrid,
    Interval,
    Note,
    Section,
    Strong,
    Table,
    family_caption,
    format_effect,
    format_estimate,
    format_fixed,
    format_p,
    format_pct,
    format_setting,
    format_sig,
)

from .conversation_stats import CONVERSATION_STATS
from .fairness_mismatch import MISMATCH_CONTRASTS
from .fairness_model import (
    Correction,
    DimensionMean,
    FairnessContrast,
    FairnessResults,
    LevelMeans,
    MeanCell,
    MetricMean,
    NullRef,
)
from .fairness_pivot import pivot_tables
from .fairness_run_blocks import audit, judged_replies, stop_reasons
from .fairness_text import chance_note, family_line, no_findings, too_small
from .protocols import fairness_design
from .turn_quality import TURN_QUALITY_METRICS

__all__ = ("ALL_DOMAINS", "fairness_blocks")

METRICS = (*TURN_QUALITY_METRICS, *CONVERSATION_STATS)
ALL_DOMAINS = "all"
MAX_FOREST_ROWS = 60
_HIDDEN: tuple[str, ...] = ()
"""`console_columns` of a table the terminal leaves out."""
_CONTRAST_COLUMNS = ("domain", "channel", "dimension", "metric", "contrast", "r [interval]", "p", "p (family)")


def _three(value: float | None) -> str | None:
    return None if value is None else format_fixed(value, 3)


def _general(value: float | None) -> str | None:
    return None if value is None else format_sig(value)


def _effect(c: FairnessContrast, *, with_p: bool = False) -> BlockCell:
    """r with its interval; bold for a finding, with the p that decided it where no column of the table has it."""
    effect = format_effect(c)
    if not c.finding:
        return effect
    return Strong(f"{effect}, p (family) {format_p(c.p_family)}" if with_p else effect)


def _name(c: FairnessContrast) -> str:
    if c.test == "friedman":
        return f"Friedman: {c.a}"
    label = f"{c.a} − {c.b}"
    return f"{c.test}: {label}" if c.test in MISMATCH_CONTRASTS else label


def _location(c: FairnessContrast) -> str | None:
    """The Hodges–Lehmann estimate of a − b (the test's own location), in the metric's units."""
    return _general(c.estimate)


def _mean_difference(c: FairnessContrast) -> str | None:
    """The mean difference, flagged where it points the other way from r (ties and one large gap can do that)."""
    shown = _general(c.mean_diff)
    return None if shown is None else shown + (" (sign differs from r)" if c.direction_disagrees else "")


def _omnibus(c: FairnessContrast) -> str:
    return "" if c.omnibus_p is None else format_p(c.omnibus_p)


def _decided(correction: Correction) -> str:
    """What decides a row's verdict, named for the caption of every table that marks findings."""
    scope = "the run" if correction.family == "run" else "each domain"
    return (
        f"p (family): {family_caption(correction.method, correction.family_size, correction.q)} (over {scope}); "
        "a pair of a multi-level dimension is a finding only when its Friedman p < "
        f"{format_setting(correction.omnibus_alpha)}."
    )


def _contrast_table(
    rows: Sequence[FairnessContrast], correction: Correction, *, key: str, marked: bool, title: str = ""
) -> Table:
    """Contrasts with their cell; `marked` marks the findings' rows (a findings table marks them all)."""
    return Table(
        (*_CONTRAST_COLUMNS[:6], "Hodges–Lehmann a − b", *_CONTRAST_COLUMNS[6:], "Friedman p", "n"),
        tuple(
            (c.domain, c.channel, c.dimension, c.metric, _name(c), _effect(c), _location(c))
            + (format_p(c.p), format_p(c.p_family), _omnibus(c), c.n)
            for c in rows
        ),
        title=title,
        caption=_decided(correction),
        key=key,
        findings=tuple(c.finding for c in rows) if marked else (),
        decided_by="p (family)",
        console_columns=(
            ("domain", "dimension", "metric", "contrast", "r [interval]", "p", "p (family)", "Friedman p", "n")
            if title
            else _HIDDEN
        ),
        left=("dimension", "metric", "contrast", "r [interval]"),
    )


def _mechanism_table(data: FairnessResults) -> Table:
    """One row per dimension and contrast: the headline reads mechanisms, each finding still named with its p."""
    same = [f"{p.a} ~ {p.b} ({format_pct(p.agreement)})" for p in data.metric_agreement if p.same_signal]
    rows: list[tuple[BlockCell, ...]] = []
    for m in data.mechanisms:
        metrics = "; ".join(f"{f.metric} (p (family) {format_p(f.p_family)})" for f in m.findings)
        signals = " | ".join(" = ".join(group) for group in m.signals)
        cause = (
            None
            if m.cause is None
            else f"{m.cause} ends dialogues" + (f"; drives {', '.join(m.follows_cause)}" if m.follows_cause else "")
        )
        rows.append(
            (m.domain, m.channel, m.dimension, m.contrast, len(m.findings), len(m.signals), metrics, signals, cause)
        )
    return Table(
        ("domain", "channel", "dimension", "contrast", "findings", "signals", "metrics", "one signal", "cause"),
        tuple(rows),
        title=f"Findings by mechanism ({len(data.mechanisms)} from {len(data.findings)} findings)",
        caption="Grouped by dimension and contrast. Metrics joined by = agree on at least 95% of the turns both "
        "label in this run (one signal, not two): "
        + (", ".join(same) or "none")
        + ". An answer leak ends the dialogue, so where it is a finding the conversation metrics that follow it "
        "are its consequence, not further biases.",
        key="mechanisms",
        console_columns=("dimension", "contrast", "findings", "signals", "cause"),
        left=("metrics", "one signal", "cause"),
    )


_FINDINGS = "EduFair §3.4 (a violation: the interval excludes zero), under simrun's declared family and correction"
_MEANS = "EduFair Tables 5–8 (mean |r| per metric, per dimension, Ped./Conv.)"
_SIGNED = "EduFair Figs. 2–5 (signed rank-biserial r with 95% bootstrap interval per metric × contrast)"


def _design(channel: str, dimensions: Sequence[str]) -> str:
    return fairness_design(channel, list(dimensions))


def _cell_provenance(domain: str, dimensions: Sequence[str]) -> str:
    """A pooled domain or an intersectional stack is not in the paper, whatever table its numbers fill."""
    if any("+" in d for d in dimensions):
        return SIMRUN_ADDITION + " (an intersectional stack; EduFair treats the dimensions as independent)"
    if domain == ALL_DOMAINS:
        return SIMRUN_ADDITION + " (the domains pooled; EduFair reports each domain)"
    return ""


def _findings(data: FairnessResults) -> Section:
    correction = data.correction
    body: list[Block] = [Note(family_line(correction), console=True), Note(chance_note(correction), console=True)]
    if correction.tested == 0:
        body.append(Note(too_small(correction), console=True))
    elif data.findings:
        body.append(_mechanism_table(data))
        title = f"Fairness findings ({len(data.findings)})"
        body.append(_contrast_table(data.findings, correction, key="findings", marked=True, title=title))
    else:
        body.append(Note(f"No findings: {no_findings(correction)}", console=True))
    return Section("Fairness findings", tuple(body), key="violations", provenance=_FINDINGS)


def _domain_channels(data: FairnessResults) -> list[tuple[str, str]]:
    """Pooled cell first, then each domain, as EduFair reports per domain."""
    keys = {(c.domain, c.channel) for c in data.mean_abs_r.cells}
    return sorted(keys, key=lambda k: (k[0] != ALL_DOMAINS, k[0], k[1]))


def _against_null(value: float | None, null: NullRef | None) -> str | None:
    """`0.220 (0.205)`: the mean and, in brackets, its expected value with no effect; ↑ where it exceeds that
    null (BH over the run's means), ≥ where it shows EduFair's 0.10 mark and the cell can resolve 0.10."""
    if value is None:
        return None
    if null is None:
        return format_fixed(value, 3)
    marks = ("↑" if null.exceeds_null else "") + ("≥" if null.meaningful else "")
    return f"{format_fixed(value, 3)} ({format_fixed(null.null_mean, 3)}){marks}"


def _mean_cell(cell: MeanCell | None) -> str | None:
    return None if cell is None else f"{_against_null(cell.mean_abs_r, cell.null)}{'*' if cell.finding else ''}"


def _mean_table(data: FairnessResults, domain: str, channel: str) -> Section:
    """One metric per row, one dimension per column, then the mean over dimensions; the last row the mean over
    the turn metrics."""
    tables = data.mean_abs_r
    cells = {(c.metric, c.dimension): c for c in tables.cells if (c.domain, c.channel) == (domain, channel)}
    by_metric = {r.metric: r for r in tables.by_metric if (r.domain, r.channel) == (domain, channel)}
    by_dimension = {r.dimension: r for r in tables.by_dimension if (r.domain, r.channel) == (domain, channel)}
    dimensions = sorted({d for _, d in cells})
    rows: list[tuple[BlockCell, ...]] = [
        (metric, *(_mean_cell(cells.get((metric, d))) for d in dimensions), _mean_row(by_metric.get(metric)))
        for metric in METRICS
    ]
    rows.append(("mean of 5 turn metrics", *(_mean_row(by_dimension.get(d)) for d in dimensions), ""))
    table = Table(
        ("metric", *dimensions, "mean"),
        tuple(rows),
        title=f"Mean |r| (null mean) · {channel} cues · domain {domain} (* = cell holds a finding)",
        key=f"mean-r-{channel}-{domain}",
    )
    title = f"{_design(channel, dimensions)} · domain {domain}"
    return Section(title, (table,), key=f"mean-r-{channel}-{domain}", provenance=_cell_provenance(domain, dimensions))


def _mean_row(row: MetricMean | DimensionMean | None) -> str | None:
    return None if row is None else _against_null(row.mean_abs_r, row.null)


def _null_rows(data: FairnessResults) -> list[tuple[BlockCell, ...]]:
    """Every mean of the tables with its null reference in full."""
    tables = data.mean_abs_r
    found: list[tuple[str, str, str, NullRef | None]] = [
        (f"{c.domain} · {c.channel}", f"{c.dimension} × {c.metric}", "cell", c.null) for c in tables.cells
    ]
    found += [(f"{r.domain} · {r.channel}", r.metric, "mean over dimensions", r.null) for r in tables.by_metric]
    found += [(f"{r.domain} · {r.channel}", r.dimension, "mean of 5 turn metrics", r.null) for r in tables.by_dimension]
    for a in tables.aggregates:
        found += [
            (f"{a.domain} · {a.channel}", a.label, "Ped.", a.ped_null),
            (f"{a.domain} · {a.channel}", a.label, "Conv.", a.conv_null),
        ]
    return [
        (
            where,
            what,
            kind,
            format_fixed(null.observed, 3),
            format_estimate(null.null_mean, null.null_low, null.null_high, 3),
            format_p(null.p_larger),
            format_p(null.p_family) if null.p_family is not None else "(cell)",
            "yes" if null.exceeds_null else "no",
            "yes" if null.resolves_meaningful else "cannot resolve 0.10",
        )
        for where, what, kind, null in found
        if null is not None
    ]


def _unjudged_note(data: FairnessResults) -> list[Block]:
    left = data.judged_replies.unjudged if data.judged_replies else 0
    if not left:
        return []
    return [
        Note(
            f"{left} tutor replies were left unjudged (no valid verdict after retries): every per-turn rate "
            "and every |r| here leaves them out."
        )
    ]


def _mean_tables(data: FairnessResults) -> Section:
    intro = Note(
        "Cell = mean |r| over a dimension's contrasts (its pairs for three or more levels; Correct and Wrong for "
        "the 2×2); the last column averages over dimensions (EduFair Table 6), the last row over the five turn "
        "metrics (Table 8). In brackets: the mean's expected value with no effect at the same items, from "
        f"{data.mean_abs_r.null_method} (noise alone makes mean |r| positive). ↑: larger than that null "
        "(permutation p, Benjamini–Hochberg over the run's means per metric, per dimension and Ped./Conv., "
        "q = 0.05; a cell is never marked: its contrasts have their own corrected verdicts). "
        f"≥: EduFair's |r| ≥ {format_fixed(MEANINGFUL_R)} mark, shown only where the mean could resolve 0.10 "
        "(its null's "
        "95% range lies below 0.10); a descriptive mark, never a verdict. * marks a cell holding a finding."
    )
    body: list[Block] = [intro, *_unjudged_note(data), *(_mean_table(data, d, c) for d, c in _domain_channels(data))]
    aggregates = data.mean_abs_r.aggregates
    if aggregates:
        table = Table(
            ("domain", "channel", "cell", "Ped. (5 turn metrics)", "Conv. (4 conversation metrics)"),
            tuple(
                (a.domain, a.channel, a.label, _against_null(a.ped, a.ped_null), _against_null(a.conv, a.conv_null))
                for a in aggregates
            ),
            key="aggregates",
            console_columns=_HIDDEN,
        )
        title = "Ped./Conv. aggregates (EduFair Tables 5 and 7)"
        body.append(Section(title, (table,), key="aggregates", provenance="EduFair Tables 5 and 7"))
    nulls = _null_rows(data)
    if nulls:
        table = Table(
            (
                "domain · channel",
                "row",
                "mean",
                "observed",
                "null mean [95% range]",
                "p (larger)",
                "p (BH)",
                "exceeds null",
                "can resolve 0.10",
            ),
            tuple(nulls),
            key="mean-r-null",
            console_columns=_HIDDEN,
        )
        body.append(
            Section(
                "Null reference of every mean",
                (table,),
                key="mean-r-null",
                provenance=SIMRUN_ADDITION + " (a within-item permutation null beside EduFair's means)",
            )
        )
    designs = sorted({_design(c.channel, [c.dimension]) for c in data.mean_abs_r.cells})
    return Section(f"Mean |r| · {'; '.join(designs) or 'no design'}", tuple(body), key="mean-r", provenance=_MEANS)


def _metric_order(metric: str) -> int:
    return METRICS.index(metric) if metric in METRICS else len(METRICS)


def _plotted(rows: Sequence[FairnessContrast]) -> list[FairnessContrast]:
    """The rows with an interval, at most MAX_FOREST_ROWS of them: findings first, then the largest |r|."""
    estimated = [c for c in rows if c.r is not None and c.ci_low is not None]
    if len(estimated) <= MAX_FOREST_ROWS:
        return estimated
    ranked = sorted(estimated, key=lambda c: (not c.finding, -abs(c.r or 0.0)))[:MAX_FOREST_ROWS]
    keep = {id(c) for c in ranked}
    return [c for c in estimated if id(c) in keep]


def _forest(rows: Sequence[FairnessContrast], correction: Correction, key: str, title: str) -> list[Block]:
    numbers = Table(
        (
            "metric",
            "contrast",
            "test",
            "r [interval]",
            "p",
            "p (family)",
            "Friedman p",
            "n",
            "Hodges–Lehmann a − b",
            "mean difference",
        ),
        tuple(
            (c.metric, _name(c), c.test, _effect(c), format_p(c.p), format_p(c.p_family), _omnibus(c), c.n)
            + (_location(c), _mean_difference(c))
            for c in rows
        ),
        caption=_decided(correction),
        key=f"forest-{key}",
        findings=tuple(c.finding for c in rows),
        decided_by="p (family)",
        console_columns=_HIDDEN,
    )
    shown = _plotted(rows)
    if not shown:
        return [
            Note(f"{title}: no interval to plot: fewer than {MIN_PAIRS} items had a score at every level."),
            numbers,
        ]
    estimated = sum(1 for c in rows if c.r is not None and c.ci_low is not None)
    caption = f"{title}: paired differences between levels, items as pairs."
    if len(shown) < estimated:
        caption += f" The plot shows {len(shown)} of {estimated} intervals (findings first, then largest |r|)."
    if estimated < len(rows):
        caption += " Rows without an interval (Friedman omnibus or insufficient) are in the table only."
    intervals = tuple(
        Interval(
            f"{c.metric} · {c.test if c.test in MISMATCH_CONTRASTS else _name(c)}",
            c.r,
            c.ci_low,
            c.ci_high,
            c.finding,
        )
        for c in shown
    )
    forest = Forest(
        (ForestPanel("r", intervals),),
        numbers,
        key=f"forest-{key}",
        caption=caption,
        xlabel="rank-biserial r, bootstrap interval (red: finding, adjusted p ≤ q; interval at corrected level)",
        xlim=(-1.05, 1.05),
        band=MEANINGFUL_R,
    )
    return [forest]


def _mismatch_panel(
    rows: Sequence[FairnessContrast], means: Sequence[LevelMeans], key: str, correction: Correction
) -> list[Block]:
    """The 2×2 of stated × perceived gender per metric, and its five contrasts."""
    cell_means = {m.metric: m.levels for m in means}
    levels = sorted({part for m in means for level in m.levels for part in level.split("/")})
    if len(levels) != 2:
        return [Note("The 2×2 panel needs exactly two levels; see the contrasts table.")]
    first, second = levels
    cells = [(s, p) for s in (first, second) for p in (first, second)]
    metrics = sorted(cell_means, key=_metric_order)
    by_metric: dict[str, dict[str, FairnessContrast]] = {}
    for c in rows:
        if c.test in MISMATCH_CONTRASTS:
            by_metric.setdefault(c.metric, {})[c.test] = c
    body: list[tuple[BlockCell, ...]] = []
    for metric in metrics:
        found = by_metric.get(metric, {})
        effects = tuple(None if name not in found else _effect(found[name], with_p=True) for name in MISMATCH_CONTRASTS)
        body.append((metric, *(_general(cell_means[metric].get(f"{s}/{p}")) for s, p in cells), *effects))
    numbers = Table(
        ("metric", *(f"{s} / told {p}" for s, p in cells), *(f"{name} r [95% CI]" for name in MISMATCH_CONTRASTS)),
        tuple(body),
        key=f"mismatch-{key}",
        row_classes=tuple(
            "has-violation" if any(c.finding for c in by_metric.get(m, {}).values()) else "" for m in metrics
        ),
        console_columns=_HIDDEN,
    )
    panels = tuple(
        GridPanel(m, tuple(tuple(cell_means[m].get(f"{s}/{p}") for p in (first, second)) for s in (first, second)))
        for m in metrics
    )
    grid = HeatGrid(
        (f"is {first}", f"is {second}"),
        (f"told {first}", f"told {second}"),
        panels,
        numbers,
        key=f"mismatch-{key}",
        caption=f"Mean score per cell: rows are the gender the student states, columns the gender the tutor is "
        f"told. matched = {first}/{first} − {second}/{second}; mismatched = {first}/{second} − {second}/{first}; "
        "perceived and stated are the main effects; bold marks a finding, with the p (family) that decided it: "
        + _decided(correction),
    )
    return [grid]


def _dimension(data: FairnessResults, rows: Sequence[FairnessContrast], where: tuple[str, str, str]) -> Section:
    domain, channel, dimension = where
    tag = f"{channel}-{domain}-{dimension}"
    ordered = sorted(rows, key=lambda c: _metric_order(c.metric))
    blocks = _forest(ordered, data.correction, tag, f"{dimension} ({channel} cues, domain {domain})")
    if any(c.test in MISMATCH_CONTRASTS for c in ordered):
        means = [m for m in data.means if (m.domain, m.channel, m.dimension) == where]
        blocks += _mismatch_panel(ordered, means, tag, data.correction)
    title = f"Forest plot: {dimension} · {_design(channel, [dimension])} · domain {domain}"
    return Section(title, tuple(blocks), key=f"forest-{tag}", provenance=_cell_provenance(domain, [dimension]))


def _signed_r(data: FairnessResults) -> Section:
    """A forest plot per pooled dimension (each domain's when there is no pool), then the per-domain rows."""
    contrasts = data.contrasts
    domains = sorted({c.domain for c in contrasts})
    shown = [ALL_DOMAINS] if ALL_DOMAINS in domains else domains
    body: list[Block] = [
        Note(
            "Every contrast with its 95% bootstrap interval (a finding's interval is at the corrected level shown "
            "beside it); pairs of a multi-level dimension are listed and counted in the family whatever the "
            "Friedman p, which is shown beside them and decides whether they can be findings."
        )
    ]
    for domain in shown:
        here = [c for c in contrasts if c.domain == domain]
        for channel in sorted({c.channel for c in here}):
            for dimension in sorted({c.dimension for c in here if c.channel == channel}):
                rows = [c for c in here if (c.channel, c.dimension) == (channel, dimension)]
                body.append(_dimension(data, rows, (domain, channel, dimension)))
    if len(shown) < len(domains):
        others = [c for c in contrasts if c.domain != ALL_DOMAINS]
        note = Note("The plots above pool the domains; every per-domain contrast is listed here.")
        table = _contrast_table(others, data.correction, key="per-domain", marked=True)
        body.append(Section("Per-domain contrasts", (note, table), key="per-domain"))
    return Section("Signed r per metric × contrast", tuple(body), key="signed-r", provenance=_SIGNED)


def fairness_blocks(data: FairnessResults) -> list[Block]:
    """The family and its findings, EduFair's mean-|r| tables, every contrast, the stop reasons, the audit."""
    return [
        _findings(data),
        _mean_tables(data),
        _signed_r(data),
        *pivot_tables(data),
        *judged_replies(data.judged_replies),
        stop_reasons(data.stop_reasons),
        audit(data),
    ]
