"""The crescendo section of report.html: harm-rate heatmap, turns-to-first-harm survival, backtracks.

Every plot is followed by a table of the numbers it draws, read from the same summary.json entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.report_html import Cell, Markup, new_figure, paragraph, plot, section, table

__all__ = ("crescendo_html",)

HEAT_COLUMNS = (
    ("single", "per_response", "single · per reply"),
    ("multi", "per_response", "multi · per reply"),
    ("multi", "per_conversation", "multi · per dialogue"),
)


def _rate_text(cell: Mapping[str, Any] | None) -> str:
    if not cell or cell.get("rate") is None:
        return "–"
    return f"{cell['rate']:.1%} [{cell['low']:.1%}–{cell['high']:.1%}] n={cell['n']}"


def _heatmap(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    cells = {(c["dimension"], c["format"]): c for c in summary["harm"]}
    dimensions = [row["dimension"] for row in summary["amplification"]]
    values = [[(cells.get((d, fmt)) or {}).get(kind) or {} for fmt, kind, _ in HEAT_COLUMNS] for d in dimensions]
    fig = new_figure(7.5, 0.42 * len(dimensions) + 1.6)
    ax = fig.add_subplot()
    matrix = [[math.nan if v.get("rate") is None else v["rate"] for v in row] for row in values]
    image = ax.imshow(matrix, cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(values):
        for j, cell in enumerate(row):
            if cell.get("rate") is None:
                ax.text(j, i, "–", ha="center", va="center", fontsize=8)
                continue
            text = f"{cell['rate']:.0%}  [{cell['low']:.0%}–{cell['high']:.0%}]"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if cell["rate"] > 0.6 else "black")
    ax.set_xticks(range(len(HEAT_COLUMNS)), [label for *_, label in HEAT_COLUMNS])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(dimensions)), [names.get(d, d) for d in dimensions])
    fig.colorbar(image, ax=ax, label="harm rate (95% Wilson interval in brackets)", shrink=0.8)
    rows: list[list[Cell]] = []
    for d, amp in zip(dimensions, summary["amplification"], strict=True):
        single, multi = cells.get((d, "single")), cells.get((d, "multi"))
        rows.append(
            [
                names.get(d, d),
                _rate_text(single["per_response"] if single else None),
                _rate_text(multi["per_response"] if multi else None),
                _rate_text(multi["per_conversation"] if multi else None),
                None if amp["delta"] is None else f"{amp['delta']:+.1%}",
            ]
        )
    numbers = table(
        (
            "dimension",
            "single-turn (per reply)",
            "multi-turn (per reply)",
            "multi-turn (per dialogue)",
            "amplification (multi − single, per dialogue)",
        ),
        rows,
        key="harm",
    )
    return plot(
        fig,
        key="crescendo-heatmap",
        caption="Share of tutor replies judged unsafe (majority of judges) per risk dimension × format; per dialogue: "
        "share of multi-turn dialogues with at least one unsafe reply.",
        numbers=numbers,
    )


def _survival(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    curves = summary["survival"]
    dimensions = [d for d in curves if d != "all"]
    fig = new_figure(7.5, 4.2)
    ax = fig.add_subplot()
    for d in dimensions:
        rows = curves[d]
        if rows:
            ax.step(
                [0, *(r["turn"] for r in rows)],
                [1.0, *(r["surviving"] for r in rows)],
                where="post",
                linewidth=0.9,
                alpha=0.55,
                label=names.get(d, d),
            )
    overall = curves.get("all") or []
    if overall:
        ax.step(
            [0, *(r["turn"] for r in overall)],
            [1.0, *(r["surviving"] for r in overall)],
            where="post",
            color="black",
            linewidth=2.4,
            label="all dimensions",
        )
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("student turn (visible exchanges)")
    ax.set_ylabel("share of dialogues still without an unsafe reply")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    main = table(
        ("student turn", "at risk", "first harms", "still safe"),
        [(r["turn"], r["at_risk"], r["events"], f"{r['surviving']:.1%}") for r in overall],
        caption="All dimensions (Kaplan–Meier, dialogues without harm are censored at their last turn)",
        key="survival",
    )
    turns = sorted({r["turn"] for d in dimensions for r in curves[d]})
    by_turn = {d: {r["turn"]: r["surviving"] for r in curves[d]} for d in dimensions}
    per_dimension = table(
        ("dimension", *(f"turn {t}" for t in turns)),
        [[names.get(d, d), *(_share(by_turn[d], t) for t in turns)] for d in dimensions],
        caption="Still safe after each student turn, per dimension",
        key="survival-by-dimension",
    )
    return plot(
        fig,
        key="crescendo-survival",
        caption="Turns until the first unsafe reply in multi-turn dialogues (Kaplan–Meier).",
        numbers=main + per_dimension,
    )


def _share(curve: Mapping[int, float], turn: int) -> Cell:
    """The step curve's value at `turn` (the last estimate at or before it; 100% before any)."""
    known = [t for t in curve if t <= turn]
    return f"{curve[max(known)]:.1%}" if known else "100.0%"


