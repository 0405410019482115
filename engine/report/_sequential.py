"""The report's part for a sequential run: each question's verdict and interval path, and what stopping saved.

Read from the `sequential` entry the runner keeps in manifest.json (recomputed from the records at every look).
The saving is an estimate: calls and dollars per episode so far, times the planned episodes never played.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core._format import format_count, format_interval, format_pct, format_setting, format_sig, format_usd
from engine.report._blocks import SIMRUN_ADDITION, Block, Bullets, Figure, Note, Section, Strong, Table
from engine.report._svg import new_figure
from engine.report._svg_draw import Axes, Box, Scale, fit

__all__ = ("savings", "sequential_blocks", "sequential_lines")

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
    return format_interval(low, high, 3)


_FIXED = (
    "Fixed-sample design: the p-values and intervals above assume the number of episodes was fixed in advance; "
    "stopping a run, or adding items, when they look good invalidates them. A run that may stop early declares "
    "`design.stopping` (docs/sequential.md)."
)


def sequential_blocks(seq: Mapping[str, Any] | None, saved: Mapping[str, Any]) -> list[Block]:
    """A sequential run's section (its verdicts and each question's interval path); a fixed-sample run's note."""
    if not seq or seq.get("design") != "sequential":
        return [Note(_FIXED)]
    rows = tuple(
        (
            q["name"],
            f"{q['form']} {q['null']}",
            Strong(q["verdict"]),
            q["settled"] or "no",
            format_sig(q["e_value"]),
            q["n"],
            _interval(q),
        )
        for q in seq["questions"]
    )
    method = Bullets(
        (
            _headline(seq, saved),
            f"intervals: anytime-valid confidence sequences at {format_pct(seq['interval_level'], 2)} each "
            f"(Bonferroni over {len(seq['questions'])} questions); findings: e-BH at α = "
            f"{format_setting(seq['alpha'])} over the e-values at the stop",
        )
    )
    table = Table(
        ("question", "null", "verdict", "settled", "e-value", "items", "interval"),
        rows,
        key="sequential",
        left=("null", "verdict", "settled"),
    )
    paths = [_path_plot(q, f"seq-{q['name']}") for q in seq["questions"] if q["path"]]
    provenance = f"{SIMRUN_ADDITION} (anytime-valid stopping; the papers ran fixed samples)"
    return [Section("Sequential stopping", (method, table, *paths), key="sequential", provenance=provenance)]


def sequential_lines(summary: Mapping[str, Any]) -> list[str]:
    """What the console prints after a sequential run: the stop, the saving, each question's verdict."""
    seq = summary.get("sequential") or {}
    if seq.get("design") != "sequential":
        return []
    lines = [f"sequential: {_headline(seq, (summary.get('run') or {}).get('saved') or {})}"]
    lines += [
        f"  {q['name']}: {q['verdict']} (e-value {format_sig(q['e_value'])}, interval {_interval(q)})"
        for q in seq["questions"]
    ]
    return lines


def _headline(seq: Mapping[str, Any], saved: Mapping[str, Any]) -> str:
    where = f"after {seq['looks']} of {seq['waves']} looks ({seq['items_used']} items)"
    if not seq.get("stopped_early"):
        return f"ran the plan to its end {where}: no early stop, nothing saved"
    return (
        f"stopped early {where}: {saved['episodes_played']} of {saved['episodes_planned']} episodes "
        f"({format_pct(saved['share_of_plan'])} of the plan); saved ≈ {format_count(saved['calls_saved'])} calls "
        f"and {format_usd(saved['usd_saved'])} against the full plan"
    )


def _path_plot(q: Mapping[str, Any], key: str) -> Figure:
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
    rows = tuple(
        (
            p["items"],
            p["n"],
            format_sig(p["e_value"]),
            format_sig(p["interval"][0]),
            format_sig(p["interval"][1]),
            "yes" if p["settled"] else "no",
        )
        for p in path
    )
    numbers = Table(("items", "n", "e-value", "low", "high", "settled"), rows)
    caption = f"{q['name']}: the confidence sequence over looks; verdict at the stop: {q['verdict']}"
    return Figure(fig, (numbers,), key=key, caption=caption)
