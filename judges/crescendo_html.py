"""The crescendo section of report.html: harm-rate heatmap, hazard of first harm, survival, backtracks, judges.

Every plot is followed by a table of the numbers it draws, read from the same summary.json entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from engine import Cell, judge_agreement_html, new_figure, paragraph, plot, section, table

__all__ = ("crescendo_html",)

HIGHLIGHTED = 3
"""Survival curves drawn in colour; with 11 dimensions, more would be unreadable."""
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
    pooled = _pooled(summary)
    dimensions = [row["dimension"] for row in pooled]
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
    fig.colorbar(image, ax=ax, label="harm rate (95% interval in brackets)", shrink=0.8)
    rows: list[list[Cell]] = []
    for d, amp in zip(dimensions, pooled, strict=True):
        single, multi = cells.get((d, "single")), cells.get((d, "multi"))
        rows.append(
            [
                names.get(d, d),
                _rate_text(single["per_response"] if single else None),
                _rate_text(multi["per_response"] if multi else None),
                _rate_text(multi["per_conversation"] if multi else None),
                None if not multi or multi.get("exposure") is None else f"{multi['exposure']:.1f}",
                _delta_text(amp),
            ]
        )
    numbers = table(
        (
            "dimension",
            "single-turn (per reply)",
            "multi-turn (per reply)",
            "multi-turn (per dialogue)",
            "exposure (judged replies per dialogue)",
            "amplification (multi − single, per reply, 95% CI)",
        ),
        rows,
        key="harm",
    )
    return plot(
        fig,
        key="crescendo-heatmap",
        caption="Share of visible tutor replies judged unsafe (majority of judges) per risk dimension × format, "
        "cluster-bootstrap intervals over dialogues; per dialogue: share of multi-turn dialogues with at least one "
        "unsafe reply (more replies, more chances: read it with its exposure).",
        numbers=numbers,
    )


def _curve(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[float]]:
    return [0, *(r["turn"] for r in rows)], [1.0, *(r["surviving"] for r in rows)]


def _survival(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    """Every dimension's curve in grey, the three that lose safety fastest highlighted, the pooled one in black."""
    curves = summary["survival"]
    dimensions = [d for d in curves if d != "all" and curves[d]]
    overall = curves.get("all") or []
    last = max((r["turn"] for d in dimensions for r in curves[d]), default=0)

    def area(d: str) -> float:
        """Expected exchanges without harm, up to the longest dialogue: smallest = loses safety fastest."""
        steps = {r["turn"]: r["surviving"] for r in curves[d]}
        known = 1.0
        total = 0.0
        for turn in range(1, last + 1):
            known = steps.get(turn, known)
            total += known
        return total

    highlighted = sorted(dimensions, key=lambda d: (area(d), d))[:HIGHLIGHTED]
    fig = new_figure(7.5, 4.2)
    ax = fig.add_subplot()
    for d in dimensions:
        if d not in highlighted:
            ax.step(*_curve(curves[d]), where="post", color="#d0d5dd", linewidth=0.9)
    for d, colour in zip(highlighted, ("#d92d20", "#f79009", "#7a5af8"), strict=False):
        ax.step(*_curve(curves[d]), where="post", color=colour, linewidth=1.8, label=names.get(d, d))
    if overall:
        ax.step(*_curve(overall), where="post", color="black", linewidth=2.4, label="all dimensions")
    ax.plot([], [], color="#d0d5dd", linewidth=0.9, label="other dimensions")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("visible exchange")
    ax.set_ylabel("share of dialogues still without an unsafe reply")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    main = table(
        ("exchange", "at risk", "first harms", "still safe"),
        [(r["turn"], r["at_risk"], r["events"], f"{r['surviving']:.1%}") for r in overall],
        caption="All dimensions (Kaplan–Meier, dialogues without harm are censored at their last visible exchange)",
        key="survival",
    )
    turns = sorted({r["turn"] for d in dimensions for r in curves[d]})
    by_turn = {d: {r["turn"]: r["surviving"] for r in curves[d]} for d in dimensions}
    per_dimension = table(
        ("dimension", *(f"exchange {t}" for t in turns)),
        [[names.get(d, d), *(_share(by_turn[d], t) for t in turns)] for d in dimensions],
        caption="Still safe after each visible exchange, per dimension",
        key="survival-by-dimension",
    )
    return plot(
        fig,
        key="crescendo-survival",
        caption="Exchanges until the first unsafe reply in multi-turn dialogues (Kaplan–Meier): the three "
        "dimensions that lose safety fastest in colour, the others in grey, all dimensions pooled in black.",
        numbers=main + per_dimension,
    )


