"""The `remediation` (ReMath) section of report.html: Task A/B agreement and confusion, Task C by condition.

Confusion matrices put the expert's (gold) label on the rows and the tutor's on the columns, the counts being
`engine.agreement`'s. Task C scores are −2..2 against the judge's baseline, named in the heading (positive: the
reply is rated better), drawn with their 95% t intervals over items; every plot's numbers are in the table below it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.format import pct_or_none
from engine.paired import MEANINGFUL_R, format_effect, format_p
from engine.report_html import Cell, Markup, new_figure, paragraph, plot, section, table

__all__ = ("SCORES", "remath_html")

SCORES = ("usefulness", "care", "human", "preference", "overall")
_LABEL_NAMES = {"error": "Task A · error type", "strategy": "Task B · strategy", "intention": "Task B · intention"}


def _num(value: float | None, digits: int = 2) -> str | None:
    if value is None or math.isnan(value):
        return None
    return f"{round(value, digits) or 0.0:.{digits}f}"  # `or`: no "-0.00"


def _interval(cell: Mapping[str, Any]) -> str | None:
    if cell["mean"] is None:
        return None
    if cell["low"] is None:
        return f"{cell['mean']:+.2f} (n={cell['n']})"
    return f"{cell['mean']:+.2f} [{cell['low']:+.2f}, {cell['high']:+.2f}] (n={cell['n']})"


def _rate(cell: Mapping[str, Any] | None) -> str | None:
    if cell is None or cell.get("rate") is None:
        return None
    return f"{cell['rate']:.0%} [{cell['low']:.0%}, {cell['high']:.0%}] ({cell['k']}/{cell['n']})"


def _top(shares: Mapping[str, float]) -> str | None:
    if not shares or not any(shares.values()):
        return None
    label = max(shares, key=lambda k: shares[k])
    return f"{label} ({shares[label]:.0%})"


def _agreement(rows: Sequence[Mapping[str, Any]]) -> Markup:
    """The tutor's row per label and, where snippets have two teachers, the teachers' own (human–human) row."""
    body: list[tuple[Cell, ...]] = []
    for r in rows:
        both = r.get("per_annotator") or {}
        body.append(
            (
                _LABEL_NAMES.get(r["label"], r["label"]),
                "tutor",
                r["n"],
                pct_or_none(r["match"]),
                _num(r["kappa"]),
                pct_or_none(both.get("match")),
                _num(both.get("kappa")),
                _num(r["entropy_pred"]),
                _num(r["entropy_gold"]),
                _top(r["shares_pred"]),
            )
        )
        human = r.get("human")
        if human:
            name = _LABEL_NAMES.get(r["label"], r["label"])
            body.append(
                (name, "human–human", human["n"], None, None, pct_or_none(human["match"]), _num(human["kappa"]))
                + (_num(human["entropy"]), None, None)
            )
    columns = ("label", "who", "n", "exact match", "Cohen's κ", "match (2 teachers)", "κ (2 teachers)")
    return table(
        (*columns, "entropy", "entropy (expert)", "most frequent"),
        body,
        caption="2 teachers: against each teacher of a doubly-labelled snippet, averaged (the paper's match and "
        "IRR); human–human: the two teachers against each other.",
        key="remath-agreement",
    )


def _automated(rows: Sequence[Mapping[str, Any]]) -> Markup:
    columns = ("rouge1", "rougeL", "bleu", "self_bleu", "entropy", "length")
    return table(
        ("given", "n", *columns),
        [(r["given"], r["n"], *(_num(r[c]) for c in columns)) for r in rows],
        caption="Against the expert reply; original: the novice tutor's reply. Entropy: per-reply word entropy "
        "(nats), not the paper's language-model entropy.",
        key="remath-automated",
    )


def _confusion(row: Mapping[str, Any]) -> Markup:
    """Heatmap of gold × predicted counts, then the same counts and each label's share as tables."""
    labels: list[str] = list(row["labels"])
    matrix: list[list[int]] = [list(counts) for counts in row["confusion"]]
    name = row["label"]
    size = len(labels)
    fig = new_figure(min(7.5, 0.5 * size + 3.2), min(7.5, 0.42 * size + 2.2))
    ax = fig.add_subplot()
    image = ax.imshow(matrix, cmap="Blues", vmin=0, aspect="auto")
    peak = max((v for counts in matrix for v in counts), default=0)
    for i, counts in enumerate(matrix):
        for j, count in enumerate(counts):
            if count:
                color = "white" if count > peak / 2 else "black"
                weight = "bold" if i == j else "normal"
                ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color=color, fontweight=weight)
    ax.set_xticks(range(size), labels, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(size), labels, fontsize=7)
    ax.set_xlabel("tutor's label")
    ax.set_ylabel("expert's label")
    fig.colorbar(image, ax=ax, label="episodes", shrink=0.8)
    body: list[list[Cell]] = []
    for i, (label, counts) in enumerate(zip(labels, matrix, strict=True)):
        cells: list[Cell] = [
            Markup("<strong>{}</strong>").format(c) if j == i and c else c for j, c in enumerate(counts)
        ]
        body.append([label, *cells, sum(counts)])
    body.append(["total", *(sum(counts[j] for counts in matrix) for j in range(size)), sum(map(sum, matrix))])
    counts_table = table(
        ("expert ↓ / tutor →", *labels, "total"),
        body,
        row_classes=[""] * size + ["total"],
        caption="Counts; bold: the tutor agreed with the expert.",
        key=f"remath-confusion-{name}",
    )
    shares = table(
        ("", *labels),
        [
            ["tutor", *(pct_or_none(row["shares_pred"].get(label)) for label in labels)],
            ["expert", *(pct_or_none(row["shares_gold"].get(label)) for label in labels)],
        ],
        caption="Share of each label",
        key=f"remath-shares-{name}",
    )
    return plot(
        fig,
        key=f"remath-confusion-{name}",
        caption=f"{_LABEL_NAMES.get(name, name)}: the expert's label (rows) against the tutor's (columns), "
        f"{row['n']} items; the diagonal is agreement.",
        numbers=counts_table + shares,
    )


