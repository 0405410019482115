"""The `cases` section of report.html: success, criteria, MCQ vs chance, reference gain, de-escalation, diversity.

Every plot is followed by the table of the numbers it draws, read from the same `summary["cases"]` rows, so the
page and summary.json never disagree. Intervals are the summary's: resampling cases for rates, bootstrap for r.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from engine import MEANINGFUL_R, Cell, format_effect, format_p, new_figure, paragraph, pct_or_none, plot, section, table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ("cases_html", "rate_cell")

ALL = "all"
DISTINCT_N = (1, 2, 3, 4)
_COLORS = ("#1570ef", "#f79009", "#12b76a", "#7a5af8", "#d92d20", "#667085")


def rate_cell(row: Mapping[str, Any] | None) -> str:
    """ "rate [low, high] (k/n)", or "–" without data."""
    if row is None or row.get("rate") is None:
        return "–"
    return f"{row['rate']:.0%} [{row['low']:.0%}, {row['high']:.0%}] ({row['k']}/{row['n']})"


def _intervals(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[Mapping[str, Any] | None]]],
    *,
    xlabel: str,
    references: Sequence[tuple[int, float]] = (),
    width: float = 7.5,
) -> Figure:
    """A horizontal dot plot: one row per label, one offset dot with its interval per series; x is a share 0–1.

    `references` marks a value on one row (e.g. chance accuracy) with a short vertical tick.
    """
    fig = new_figure(width, 0.34 * len(labels) * max(1, len(series)) ** 0.5 + 1.5)
    ax = fig.add_subplot()
    step = 0.7 / max(1, len(series))
    for s, (name, cells) in enumerate(series):
        offset = (s - (len(series) - 1) / 2) * step
        xs, ys, lows, highs = [], [], [], []
        for row, cell in enumerate(cells):
            if cell is None or cell.get("rate") is None:
                continue
            xs.append(cell["rate"])
            ys.append(row + offset)
            lows.append(max(0.0, cell["rate"] - cell["low"]))
            highs.append(max(0.0, cell["high"] - cell["rate"]))
        if xs:
            color = _COLORS[s % len(_COLORS)]
            ax.errorbar(xs, ys, xerr=[lows, highs], fmt="o", color=color, ecolor=color, capsize=2, ms=4, label=name)
    for row, value in references:
        ax.plot([value, value], [row - 0.42, row + 0.42], color="#344054", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return sorted({(r["response"], r["reference"]) for r in rows})


def _success(data: Mapping[str, Any]) -> Markup:
    rows = data["success"]
    if not rows:
        return paragraph("No open response was judged, so there is no success rate (the open task did not run).")
    columns = _columns(rows)
    challenges = [*data["challenge_types"], ALL]
    cells = {(r["challenge_type"], r["response"], r["reference"]): r for r in rows}
    series = [(f"{resp} · ref {ref}", [cells.get((c, resp, ref)) for c in challenges]) for resp, ref in columns]
    fig = _intervals(
        challenges, series, xlabel="success rate (≥ 1 checklist criterion holds), 95% interval resampling cases"
    )
    numbers = table(
        ("challenge type", *(f"{resp} · ref {ref}" for resp, ref in columns)),
        [[c, *(rate_cell(cells.get((c, *col))) for col in columns)] for c in challenges],
        row_classes=[""] * len(data["challenge_types"]) + ["total"],
        key="cases-success",
    )
    return plot(
        fig,
        key="cases-success",
        caption="Open responses: share that satisfy at least one criterion of the case's checklist (majority of "
        "judge votes per criterion), per challenge type × response type × reference.",
        numbers=numbers,
    )


def _criteria(data: Mapping[str, Any]) -> Markup:
    rows = data["criteria"]
    if not rows:
        return paragraph("No open response was judged against its checklist.")
    columns = _columns(rows)
    challenges = [*data["challenge_types"], ALL]
    pooled = {
        (r["challenge_type"], r["response"], r["reference"]): {
            "rate": r["criteria_held"] / r["criteria"] if r["criteria"] else None,
            "low": r["pooled_low"],
            "high": r["pooled_high"],
            "k": r["criteria_held"],
            "n": r["criteria"],
        }
        for r in rows
    }
    series = [(f"{resp} · ref {ref}", [pooled.get((c, resp, ref)) for c in challenges]) for resp, ref in columns]
    fig = _intervals(
        challenges, series, xlabel="share of checklist criteria satisfied (pooled), 95% interval resampling cases"
    )
    numbers = table(
        ("challenge type", "response", "reference", "responses", "mean rate per response", "criteria held [95% CI]"),
        [
            (
                r["challenge_type"],
                r["response"],
                r["reference"],
                r["responses"],
                pct_or_none(r["mean_rate"]),
                rate_cell(pooled[(r["challenge_type"], r["response"], r["reference"])]),
            )
            for r in sorted(rows, key=lambda r: (r["challenge_type"] == ALL, challenges.index(r["challenge_type"])))
        ],
        key="cases-criteria",
    )
    return plot(
        fig,
        key="cases-criteria",
        caption="Criterion satisfaction: of all checklist criteria judged for the group's responses, the share "
        "that held.",
        numbers=numbers,
    )


def _mcq(data: Mapping[str, Any]) -> Markup:
    rows = data["mcq"]
    if not rows:
        return paragraph("No multiple-choice task ran.")
    variants = sorted({r["variant"] for r in rows})
    types = [*data["challenge_types"], ALL]
    fig = new_figure(7.5, 0.3 * (len(types) + 2) * len(variants) + 1.2)
    axes = fig.subplots(len(variants), 1, squeeze=False, sharex=True)
    for ax, variant in zip(axes[:, 0], variants, strict=True):
        own = [r for r in rows if r["variant"] == variant]
        by_type = {r["challenge_type"]: r for r in own if r["response"] == ALL}
        by_response = {r["response"]: r for r in own if r["response"] != ALL and r["challenge_type"] == ALL}
        shown = [(t, by_type.get(t)) for t in types] + [(f"{resp} (all types)", r) for resp, r in by_response.items()]
        for index, (_, r) in enumerate(shown):
            if r is None or r.get("rate") is None:
                continue
            beats = r["chance"] is not None and r["low"] > r["chance"]
            color = "#12b76a" if beats else "#1570ef"
            ax.errorbar(
                [r["rate"]],
                [index],
                xerr=[[max(0.0, r["rate"] - r["low"])], [max(0.0, r["high"] - r["rate"])]],
                fmt="o",
                color=color,
                capsize=2,
                ms=4,
            )
        chances = {r["chance"] for r in own if r["chance"] is not None}
        for chance in chances:
            ax.axvline(chance, color="#d92d20", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(shown)), [label for label, _ in shown], fontsize=8)
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(f"{variant} (chance {', '.join(f'{c:.0%}' for c in sorted(chances)) or '?'})", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("accuracy, 95% interval resampling cases (dashed: chance; green: interval above chance)")
    ordered = sorted(rows, key=lambda r: (r["variant"], r["response"] != ALL, r["challenge_type"] == ALL))
    numbers = table(
        ("variant", "response", "challenge type", "accuracy [95% CI] (k/n)", "chance", "p vs chance", "invalid"),
        [
            (
                r["variant"],
                r["response"],
                r["challenge_type"],
                rate_cell(r),
                pct_or_none(r["chance"]),
                format_p(r["p_vs_chance"]),
                r["invalid"],
            )
            for r in ordered
        ],
        row_classes=["total" if r["response"] == ALL and r["challenge_type"] == ALL else "" for r in ordered],
        key="cases-mcq",
    )
    return plot(
        fig,
        key="cases-mcq",
        caption="Choosing the fitting intervention: accuracy against chance (1 / options), two-sided one-sample "
        "t-test of per-case accuracy; an invalid answer counts as wrong.",
        numbers=numbers,
    )


def _signed(value: float | None, metric: str) -> str | None:
    if value is None:
        return None
    return f"{value * 100:+.1f} pts" if metric == "success" else f"{value:+.3f}"


def _reference_gain(data: Mapping[str, Any]) -> Markup:
    rows = data["reference_gain"]
    if not rows:
        return paragraph("No run with retrieved references (design.reference: false), so there is no paired gain.")
    numbers = table(
        ("metric", "response", "without", "with retrieved", "gain", "r [95% CI]", "p", "cases"),
        [
            (
                r["metric"],
                r["response"],
                None if r["mean_none"] is None else round(r["mean_none"], 3),
                None if r["mean_retrieved"] is None else round(r["mean_retrieved"], 3),
                _signed(r["gain"], r["metric"]),
                format_effect(r, "cases"),
                format_p(r["p"]),
                r["n"],
            )
            for r in rows
        ],
        row_classes=["violation" if r.get("violation") else "" for r in rows],
        key="cases-reference-gain",
    )
    labels = [f"{r['metric']} · {r['response']}" for r in rows]
    fig = new_figure(7.5, 0.32 * len(rows) + 1.4)
    means, effects = fig.subplots(1, 2, sharey=True)
    for index, r in enumerate(rows):
        if r["mean_none"] is not None and r["mean_retrieved"] is not None:
            means.plot([r["mean_none"], r["mean_retrieved"]], [index, index], color="#98a2b3", linewidth=1.2)
            means.plot([r["mean_none"]], [index], "o", color="#667085", ms=4, mfc="white")
            means.plot([r["mean_retrieved"]], [index], "o", color="#1570ef", ms=4)
        if r["r"] is not None and r["ci_low"] is not None:
            color = "#d92d20" if r.get("violation") else "#1570ef"
            effects.plot([r["ci_low"], r["ci_high"]], [index, index], color=color, linewidth=1.6)
            effects.plot([r["r"]], [index], "D" if r.get("violation") else "o", color=color, ms=5)
    means.set_yticks(range(len(rows)), labels, fontsize=8)
    means.set_ylim(len(rows) - 0.5, -0.5)
    means.set_xlim(-0.02, 1.02)
    means.set_xlabel("mean per case: ○ without, ● with retrieved")
    means.grid(axis="x", alpha=0.3)
    effects.axvspan(-MEANINGFUL_R, MEANINGFUL_R, color="#eaecf0", zorder=0)
    effects.axvline(0, color="#344054", linewidth=0.8)
    effects.set_xlim(-1.05, 1.05)
    effects.set_xlabel("rank-biserial r, 95% bootstrap CI")
    effects.grid(axis="x", alpha=0.3)
    return plot(
        fig,
        key="cases-reference-gain",
        caption="Reference gain, paired per case: with the strategies of similar cases in the prompt minus without "
        "(Wilcoxon, rank-biserial r; red: a finding, Benjamini–Hochberg adjusted p ≤ 0.05 over every gain; "
        "fewer than 15 cases is insufficient).",
        numbers=numbers,
    )


def _deescalation(data: Mapping[str, Any]) -> Markup:
    rows = data["deescalation"]
    if not rows:
        return paragraph("No interactive continuation was judged, so there is no de-escalation rate.")
    order = {t: i for i, t in enumerate([*data["challenge_types"], ALL])}
    ordered = sorted(rows, key=lambda r: (r["by"], order.get(r["group"], len(order)), r["group"]))
    fig = _intervals(
        [r["group"] for r in ordered],
        [("de-escalated", ordered)],
        xlabel="share of dialogues de-escalated, 95% interval resampling cases",
    )
    numbers = table(
        ("by", "group", "de-escalated [95% CI] (k/n)"),
        [(r["by"].replace("_", " "), r["group"], rate_cell(r)) for r in ordered],
        row_classes=["total" if r["group"] == ALL else "" for r in ordered],
        key="cases-deescalation",
    )
    return plot(
        fig,
        key="cases-deescalation",
        caption="Interactive continuation: share of dialogues where the student's behaviour had eased by the end "
        "(judged over the whole dialogue), per challenge type and by whether the first response met its checklist.",
        numbers=numbers,
    )


def _diversity(data: Mapping[str, Any]) -> Markup:
    rows = data["diversity"]
    if not rows:
        return paragraph("No open responses to measure.")
    body: list[list[Cell]] = [
        [
            r["response"],
            r["reference"],
            r["responses"],
            *(None if r[f"distinct_{n}"] is None else round(r[f"distinct_{n}"], 3) for n in DISTINCT_N),
            r["top_4gram"],
            pct_or_none(r["top_4gram_share"]),
        ]
        for r in rows
    ]
    return paragraph(
        "Distinct-n: unique n-grams over all n-grams of the group's responses (low: templated replies). The top "
        "4-gram is the one found in the most responses, with the share of responses containing it."
    ) + table(
        ("response", "reference", "responses", *(f"distinct-{n}" for n in DISTINCT_N), "top 4-gram", "share"),
        body,
        key="cases-diversity",
    )


def cases_html(data: Mapping[str, Any]) -> Markup:
    """The cases results from `summary["cases"]`."""
    parts = [
        section("Open responses: success rate by challenge type", _success(data), key="cases-success"),
        section("Criterion satisfaction", _criteria(data), key="cases-criteria"),
        section("Multiple choice: accuracy vs chance", _mcq(data), key="cases-mcq"),
        section("Reference gain (paired per case)", _reference_gain(data), key="cases-reference-gain"),
        section("Interactive continuation: de-escalation", _deescalation(data), key="cases-deescalation"),
        section("Diversity of responses (distinct-n)", _diversity(data), key="cases-diversity"),
    ]
    if data["skipped"]:
        skipped = ", ".join(f"{task} {count}" for task, count in data["skipped"].items())
        parts.append(paragraph(f"Skipped (the case lacks the material for the task): {skipped}.", css="note"))
    return Markup("").join(parts)
