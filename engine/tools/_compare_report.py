"""What `simrun compare` writes: compare.json, compare.md, compare.html, and the console headline.

Every renderer reads the same `Comparison`, so the three agree on which contrasts are findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from markupsafe import Markup
from rich.table import Table
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.report._dots import Dot, DotPanel, Dots, DotSeries, dots_html
from engine.report._page import render_page
from engine.report._svg import paragraph, section, table
from engine.stats._families import format_effect, format_p
from engine.stats._paired import MEANINGFUL_R
from engine.tools._compare import ALL, FAMILY_Q, CompareContrast, Comparison, compare_runs

__all__ = ("comparable_rows", "render_console", "render_html", "render_markdown", "write_comparison")


def _mean(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _contrast_label(c: CompareContrast) -> str:
    return f"Friedman: {c.a}" if c.test == "friedman" else f"{c.a} − {c.b}"


def _family_p(c: CompareContrast) -> float | None:
    """A tested contrast's p adjusted over the whole family; an omnibus row shows its own p."""
    return c.p_family if c.p_family is not None else c.p


def _chance_note(comparison: Comparison) -> str:
    """What the flags mean: one family over every metric × condition × pair, Benjamini–Hochberg adjusted."""
    tested = sum(1 for c in comparison.contrasts if c.p_family is not None)
    flagged = sum(1 for c in comparison.contrasts if c.finding)
    return (
        f"{tested} contrasts with an interval were tested as one family; {flagged} are findings "
        f"(Benjamini–Hochberg adjusted p ≤ {FAMILY_Q:g}). If the runs did not differ, the chance of any finding "
        f"would be at most {FAMILY_Q:.0%}."
    )