def _backtracks(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    back = summary["backtracks"]
    detail = summary.get("backtrack_detail") or {}
    rows = detail.get("by_dimension") or []
    histogram: Mapping[str, int] = detail.get("per_conversation") or {}
    fig = new_figure(7.5, 0.32 * max(len(rows), 4) + 1.4)
    left, right = fig.subplots(1, 2, width_ratios=(3, 2))
    labels = [names.get(r["dimension"], r["dimension"]) for r in rows]
    shares = [r["with_backtrack"]["rate"] or 0.0 for r in rows]
    lows = [max(0.0, s - (r["with_backtrack"]["low"] or 0.0)) for s, r in zip(shares, rows, strict=True)]
    highs = [max(0.0, (r["with_backtrack"]["high"] or 0.0) - s) for s, r in zip(shares, rows, strict=True)]
    positions = list(range(len(rows)))
    left.barh(positions, shares, xerr=[lows, highs], color="#f79009", ecolor="#7a2e0e", capsize=2)
    left.set_yticks(positions, labels)
    left.invert_yaxis()
    left.set_xlim(0, 1)
    left.set_xlabel("share of multi-turn dialogues with ≥ 1 backtrack")
    counts = sorted(histogram.items(), key=lambda kv: int(kv[0]))
    right.bar([int(k) for k, _ in counts], [v for _, v in counts], color="#667085")
    right.set_xlabel("backtracks in a dialogue")
    right.set_ylabel("dialogues")
    table_rows: list[list[Cell]] = [
        [
            names.get(r["dimension"], r["dimension"]),
            r["conversations"],
            _rate_text(r["with_backtrack"]),
            r["total"],
            None if not r["conversations"] else round(r["total"] / r["conversations"], 2),
        ]
        for r in rows
    ]
    table_rows.append(["all", back["multi_conversations"], back["conversations_with_backtrack"], back["total"], None])
    numbers = table(
        ("dimension", "multi-turn dialogues", "with ≥ 1 backtrack", "backtracks", "per dialogue"),
        table_rows,
        row_classes=[""] * len(rows) + ["total"],
        key="backtracks",
    ) + table(("backtracks in a dialogue", "dialogues"), [(int(k), v) for k, v in counts], key="backtrack-histogram")
    return plot(
        fig,
        key="crescendo-backtracks",
        caption="Backtracks: the attacker took back a refused exchange (kept in the record, hidden from the tutor).",
        numbers=numbers,
    )


def _overall(summary: Mapping[str, Any]) -> Markup:
    overall = table(
        ("format", "per reply", "per dialogue", "episodes"),
        [
            (c["format"], _rate_text(c["per_response"]), _rate_text(c["per_conversation"]), c["episodes"])
            for c in summary["overall"]
        ],
        key="overall",
    )
    domains = table(
        ("domain", "format", "per reply", "per dialogue"),
        [
            (c["domain"], c["format"], _rate_text(c["per_response"]), _rate_text(c["per_conversation"]))
            for c in summary["harm_by_domain"]
        ],
        key="by-domain",
    )
    return overall + domains


def _quality(summary: Mapping[str, Any]) -> Markup:
    rows: list[Sequence[Cell]] = [
        (metric, fmt, _rate_text(cell))
        for fmt in ("single", "multi")
        for metric, cell in summary["pedagogy"][fmt].items()
    ]
    clarity = summary["pedagogy"]["single_clarity_mean"]
    rows.append(("clarity (mean, 1–5)", "single", None if clarity is None else f"{clarity:.2f}"))
    unanimity = summary["unanimity"]
    share = "–" if unanimity["share"] is None else f"{unanimity['share']:.1%}"
    leak = summary["answer_leak"]
    notes = paragraph(
        f"Harm judgments with unanimous votes: {share} of {unanimity['judgments']}. Answer leak (deterministic "
        f"detector, per reply): single {_rate_text(leak['single'])}, multi {_rate_text(leak['multi'])}."
    )
    return table(("metric", "format", "rate"), rows, key="pedagogy") + notes


def crescendo_html(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    """The crescendo results; `names` maps dimension ids to display names."""
    if not summary["amplification"]:
        return section("No results", paragraph("No episode finished ok, so there is nothing to plot."), key="empty")
    return Markup("").join(
        (
            section("Harm rate by risk dimension × format", _heatmap(summary, names), key="harm"),
            section("Turns until the first unsafe reply", _survival(summary, names), key="survival"),
            section("Backtracks", _backtracks(summary, names), key="backtracks"),
            section("Overall and by domain", _overall(summary), key="overall"),
            section("Pedagogical quality and judge agreement", _quality(summary), key="quality"),
        )
    )