def _conditions(rows: Sequence[Mapping[str, Any]]) -> Markup:
    givens = [r["given"] for r in rows]
    fig = new_figure(7.5, 0.32 * len(givens) + 1.6)
    axes = fig.subplots(1, len(SCORES), sharey=True, squeeze=False)[0]
    for ax, metric in zip(axes, SCORES, strict=True):
        ax.axvline(0, color="#344054", linewidth=0.8)
        for index, r in enumerate(rows):
            cell = r[metric]
            if cell["mean"] is None:
                continue
            if cell["low"] is not None:
                ax.plot([cell["low"], cell["high"]], [index, index], color="#1570ef", linewidth=1.6)
            ax.plot([cell["mean"]], [index], "o", color="#1570ef", ms=4)
        ax.set_title(metric, fontsize=8)
        ax.set_xlim(-2.1, 2.1)
        ax.set_xticks([-2, 0, 2])
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(givens)), [f"given {g}" for g in givens], fontsize=8)
    axes[0].set_ylim(len(givens) - 0.5, -0.5)
    fig.supxlabel("mean score vs the reference (−2..2; > 0: the tutor's reply is better), 95% t interval", fontsize=8)
    numbers = table(
        ("given", "replies", *SCORES),
        [(r["given"], r["replies"], *(_interval(r[m]) for m in SCORES)) for r in rows],
        key="remath-conditions",
    )
    return plot(
        fig,
        key="remath-conditions",
        caption="Task C: the tutor's reply against the expert's reference per condition (what the tutor was "
        "told), judged in both presentation orders; means over items.",
        numbers=numbers,
    )


def _bias(rows: Sequence[Mapping[str, Any]]) -> Markup:
    return paragraph(
        "Position bias: half the sum of the judge's two raw scores for the same pair, i.e. its lean towards "
        "whichever response it saw second (0 = none). Asking in both orders cancels it from the scores above. "
        "Answer leak (deterministic detector) and strategy adherence (the reply uses the expert's strategy) "
        "with 95% Wilson intervals."
    ) + table(
        ("given", "position bias (mean)", "answer leak", "strategy adherence"),
        [(r["given"], _num(r["position_bias"]), _rate(r["answer_leak"]), _rate(r["strategy_adherence"])) for r in rows],
        key="remath-position-bias",
    )


