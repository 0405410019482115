"""The report's part for a sequential run: each question's verdict and interval path, and what stopping saved.

Read from the `sequential` entry the runner keeps in manifest.json (recomputed from the records at every look).
The saving is an estimate: calls and dollars per episode so far, times the planned episodes never played.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from engine.report._blocks import SIMRUN_ADDITION
from engine.report._svg import Cell, new_figure, plot, section, table
from engine.report._svg_draw import Axes, Box, Scale, fit
from engine.core._format import format_usd

__all__ = ("savings", "sequential_html", "sequential_lines", "sequential_markdown")

_BAND, _NULL, _STOP = "#9ecae1", "#cb181d", "#344054"


def savings(seq: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Episodes, calls and dollars the stop saved against the full plan (per-episode averages so far)."""
    counts = manifest.get("counts") or {}
    played = int(counts.get("ok") or 0) + int(counts.get("error") or 0)
    planned = int(seq.get("episodes_planned") or counts.get("planned") or 0)
    calls = int((manifest.get("calls") or {}).get("requests") or 0)
    usd = float((manifest.get("cost_usd") or {}).get("total") or 0.0)
    left = max(planned - played, 0)
    per_call, per_usd = (calls / played, usd / played) if played else (0.0, 0.0)
    return {
        "episodes_played": played,
        "episodes_planned": planned,
        "share_of_plan": played / planned if planned else 0.0,
        "calls": calls,
        "calls_saved": round(per_call * left),
        "usd": usd,
        "usd_saved": per_usd * left,
    }


def _interval(q: Mapping[str, Any]) -> str:
    low, high = q.get("interval") or (None, None)
    return "–" if low is None else f"[{low:.3f}, {high:.3f}]"


def sequential_markdown(seq: Mapping[str, Any], saved: Mapping[str, Any]) -> str:
    if seq.get("design") != "sequential":
        return (
            "\n_Fixed-sample design: the p-values and intervals above assume the number of episodes was fixed in "
            "advance; stopping a run, or adding items, when they look good invalidates them. A run that may stop "
            "early declares `design.stopping` (docs/sequential.md)._\n"
        )
    lines = [
        "",
        "## Sequential stopping",
        "",
        f"*Provenance: {SIMRUN_ADDITION} (anytime-valid stopping; the papers ran fixed samples)*",
        "",
        f"- {_headline(seq, saved)}",
        f"- intervals: anytime-valid confidence sequences at {seq['interval_level']:.2%} each "
        f"(Bonferroni over {len(seq['questions'])} questions); findings: e-BH at α = {seq['alpha']} over the "
        "e-values at the stop",
        "",
        "| question | null | verdict | settled | e-value | items | interval |",
        "|---|---|---|---|---|---|---|",
    ]
    for q in seq["questions"]:
        lines.append(
            f"| {q['name']} | {q['form']} {q['null']} | **{q['verdict']}** | {q['settled'] or 'no'} "
            f"| {q['e_value']:.3g} | {q['n']} | {_interval(q)} |"
        )
    return "\n".join(lines) + "\n"


def sequential_lines(summary: Mapping[str, Any]) -> list[str]:
    """What the console prints after a sequential run: the stop, the saving, each question's verdict."""
    seq = summary.get("sequential") or {}
    if seq.get("design") != "sequential":
        return []
    lines = [f"sequential: {_headline(seq, (summary.get('run') or {}).get('saved') or {})}"]
    lines += [
        f"  {q['name']}: {q['verdict']} (e-value {q['e_value']:.3g}, interval {_interval(q)})" for q in seq["questions"]
    ]
    return lines


def _headline(seq: Mapping[str, Any], saved: Mapping[str, Any]) -> str:
    where = f"after {seq['looks']} of {seq['waves']} looks ({seq['items_used']} items)"
    if not seq.get("stopped_early"):
        return f"ran the plan to its end {where}: no early stop, nothing saved"
    return (
        f"stopped early {where}: {saved['episodes_played']} of {saved['episodes_planned']} episodes "
        f"({saved['share_of_plan']:.0%} of the plan); saved ≈ {saved['calls_saved']:,} calls and "
        f"{format_usd(saved['usd_saved'])} against the full plan"
    )


def _path_plot(q: Mapping[str, Any], key: str) -> Markup:
    path = q["path"]
    fig = new_figure(6.5, 2.4)
    axes = Axes(fig, Box(48, 24, fig.width - 16, fig.height - 34), (0.0, float(path[-1]["items"] or 1)), (0.0, 1.0))
    lows, highs = [p["interval"][0] for p in path], [p["interval"][1] for p in path]
    axes.y = Scale(*fit([*lows, *highs, q["null"]]), axes.box.bottom, axes.box.top)
    axes.grid(ys=axes.y.ticks())
    before = 0.0
    for p in path:
        axes.area(before, float(p["items"]), p["interval"][0], p["interval"][1], fill=_BAND)
        before = float(p["items"])
    axes.hline(float(q["null"]), color=_NULL, dash="4 3")
    settled = next((p for p in path if p["settled"]), None)
    if settled is not None:
        axes.vline(float(settled["items"]), color=_STOP, dash="2 2")
    axes.frame()
    axes.xticks(axes.x.ticks())
    axes.yticks(axes.y.ticks())
    axes.xlabel("items completed")
    axes.title(f"{q['name']}: interval after each look (null {q['null']}, dashed)")
    rows: list[list[Cell]] = [
        [p["items"], p["n"], p["e_value"], p["interval"][0], p["interval"][1], p["settled"]] for p in path
    ]
    numbers = table(["items", "n", "e-value", "low", "high", "settled"], rows)
    caption = f"{q['name']}: the confidence sequence over looks; verdict at the stop: {q['verdict']}"
    return plot(fig, key=key, caption=caption, numbers=numbers)


def sequential_html(seq: Mapping[str, Any] | None, saved: Mapping[str, Any]) -> Markup:
    if not seq or seq.get("design") != "sequential" or not seq.get("questions"):
        return Markup("")
    parts: list[Markup | str] = [_headline(seq, saved)]
    parts += [_path_plot(q, f"seq-{q['name']}") for q in seq["questions"] if q["path"]]
    return section("Sequential stopping", *parts, key="sequential")
