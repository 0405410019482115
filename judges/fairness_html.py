"""The fairness section of report.html: findings, mean-|r| tables, forest plots of r, the 2×2 panel.

A finding (adjusted p ≤ q over the run's family) is drawn in red and its table row highlighted; its interval
is at the corrected level. The shaded band marks |r| < 0.10, EduFair's descriptive mark, never a verdict.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from engine import MEANINGFUL_R, MIN_PAIRS, Cell, format_effect, format_p, new_figure, paragraph, plot, section, table

from .conversation_stats import CONVERSATION_STATS
from .student_audit import AUDIT_METRICS
from .turn_quality import TURN_QUALITY_METRICS

__all__ = ("fairness_html", "mean_abs_r_cell")

METRICS = (*TURN_QUALITY_METRICS, *CONVERSATION_STATS)
MISMATCH = ("matched", "mismatched", "perceived", "stated", "interaction")
ALL_DOMAINS = "all"
MAX_FOREST_ROWS = 60


def _label(c: Mapping[str, Any]) -> str:
    if c.get("test") in MISMATCH:
        return f"{c['test']} ({c['a']} − {c['b']})"
    if c.get("test") == "friedman":
        return "Friedman over all levels"
    return f"{c['a']} − {c['b']}"


def _metric_order(metric: str) -> int:
    return METRICS.index(metric) if metric in METRICS else len(METRICS)


def _forest(contrasts: Sequence[Mapping[str, Any]], key: str, title: str) -> Markup:
    estimated = [c for c in contrasts if c["r"] is not None and c["ci_low"] is not None]
    shown = estimated
    if len(estimated) > MAX_FOREST_ROWS:
        ranked = sorted(estimated, key=lambda c: (not c["violation"], -abs(c["r"])))[:MAX_FOREST_ROWS]
        keep = {id(c) for c in ranked}
        shown = [c for c in estimated if id(c) in keep]
    rows: list[list[Cell]] = []
    classes: list[str] = []
    for c in contrasts:
        rows.append(
            [
                c["metric"],
                _label(c),
                c.get("test", ""),
                format_effect(c),
                format_p(c["p"]),
                format_p(c["p_adjusted"]),
                None if c.get("omnibus_p") is None else format_p(c["omnibus_p"]),
                c["n"],
                None if c.get("mean_diff") is None else round(c["mean_diff"], 4),
            ]
        )
        classes.append("violation" if c["violation"] else "")
    numbers = table(
        ("metric", "contrast", "test", "r [interval]", "p", "p adj.", "Friedman p", "n", "mean difference"),
        rows,
        row_classes=classes,
        key=f"forest-{key}",
    )
    if not estimated:
        return (
            paragraph(f"{title}: no interval to plot: fewer than {MIN_PAIRS} items had a score at every level.")
            + numbers
        )
    fig = new_figure(7.5, 0.24 * max(len(shown), 3) + 1.3)
    ax = fig.add_subplot()
    ax.axvspan(-MEANINGFUL_R, MEANINGFUL_R, color="#eaecf0", zorder=0)
    ax.axvline(0, color="#344054", linewidth=0.8)
    for row, c in enumerate(shown):
        color = "#d92d20" if c["violation"] else "#1570ef"
        ax.plot([c["ci_low"], c["ci_high"]], [row, row], color=color, linewidth=1.6)
        ax.plot([c["r"]], [row], marker="D" if c["violation"] else "o", color=color, markersize=5)
    labels = [f"{c['metric']} · {c['test'] if c.get('test') in MISMATCH else _label(c)}" for c in shown]
    ax.set_yticks(range(len(shown)), labels, fontsize=7)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("rank-biserial r, bootstrap interval (red: finding, adjusted p ≤ q; interval at corrected level)")
    ax.grid(axis="x", alpha=0.3)
    caption = f"{title}: paired differences between levels, items as pairs."
    if len(shown) < len(estimated):
        caption += f" The plot shows {len(shown)} of {len(estimated)} intervals (findings first, then largest |r|)."
    if len(estimated) < len(contrasts):
        caption += " Rows without an interval (Friedman omnibus or insufficient) are in the table only."
    return plot(fig, key=f"forest-{key}", caption=caption, numbers=numbers)


def _mismatch_panel(contrasts: Sequence[Mapping[str, Any]], means: Sequence[Mapping[str, Any]], key: str) -> Markup:
    cell_means = {m["metric"]: m["levels"] for m in means}
    levels = sorted({part for m in means for level in m["levels"] for part in level.split("/")})
    if len(levels) != 2:
        return paragraph("The 2×2 panel needs exactly two levels; see the contrasts table.")
    first, second = levels
    cells = [(s, p) for s in (first, second) for p in (first, second)]
    metrics = sorted(cell_means, key=_metric_order)
    columns = 3
    rows_n = math.ceil(len(metrics) / columns)
    fig = new_figure(7.5, 2.1 * rows_n + 0.4)
    axes = fig.subplots(rows_n, columns, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= len(metrics):
            ax.set_axis_off()
            continue
        metric = metrics[index]
        grid = [[cell_means[metric].get(f"{s}/{p}") for p in (first, second)] for s in (first, second)]
        values = [[math.nan if v is None else v for v in row] for row in grid]
        ax.imshow(values, cmap="Blues", aspect="auto")
        finite = [v for row in values for v in row if not math.isnan(v)]
        middle = (min(finite) + max(finite)) / 2 if finite else 0.0
        for i in range(2):
            for j in range(2):
                v = values[i][j]
                ax.text(
                    j,
                    i,
                    "–" if math.isnan(v) else f"{v:.3g}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if not math.isnan(v) and v > middle and max(finite) > min(finite) else "black",
                )
        ax.set_title(metric, fontsize=8)
        ax.set_xticks([0, 1], [f"told {first}", f"told {second}"], fontsize=7)
        ax.set_yticks([0, 1], [f"is {first}", f"is {second}"], fontsize=7)
    by_metric: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for c in contrasts:
        if c.get("test") in MISMATCH:
            by_metric[c["metric"]][c["test"]] = c
    rows: list[list[Cell]] = []
    classes: list[str] = []
    for metric in metrics:
        found = by_metric.get(metric, {})
        effects: list[Cell] = []
        for name in MISMATCH:
            contrast = found.get(name)
            if contrast is None:
                effects.append(None)
            elif contrast["violation"]:
                effects.append(Markup('<strong class="viol">{}</strong>').format(format_effect(contrast)))
            else:
                effects.append(format_effect(contrast))
        means_row: list[Cell] = [
            None if (v := cell_means[metric].get(f"{s}/{p}")) is None else round(v, 4) for s, p in cells
        ]
        rows.append([metric, *means_row, *effects])
        classes.append("has-violation" if any(c["violation"] for c in found.values()) else "")
    numbers = table(
        ("metric", *(f"{s} / told {p}" for s, p in cells), *(f"{name} r [95% CI]" for name in MISMATCH)),
        rows,
        row_classes=classes,
        key=f"mismatch-{key}",
    )
    return plot(
        fig,
        key=f"mismatch-{key}",
        caption=f"Mean score per cell: rows are the gender the student states, columns the gender the tutor is "
        f"told. matched = {first}/{first} − {second}/{second}; mismatched = {first}/{second} − {second}/{first}; "
        "perceived and stated are the main effects; red bold marks a finding.",
        numbers=numbers,
    )


_CONTRAST_COLUMNS = ("domain", "channel", "dimension", "metric", "contrast", "r [interval]", "p", "p adj.", "n")


def _contrast_cells(c: Mapping[str, Any]) -> tuple[Cell, ...]:
    return (
        c["domain"],
        c["channel"],
        c["dimension"],
        c["metric"],
        _label(c),
        format_effect(c),
        format_p(c["p"]),
        format_p(c["p_adjusted"]),
        c["n"],
    )


def mean_abs_r_cell(
    data: Mapping[str, Any], domain: str, channel: str
) -> tuple[dict[tuple[str, str], Any], list[str], dict[str, float], dict[str, float]]:
    """One domain × channel of `mean_abs_r`: its cells by (metric, dimension), the dimensions, and the means
    over dimensions (per metric) and over the turn metrics (per dimension) — what every renderer reads."""
    tables = data["mean_abs_r"]

    def here(row: Mapping[str, Any]) -> bool:
        return (row["domain"], row["channel"]) == (domain, channel)

    cells = {(c["metric"], c["dimension"]): c for c in tables["cells"] if here(c)}
    by_metric = {r["metric"]: r["mean_abs_r"] for r in tables["by_metric"] if here(r)}
    by_dimension = {r["dimension"]: r["mean_abs_r"] for r in tables["by_dimension"] if here(r)}
    return cells, sorted({d for _, d in cells}), by_metric, by_dimension


def _mean_table(data: Mapping[str, Any], domain: str, channel: str, key: str) -> Markup:
    cells, dimensions, by_metric, by_dimension = mean_abs_r_cell(data, domain, channel)
    body: list[list[Cell]] = []
    for metric in METRICS:
        line: list[Cell] = [metric]
        for d in dimensions:
            cell = cells.get((metric, d))
            if cell is None:
                line.append(None)
            elif cell["finding"]:
                line.append(Markup('<strong class="viol">{:.3f}</strong>').format(cell["mean_abs_r"]))
            else:
                line.append(f"{cell['mean_abs_r']:.3f}")
        line.append(None if metric not in by_metric else f"{by_metric[metric]:.3f}")
        body.append(line)
    body.append(["mean of 5 turn metrics", *(_three(by_dimension.get(d)) for d in dimensions), None])
    return table(("metric", *dimensions, "mean over dimensions"), body, key=f"mean-r-{key}")


def _three(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def fairness_html(
    data: Mapping[str, Any], *, headline: str, small: str | None, audit_labels: Mapping[str, str]
) -> Markup:
    """The fairness results from `summary["fairness"]`; `headline` names the family, its method and what chance
    gives; `small` (when set) says the run was too small to test anything."""
    contrasts: Sequence[Mapping[str, Any]] = data["contrasts"]
    domains = sorted({c["domain"] for c in contrasts})
    shown_domains = [ALL_DOMAINS] if ALL_DOMAINS in domains else domains
    findings = data["violations"]
    lead = [paragraph(headline)]
    if small is not None:
        lead.append(paragraph(Markup("<strong>{}</strong>").format(small)))
    elif findings:
        lead.append(
            table(
                _CONTRAST_COLUMNS,
                [_contrast_cells(c) for c in findings],
                key="findings",
            )
        )
    parts: list[Markup] = [section(f"Fairness findings ({len(findings)})", *lead, key="violations")]
    mean_cells = {(c["domain"], c["channel"]) for c in data["mean_abs_r"]["cells"]}
    for domain, channel in sorted(mean_cells, key=lambda k: (k[0] != ALL_DOMAINS, k[0], k[1])):
        tag = f"{channel}-{domain}"
        parts.append(
            section(
                f"Mean |r| ({channel} cues, domain {domain})",
                paragraph(
                    "Cell: mean |r| over the dimension's contrasts; last column: mean over dimensions (EduFair "
                    "Table 6); last row: mean over the five turn metrics (Table 8). Bold red: the cell holds a "
                    f"finding. |r| ≥ {MEANINGFUL_R:.2f} is a descriptive mark, not a verdict."
                ),
                _mean_table(data, domain, channel, tag),
                key=f"mean-r-{tag}",
            )
        )
    aggregates = data["mean_abs_r"]["aggregates"]
    if aggregates:
        parts.append(
            section(
                "Ped./Conv. aggregates (EduFair Tables 5 and 7)",
                table(
                    ("domain", "channel", "cell", "Ped. (turn metrics)", "Conv. (conversation metrics)"),
                    [(a["domain"], a["channel"], a["label"], _three(a["ped"]), _three(a["conv"])) for a in aggregates],
                    key="aggregates",
                ),
                key="aggregates",
            )
        )
    for domain in shown_domains:
        for channel in sorted({c["channel"] for c in contrasts if c["domain"] == domain}):
            cell = [c for c in contrasts if c["domain"] == domain and c["channel"] == channel]
            tag = f"{channel}-{domain}"
            for dimension in sorted({c["dimension"] for c in cell}):
                rows = sorted(
                    (c for c in cell if c["dimension"] == dimension), key=lambda c: _metric_order(c["metric"])
                )
                blocks = [_forest(rows, f"{tag}-{dimension}", f"{dimension} ({channel} cues, domain {domain})")]
                if any(c.get("test") in MISMATCH for c in rows):
                    means = [
                        m
                        for m in data["means"]
                        if m["domain"] == domain and m["channel"] == channel and m["dimension"] == dimension
                    ]
                    blocks.append(_mismatch_panel(rows, means, f"{tag}-{dimension}"))
                parts.append(
                    section(
                        f"Forest plot: {dimension} · {channel} cues · domain {domain}",
                        *blocks,
                        key=f"forest-{tag}-{dimension}",
                    )
                )
    if len(shown_domains) < len(domains):
        others = [c for c in contrasts if c["domain"] != ALL_DOMAINS]
        parts.append(
            section(
                "Per-domain contrasts",
                paragraph("The plots above pool the domains; every per-domain contrast is listed here."),
                table(
                    _CONTRAST_COLUMNS,
                    [_contrast_cells(c) for c in others],
                    row_classes=["violation" if c["violation"] else "" for c in others],
                    key="per-domain",
                ),
                key="per-domain",
            )
        )
    audit_rows = [
        [
            row["channel"],
            row["dimension"],
            row["level"],
            row["dialogues"],
            *(None if row.get(flag) is None else f"{row[flag]:.0%}" for flag in AUDIT_METRICS),
        ]
        for row in data["audit"]
    ]
    parts.append(
        section(
            "Simulated-student audit",
            paragraph(
                "Share of dialogues where a detector flagged the student (a biased student can fake tutor bias)."
            ),
            table(
                ("channel", "dimension", "level", "dialogues", *(audit_labels.get(f, f) for f in AUDIT_METRICS)),
                audit_rows,
                key="audit",
            ),
            key="audit",
        )
    )
    reasons = sorted({reason for counts in data["stop_reasons"].values() for reason in counts})
    parts.append(
        section(
            "Why dialogues stopped",
            table(
                ("condition", *reasons),
                [
                    [condition, *(counts.get(r, 0) for r in reasons)]
                    for condition, counts in data["stop_reasons"].items()
                ],
                key="stop-reasons",
            ),
            key="stop-reasons",
        )
    )
    return Markup("").join(parts)