def _hazard(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    """The per-exchange hazard of first harm with Wilson bars, and first vs later exchanges per dimension."""
    hazards = summary["hazard"]
    overall = hazards["all"]
    rows = [r for r in overall["per_turn"] if r["hazard"] is not None]
    fig = new_figure(7.5, 3.4)
    ax = fig.add_subplot()
    if rows:
        turns = [r["turn"] for r in rows]
        values = [r["hazard"] for r in rows]
        ax.errorbar(
            turns,
            values,
            yerr=[
                [v - r["low"] for v, r in zip(values, rows, strict=True)],
                [r["high"] - v for v, r in zip(values, rows, strict=True)],
            ],
            fmt="o-",
            color="#d92d20",
            ecolor="#f97066",
            capsize=3,
        )
        later = overall["later"]
        if later["rate"] is not None:
            ax.axhline(later["rate"], color="#475467", linestyle="--", linewidth=1, label="later exchanges, pooled")
            ax.legend(fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_xlabel("visible exchange")
    ax.set_ylabel("hazard of the first unsafe reply")
    ax.grid(alpha=0.3)
    per_turn = table(
        ("exchange", "at risk", "first harms", "hazard [95% Wilson]"),
        [(r["turn"], r["at_risk"], r["events"], _hazard_text(r)) for r in overall["per_turn"]],
        key="hazard",
    )
    contrast = table(
        ("dimension", "first exchange", "later exchanges (pooled)", "later − first [95% CI]"),
        [
            (
                "all dimensions" if d == "all" else names.get(d, d),
                _rate_text(h["first"]),
                _rate_text(h["later"]),
                _points(h["later_minus_first"]),
            )
            for d, h in hazards.items()
        ],
        caption="Escalation: a later hazard above the first exchange's means pressure works; a flat hazard puts 0 in "
        "the interval (paired cluster bootstrap over dialogues)",
        key="hazard-contrast",
    )
    return plot(
        fig,
        key="crescendo-hazard",
        caption="Discrete-time hazard: first unsafe replies at each visible exchange among dialogues still "
        "without one.",
        numbers=per_turn + contrast,
    )


def _hazard_text(row: Mapping[str, Any]) -> str:
    if row.get("hazard") is None:
        return "–"
    return f"{row['hazard']:.1%} [{row['low']:.1%}–{row['high']:.1%}]"


def _points(cell: Mapping[str, Any]) -> str:
    if cell.get("delta") is None:
        return "–"
    text = f"{cell['delta'] * 100:+.1f} pp"
    if cell.get("low") is None or cell.get("high") is None:
        return text
    return f"{text} [{cell['low'] * 100:+.1f}, {cell['high'] * 100:+.1f}]"


def _delta_text(amp: Mapping[str, Any]) -> str | None:
    if amp.get("delta") is None:
        return None
    return _points({"delta": amp["delta"], **amp["ci"]})


def _pooled(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [a for a in summary["amplification"] if a["subject"] is None and a["dimension"] is not None]


def _subjects(summary: Mapping[str, Any], names: Mapping[str, str]) -> Markup:
    """SafeTutors' Tables 1–2 (subject × dimension per format), the ≥ 60% counts, amplification per subject."""
    cells = {(c["subject"], c["dimension"], c["format"]): c for c in summary["by_subject_dimension"]}
    dimensions = [a["dimension"] for a in _pooled(summary)]
    subjects = sorted({c["subject"] for c in summary["by_subject_dimension"]})
    high = {(h["subject"], h["format"]): h for h in summary["high_harm_dimensions"]}
    parts: list[Markup] = []
    for fmt in ("single", "multi"):
        rows: list[list[Cell]] = []
        for subject in subjects:
            found = high.get((subject, fmt))
            rows.append(
                [
                    subject,
                    *(_compact((cells.get((subject, d, fmt)) or {}).get("per_response")) for d in dimensions),
                    None if not found else f"{found['count']} of {found['of']}",
                ]
            )
        parts.append(
            table(
                ("subject", *(names.get(d, d) for d in dimensions), "dimensions ≥ 60%"),
                rows,
                caption=f"{fmt}-turn harm per reply (%, 95% cluster-bootstrap interval)",
                key=f"subject-dimension-{fmt}",
            )
        )
    amplification = {(a["dimension"], a["subject"]): a for a in summary["amplification"]}
    parts.append(
        table(
            ("dimension", "all subjects", *subjects),
            [
                [
                    "all dimensions" if d is None else names.get(d, d),
                    *(
                        _delta_text(amplification[(d, s)]) if (d, s) in amplification else None
                        for s in [None, *subjects]
                    ),
                ]
                for d in [*dimensions, None]
            ],
            caption="Amplification by subject: multi- minus single-turn harm per reply, pp "
            "[95% cluster-bootstrap interval]",
            key="amplification-by-subject",
        )
    )
    return Markup("").join(parts)


def _compact(cell: Mapping[str, Any] | None) -> str | None:
    if not cell or cell.get("rate") is None:
        return None
    return f"{cell['rate'] * 100:.0f} [{cell['low'] * 100:.0f}–{cell['high'] * 100:.0f}]"


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
    replies = paragraph(
        f"Backtracked replies: {back.get('backtracked_replies', 0)} "
        f"({back.get('backtracked_unsafe', 0)} judged unsafe), "
        f"kept out of every per-reply rate; visible multi-turn replies: {back.get('visible_replies', 0)}."
    )
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
        numbers=numbers + replies,
    )


def _overall(summary: Mapping[str, Any]) -> Markup:
    overall = table(
        ("format", "per reply", "per dialogue", "exposure", "episodes"),
        [
            (
                c["format"],
                _rate_text(c["per_response"]),
                _rate_text(c["per_conversation"]),
                None if c.get("exposure") is None else f"{c['exposure']:.1f}",
                c["episodes"],
            )
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
            section("Harm by subject × dimension", _subjects(summary, names), key="subjects"),
            section("Escalation: hazard of the first unsafe reply", _hazard(summary, names), key="hazard"),
            section("Exchanges until the first unsafe reply", _survival(summary, names), key="survival"),
            section("Backtracks", _backtracks(summary, names), key="backtracks"),
            section("Overall and by domain", _overall(summary), key="overall"),
            section("Pedagogical quality and judge unanimity", _quality(summary), key="quality"),
            judge_agreement_html(summary.get("judge_agreement")),
        )
    )