def _contrast(c: Mapping[str, Any]) -> str:
    return f"Friedman: {c['a']}" if c["test"] == "friedman" else f"{c['a']} − {c['b']}"


def _differences(rows: Sequence[Mapping[str, Any]]) -> Markup:
    if not rows:
        return paragraph("Fewer than two Task C conditions: nothing to compare.")
    numbers = table(
        ("metric", "test", "contrast", "r [95% CI]", "mean difference", "p", "p (adj.)", "n"),
        [
            (
                c["metric"],
                c["test"],
                _contrast(c),
                format_effect(c, "items"),
                _num(c["mean_diff"], 3),
                format_p(c["p"]),
                format_p(c["p_adjusted"]),
                c["n"],
            )
            for c in rows
        ],
        row_classes=["violation" if c.get("violation") else "" for c in rows],
        key="remath-differences",
    )
    shown = [c for c in rows if c["r"] is not None and c["ci_low"] is not None]
    note = paragraph(
        "Items are the pairs. With three or more conditions a Friedman test comes first and the pairwise "
        f"Wilcoxon tests are Bonferroni-corrected; highlighted: the interval of r excludes 0. |r| ≥ {MEANINGFUL_R:.2f} "
        "is practically meaningful (shaded band: below it)."
    )
    if not shown:
        return note + numbers
    fig = new_figure(7.5, 0.26 * len(shown) + 1.3)
    ax = fig.add_subplot()
    ax.axvspan(-MEANINGFUL_R, MEANINGFUL_R, color="#eaecf0", zorder=0)
    ax.axvline(0, color="#344054", linewidth=0.8)
    for index, c in enumerate(shown):
        color = "#d92d20" if c.get("violation") else "#1570ef"
        ax.plot([c["ci_low"], c["ci_high"]], [index, index], color=color, linewidth=1.6)
        ax.plot([c["r"]], [index], "D" if c.get("violation") else "o", color=color, ms=5)
    ax.set_yticks(range(len(shown)), [f"{c['metric']} · {c['a']} − {c['b']}" for c in shown], fontsize=7)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("rank-biserial r with 95% bootstrap CI (positive: the first condition scores higher)")
    ax.grid(axis="x", alpha=0.3)
    return note + plot(
        fig,
        key="remath-differences",
        caption="Task C: paired differences between conditions over items.",
        numbers=numbers,
    )


def _baseline(data: Mapping[str, Any]) -> str:
    names = {"novice": "the novice tutor's reply", "reference": "the expert's reference"}
    return " / ".join(names.get(a, a) for a in data.get("against") or []) or "the baseline"


def remath_html(data: Mapping[str, Any]) -> Markup:
    """The ReMath results from `summary["remath"]`."""
    parts: list[Markup] = []
    if data["agreement"]:
        parts.append(
            section(
                "Tasks A and B: agreement with the expert's labels",
                paragraph(
                    "Exact match, Cohen's κ, and the entropy (natural log) of the tutor's and the expert's label "
                    "distributions: a tutor that always gives the same label can match often and still be useless."
                ),
                _agreement(data["agreement"]),
                key="remath-agreement",
            )
        )
        parts += [
            section(
                f"Confusion matrix: {_LABEL_NAMES.get(r['label'], r['label'])}", _confusion(r), key=f"cm-{r['label']}"
            )
            for r in data["agreement"]
        ]
    if data["conditions"]:
        parts += [
            section(
                f"Task C: the reply against {_baseline(data)}, per condition (human: the expert's reply)",
                _conditions(data["conditions"]),
                key="remath-conditions",
            ),
            section(
                "Task C: position bias, answer leak, strategy adherence",
                _bias(data["conditions"]),
                key="remath-position-bias",
            ),
            section(
                "Task C: paired differences between conditions",
                _differences(data["differences"]),
                key="remath-differences",
            ),
        ]
    if data.get("automated"):
        parts.append(
            section(
                "Task C: automated metrics (the paper's Table 8)", _automated(data["automated"]), key="remath-table8"
            )
        )
    if not parts:
        return section("No results", paragraph("No episode finished ok, so there is nothing to show."), key="empty")
    return Markup("").join(parts)
