"""What `simrun compare` writes: compare.json, compare.md, compare.html, and the console headline.

Every output draws the same blocks (`compare_blocks`) through the report renderers, so the three agree on which
contrasts are findings and show the same digits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
from rich.console import RenderableType

from engine.core._errors import ScenarioError
from engine.core._format import format_fixed, format_pct, format_setting, format_sig
from engine.report._blocks import FINDING_MARK, Block, Bullets, Note, Section, Table
from engine.report._console import console_blocks
from engine.report._dots import Dot, DotPanel, Dots, DotSeries
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from engine.report._page import render_page
from engine.stats._contrast import family_caption
from engine.stats._families import format_effect, format_p
from engine.stats._paired import MEANINGFUL_R
from engine.tools.compare._runs import ALL, FAMILY_METHOD, FAMILY_Q, CompareContrast, Comparison, compare_runs

__all__ = ("compare_blocks", "comparable_rows", "render_console", "render_html", "render_markdown", "write_comparison")


def _mean(value: float | None) -> str:
    return format_sig(value, 4)


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
        f"(Benjamini–Hochberg adjusted p ≤ {format_setting(FAMILY_Q)}). If the runs did not differ, the chance of "
        f"any finding would be at most {format_pct(FAMILY_Q)}."
    )


def _runs_table(comparison: Comparison) -> Table:
    rows = tuple(
        (
            r["label"],
            r["run"],
            r["scenario"],
            r["kind"],
            str(r["scenario_hash"])[:12],
            "; ".join(f"{k}: {v}" for k, v in r["models"].items() if v),
            r["seed"],
            r["status"],
            r["ok"],
            r["error"],
        )
        for r in comparison.runs
    )
    return Table(
        ("run", "directory", "scenario", "kind", "scenario hash", "models", "seed", "status", "ok", "error"),
        rows,
        title="Runs",
        key="runs",
        left=("directory", "scenario", "kind", "scenario hash", "models", "status"),
    )


def _runs_section(comparison: Comparison) -> Section:
    body: list[Block] = []
    if any(run["simulated"] for run in comparison.runs):
        body.append(
            Note(
                "Simulated results: at least one run used simrun's sim provider, a deterministic simulator, "
                "not a language model."
            )
        )
    body.append(_runs_table(comparison))
    body.append(Bullets(tuple(comparison.statements) or ("The runs match episode for episode.",)))
    return Section("Runs", tuple(body), key="runs")


def _contrasts_table(comparison: Comparison, contrasts: Sequence[CompareContrast], *, pooled: bool) -> Table:
    labels = [run["label"] for run in comparison.runs]
    where: tuple[str, ...] = () if pooled else ("condition",)
    rows = tuple(
        (
            *((c.condition,) if not pooled else ()),
            c.metric,
            *(_mean(c.means[label]) for label in labels),
            _contrast_label(c),
            format_effect(c),
            format_p(c.p),
            format_p(_family_p(c)),
            c.n,
        )
        for c in contrasts
    )
    means = tuple(f"mean {label}" for label in labels)
    columns = (*where, "metric", *means, "contrast", "r [95% CI]", "p", "p (family, BH)", "n")
    return Table(
        columns,
        rows,
        title=f"Paired differences over {comparison.matched} matched episodes"
        + (" (all conditions)" if pooled else ""),
        key="contrasts-pooled" if pooled else "contrasts",
        caption=family_caption(FAMILY_METHOD, sum(1 for c in comparison.contrasts if c.p_family is not None), FAMILY_Q),
        findings=tuple(c.finding for c in contrasts),
        decided_by="p (family, BH)",
        console_columns=tuple(c for c in columns if c != "p") if pooled else (),
        left=(*where, "metric", "contrast", "r [95% CI]"),
    )


def _forest(comparison: Comparison) -> Block:
    overall = [c for c in comparison.contrasts if c.condition == ALL and c.r is not None]
    if not overall:
        return Note("No pooled contrast had an interval to plot (see the table).")
    dots = tuple(Dot(c.r, c.ci_low, c.ci_high, highlight=c.finding) for c in overall if c.r is not None)
    panel = DotPanel(
        tuple(f"{c.metric} · {c.a} − {c.b}" for c in overall),
        (DotSeries("r", dots),),
        xlabel="rank-biserial r with 95% bootstrap CI (red: a finding after correction)",
        xlim=(-1.05, 1.05),
        band=MEANINGFUL_R,
    )
    return Dots((panel,), (), key="compare-forest", caption="Paired differences over all matched episodes, per metric.")


def _contrasts_section(comparison: Comparison) -> Section:
    labels = [run["label"] for run in comparison.runs]
    intro = Note(
        f"Rank-biserial r of the per-episode differences (later run − {labels[0]}), matched by item, condition "
        f"and replicate, with its 95% bootstrap interval; |r| ≥ {format_fixed(MEANINGFUL_R)} is practically "
        f"meaningful; {FINDING_MARK}: a finding of the corrected family."
    )
    body = (intro, Note(_chance_note(comparison)), _forest(comparison))
    return Section(
        f"Paired differences over {comparison.matched} matched episodes",
        (*body, _contrasts_table(comparison, comparison.contrasts, pooled=False)),
        key="contrasts",
    )


def _changed_section(comparison: Comparison) -> Section:
    labels = [run["label"] for run in comparison.runs]
    table = Table(
        ("episode", *labels),
        tuple((row["episode"], *(str(row[label]) for label in labels)) for row in comparison.changed_verdicts),
        key="changed-verdicts",
        console_columns=(),
        left=tuple(labels),
    )
    title = f"Episodes whose verdict differs ({comparison.changed_verdicts_total})"
    return Section(title, (table,), key="changed-verdicts")


def compare_blocks(comparison: Comparison) -> list[Block]:
    """The comparison as report blocks: compare.md, compare.html and the terminal all draw these."""
    blocks: list[Block] = [_runs_section(comparison)]
    if comparable_rows(comparison):
        blocks.append(_contrasts_section(comparison))
    if comparison.changed_verdicts:
        blocks.append(_changed_section(comparison))
    return blocks


def render_markdown(comparison: Comparison) -> str:
    return "# simrun comparison\n\n" + markdown_blocks(compare_blocks(comparison))


def render_console(comparison: Comparison) -> RenderableType | None:
    """The headline: each metric's paired difference over all conditions, with its interval, as in compare.md."""
    overall = [c for c in comparison.contrasts if c.condition == ALL]
    if not comparable_rows(comparison) or not overall:
        return None
    headline = _contrasts_table(comparison, overall, pooled=True)
    return console_blocks([headline, Note(f"{FINDING_MARK}: a finding. {_chance_note(comparison)}", console=True)])


def comparable_rows(comparison: Comparison) -> bool:
    return comparison.comparable and bool(comparison.contrasts)


def render_html(comparison: Comparison) -> str:
    body = html_blocks(compare_blocks(comparison))
    return render_page(title="simrun comparison", header=None, body=body, nav=[])


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