def render_markdown(comparison: Comparison) -> str:
    labels = [run["label"] for run in comparison.runs]
    lines = ["# simrun comparison", "", "| run | directory | scenario | hash | tutor | seed | status | ok | error |"]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for run in comparison.runs:
        lines.append(
            f"| {run['label']} | `{run['run']}` | {run['scenario']} | `{str(run['scenario_hash'])[:12]}` | "
            f"`{run['models'].get('tutor')}` | {run['seed']} | {run['status']} | {run['ok']} | {run['error']} |"
        )
    lines.append("")
    if any(run["simulated"] for run in comparison.runs):
        lines += [
            "> **Simulated results.** At least one run used simrun's `sim` provider, a deterministic simulator, "
            "not a language model.",
            "",
        ]
    lines += [f"- {s}" for s in comparison.statements] or ["- The runs match episode for episode."]
    lines.append("")
    if not comparable_rows(comparison):
        return "\n".join(lines) + "\n"
    lines += [
        f"## Paired differences over {comparison.matched} matched episodes",
        "",
        f"Rank-biserial r of the per-episode differences (later run − {labels[0]}), 95% bootstrap interval; "
        f"|r| ≥ {MEANINGFUL_R:.2f} is practically meaningful; **bold**: a finding of the corrected family.",
        "",
        _chance_note(comparison),
        "",
        "| condition | metric | " + " | ".join(f"mean {label}" for label in labels) + " | contrast | r [95% CI] | p "
        "| p (family, BH) | n |",
        "|---|---|" + "---|" * len(labels) + "---|---|---|---|---|",
    ]
    for c in comparison.contrasts:
        effect = format_effect(c)
        means = " | ".join(_mean(c.means[label]) for label in labels)
        lines.append(
            f"| {c.condition} | {c.metric} | {means} | {_contrast_label(c)} | "
            f"{f'**{effect}**' if c.finding else effect} | {format_p(c.p)} | "
            f"{format_p(_family_p(c))} | {c.n} |"
        )
    if comparison.changed_verdicts_total:
        lines += [
            "",
            f"## Episodes whose verdict differs ({comparison.changed_verdicts_total})",
            "",
            "| episode | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for row in comparison.changed_verdicts:
            lines.append(f"| {row['episode']} | " + " | ".join(str(row[label]) for label in labels) + " |")
    return "\n".join(lines) + "\n"


def render_console(comparison: Comparison) -> Table | None:
    """The headline: each metric's paired difference over all conditions, with its interval, as in compare.md."""
    overall = [c for c in comparison.contrasts if c.condition == ALL]
    if not comparable_rows(comparison) or not overall:
        return None
    labels = [run["label"] for run in comparison.runs]
    table = Table(title=f"Paired differences over {comparison.matched} matched episodes (all conditions)")
    for column in ("metric", *(f"mean {label}" for label in labels), "contrast", "r [95% CI]", "p (family, BH)", "n"):
        table.add_column(column, justify="left" if column in ("metric", "contrast", "r [95% CI]") else "right")
    for c in overall:
        table.add_row(
            *map(Text, (c.metric, *(_mean(c.means[label]) for label in labels), _contrast_label(c))),
            Text(format_effect(c), style="bold" if c.finding else ""),
            *map(Text, (format_p(_family_p(c)), str(c.n))),
        )
    table.caption = f"bold: a finding. {_chance_note(comparison)}"
    return table


def comparable_rows(comparison: Comparison) -> bool:
    return comparison.comparable and bool(comparison.contrasts)


def _forest(comparison: Comparison) -> Markup:
    overall = [c for c in comparison.contrasts if c.condition == ALL and c.r is not None]
    if not overall:
        return paragraph("No pooled contrast had an interval to plot (see the table).")
    dots = tuple(Dot(c.r, c.ci_low, c.ci_high, highlight=bool(c.finding)) for c in overall)
    panel = DotPanel(
        tuple(f"{c.metric} · {c.a} − {c.b}" for c in overall),
        (DotSeries("r", dots),),
        xlabel="rank-biserial r with 95% bootstrap CI (red: a finding after correction)",
        xlim=(-1.05, 1.05),
        band=MEANINGFUL_R,
    )
    caption = "Paired differences over all matched episodes, per metric."
    return dots_html(Dots((panel,), (), key="compare-forest", caption=caption), Markup(""))


def render_html(comparison: Comparison) -> str:
    parts = [_runs_section(comparison)]
    if any(run["simulated"] for run in comparison.runs):
        note = Markup(
            "<strong>Simulated results.</strong> At least one run used simrun's <code>sim</code> provider, "
            "a deterministic simulator, not a language model."
        )
        parts.insert(0, paragraph(note, css="sim-note"))
    if comparable_rows(comparison):
        parts.append(_contrasts_section(comparison))
    if comparison.changed_verdicts:
        labels = [run["label"] for run in comparison.runs]
        parts.append(
            section(
                f"Episodes whose verdict differs ({comparison.changed_verdicts_total})",
                table(
                    ("episode", *labels),
                    [[row["episode"], *(row[label] for label in labels)] for row in comparison.changed_verdicts],
                    key="changed-verdicts",
                ),
                key="changed-verdicts",
            )
        )
    return render_page(title="simrun comparison", header=None, body=Markup("").join(parts), nav=[])


def _runs_section(comparison: Comparison) -> Markup:
    runs = table(
        ("run", "directory", "scenario", "kind", "scenario hash", "models", "seed", "status", "ok", "error"),
        [
            (
                r["label"],
                r["run"],
                r["scenario"],
                r["kind"],
                r["scenario_hash"],
                "; ".join(f"{k}: {v}" for k, v in r["models"].items() if v),
                r["seed"],
                r["status"],
                r["ok"],
                r["error"],
            )
            for r in comparison.runs
        ],
        key="runs",
    )
    css = "statement" if comparison.comparable else "statement not-comparable"
    statements = Markup("").join(paragraph(s, css=css) for s in comparison.statements) or paragraph(
        "The runs match episode for episode.", css="statement"
    )
    return section("Runs", runs, statements, key="runs")


def _contrasts_section(comparison: Comparison) -> Markup:
    labels = [run["label"] for run in comparison.runs]
    rows: list[list[Any]] = [
        [
            c.condition,
            c.metric,
            *(_mean(c.means[label]) for label in labels),
            _contrast_label(c),
            format_effect(c),
            format_p(c.p),
            format_p(_family_p(c)),
            c.n,
        ]
        for c in comparison.contrasts
    ]
    return section(
        f"Paired differences over {comparison.matched} matched episodes",
        paragraph(
            f"Per-episode differences (later run − {labels[0]}), matched by item, condition and replicate. "
            f"|r| ≥ {MEANINGFUL_R:.2f} is practically meaningful; highlighted rows: findings after "
            "the family's correction."
        ),
        paragraph(_chance_note(comparison)),
        _forest(comparison),
        table(
            (
                "condition",
                "metric",
                *(f"mean {label}" for label in labels),
                "contrast",
                "r [95% CI]",
                "p",
                "p (family, BH)",
                "n",
            ),
            rows,
            row_classes=["violation" if c.finding else "" for c in comparison.contrasts],
            key="contrasts",
        ),
        key="contrasts",
    )


def write_comparison(paths: Sequence[Path], out: Path) -> Comparison:
    """Compare the runs and write compare.json, compare.md and compare.html into `out`."""
    comparison = compare_runs(paths)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScenarioError(f"cannot create {out}: {exc.strerror or exc}") from None
    (out / "compare.json").write_bytes(orjson.dumps(comparison.as_dict(), option=orjson.OPT_INDENT_2))
    (out / "compare.md").write_text(render_markdown(comparison), encoding="utf-8")
    (out / "compare.html").write_text(render_html(comparison), encoding="utf-8")
    return comparison
