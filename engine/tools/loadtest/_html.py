"""report.html of a load run: latency over time, histograms, throughput, errors and the validity gates.

Built from the same report blocks as the scenario reports and drawn by their HTML renderer (escaped tables,
deterministic inline SVG; the plots no other block draws are `Figure`s), so the file is self-contained and
rebuilds byte-identically from requests.csv and client_health.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.core._format import format_fixed, format_ms, format_pct, format_setting
from engine.report._blocks import Block, BlockCell, Figure, Note, Section, Table
from engine.report._histogram import Bar, BarPanel, Histogram
from engine.report._html_blocks import html_blocks
from engine.report._page import render_page
from engine.report._svg_draw import FRAME, Axes, Box, Canvas, Legend, fit, legend_at, nice_ticks, split
from engine.tools.loadtest._progress import load_phrase
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._report import gates_blocks, knee_text, latency_numbers

__all__ = ("render_load_html",)

_HISTOGRAMS = (("ttft", "TTFT", "ttft_ms"), ("itl", "ITL", "itl_ms"), ("e2e", "e2e latency", "e2e_ms"))
_BLUE, _ORANGE, _GREEN, _RED, _GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#808080"
_LINES = (("e2e_p50_ms", _BLUE, None), ("e2e_p99_ms", _ORANGE, "5 3"), ("ttft_p50_ms", _GREEN, None),
          ("ttft_p99_ms", _RED, "5 3"))  # fmt: skip
_SLO_DASH = "1.5 2"


def _value_axis(ax: Axes, *, right: bool = False) -> list[float]:
    ticks = ax.y.ticks(5)
    ax.yticks(ticks, right=right)
    return ticks


def _slo(step: Mapping[str, Any]) -> dict[str, float]:
    return {k: v for k, v in step["goodput"]["slo"].items() if k.endswith("_ms") and v is not None}


def _verdict(summary: Mapping[str, Any]) -> str:
    """The gates' verdict at the top of the page, where the status is: a finished run may still be NOT valid."""
    if summary.get("valid", True):
        return "valid: the client was not the bottleneck"
    return "NOT valid: see the validity gates below"


def _facts(summary: Mapping[str, Any], config: Mapping[str, Any]) -> Section:
    rows: tuple[tuple[str, BlockCell], ...] = (
        ("status", summary["status"]),
        ("verdict", _verdict(summary)),
        ("target", config["target"]),
        ("model", config["model"]),
        ("transport", config["transport"]),
        ("arrival", _arrival(config)),
        ("turns · think time", f"{config['turns']} · {format_setting(config['think_time_s'])} s ({config['think']})"),
        (
            "duration · warm-up · grace",
            " · ".join(f"{format_setting(config[k])} s" for k in ("duration_s", "warmup_s", "grace_s")),
        ),
        ("streaming", "yes" if config["stream"] else "no"),
        ("workers", config["workers"]),
        ("seed", config["seed"]),
    )
    note = Note("The students are simrun's sim provider (free, deterministic); only the tutor endpoint is under test.")
    return Section("Run", (Table(("setting", "value"), rows, left=("value",)), note), key="run")


def _arrival(config: Mapping[str, Any]) -> str:
    if config["arrival"] == "concurrency":
        return f"closed loop, {config['concurrency']} conversations at once"
    sweep = config.get("sweep")
    if sweep:
        rates = ", ".join(format_setting(rate) for rate in sweep["rates"])
        return f"{config['arrival']}, sweep over {rates} conversations/s"
    return f"{config['arrival']}, {format_setting(config['rate'])} conversations/s"


def _over_time(step: Mapping[str, Any], key: str) -> Figure:
    timeline = step["timeline"]
    seconds = [float(row["second"]) for row in timeline]
    slo = _slo(step)
    canvas = Canvas(540, 302)
    top_box, bottom_box = split(Box(48, 10, 540 - 110, 302 - 36), 2, gap=12, across=False)
    latencies = [row[name] for row in timeline for name, _, _ in _LINES]
    xs = (min(seconds, default=0.0) - 0.6, max(seconds, default=0.0) + 0.6)
    top = Axes(canvas, top_box, xs, fit([*latencies, *slo.values()], floor=0.0))
    top.grid(ys=top.y.ticks(5))
    legend = []
    for name, color, dash in _LINES:
        top.line(seconds, [row[name] for row in timeline], color=color, dash=dash)
        legend.append(Legend(name.removesuffix("_ms").replace("_", " "), color, dash=dash))
    for name, label in (("ttft_ms", "TTFT SLO"), ("e2e_ms", "e2e SLO")):
        if name in slo:
            top.hline(slo[name], color=_RED, width=1.2, dash=_SLO_DASH)
            legend.append(Legend(f"{label} {format_setting(slo[name])} ms", _RED, width=1.2, dash=_SLO_DASH))
    top.frame()
    _value_axis(top)
    top.ylabel("ms")
    top.legend(legend)
    totals = [row["completed"] + row["errors"] for row in timeline]
    bottom = Axes(canvas, bottom_box, xs, fit(totals, floor=0.0))
    bottom.grid(ys=bottom.y.ticks(4))
    for second, row in zip(seconds, timeline, strict=True):
        bottom.area(second - 0.4, second + 0.4, 0.0, row["completed"], fill=_BLUE)
        if row["errors"]:
            bottom.area(second - 0.4, second + 0.4, row["completed"], row["completed"] + row["errors"], fill=_RED)
    bottom.frame()
    bottom.yticks(bottom.y.ticks(4))
    bottom.xticks(nice_ticks(*xs, 8, integer=True))
    bottom.ylabel("requests / s")
    bottom.xlabel("second of the run (by completion)")
    bottom.legend([Legend("completed", _BLUE, "rect"), Legend("errors", _RED, "rect")])
    rows = tuple(
        (r["second"], r["completed"], r["errors"], r["output_tokens"], format_ms(r["ttft_p50_ms"]),
         format_ms(r["e2e_p50_ms"]), format_ms(r["e2e_p99_ms"]))
        for r in timeline
    )  # fmt: skip
    numbers = Table(("s", "completed", "errors", "output tokens", "TTFT p50", "e2e p50", "e2e p99"), rows)
    return Figure(canvas, (numbers,), key=f"time-{key}", caption="Latency percentiles and throughput over time")


def _histogram(canvas: Canvas, box: Box, values: Sequence[float], slo: float | None) -> Axes:
    """30 bins from 0 to past the SLO, so a narrow spread still shows where it sits."""
    high = max(max(values, default=0.0), slo or 0.0) * 1.05 or 1.0
    counts, edges = np.histogram(values, bins=30, range=(0.0, high))
    ax = Axes(canvas, box, (0.0, high), (0.0, float(max(counts, default=0)) * 1.05 or 1.0))
    ax.grid(ys=ax.y.ticks(4))
    for count, low, top in zip(counts, edges, edges[1:], strict=False):
        if count:
            ax.area(float(low), float(top), 0.0, float(count), fill=_BLUE)
    if slo is not None:
        ax.vline(slo, color=_RED, width=1.2, dash=_SLO_DASH)
    ax.frame()
    ax.xticks(ax.x.ticks(4))
    ax.yticks(ax.y.ticks(4))
    ax.xlabel("ms")
    return ax


def _histograms(step: Mapping[str, Any], rows: Sequence[RequestRecord], key: str) -> Figure:
    canvas = Canvas(540, 202)
    boxes = split(Box(0, 22, 530, 202 - 34), len(_HISTOGRAMS), gap=14, pads=[30.0] * len(_HISTOGRAMS))
    counts: list[tuple[str, int]] = []
    slo = _slo(step)
    for box, (metric, label, slo_name) in zip(boxes, _HISTOGRAMS, strict=True):
        values = [v * 1000 for row in rows if row.ok and not row.warmup and (v := getattr(row, metric)) is not None]
        ax = _histogram(canvas, box, values, slo.get(slo_name))
        if slo_name in slo:
            label = f"{label} (SLO {format_setting(slo[slo_name])} ms, dotted)"
        ax.title(label, size=8)
        counts.append((label, len(values)))
    numbers = Table(("histogram", "requests"), tuple(counts))
    caption = "Distributions over measured successful requests"
    return Figure(canvas, (numbers,), key=f"hist-{key}", caption=caption)


def _errors(step: Mapping[str, Any], key: str) -> Block:
    errors = step["errors"]
    if not errors:
        return Note("No errors.")
    panel = BarPanel(tuple(Bar(name, count) for name, count in errors.items()), "requests", horizontal=True,
                     color=_RED, error_color=_RED)  # fmt: skip
    counts = Table(("type", "count"), tuple(errors.items()))
    return Histogram((panel,), (counts,), key=f"errors-{key}", caption="Errors by type")


def _step(step: Mapping[str, Any], rows: Sequence[RequestRecord], key: str) -> list[Block]:
    throughput, goodput, requests = step["throughput"], step["goodput"], step["requests"]
    figures = Table(
        ("requests/s", "conversations/s", "output tokens/s", "goodput share", "goodput requests/s", "sent", "ok"),
        ((*(format_fixed(throughput[k]) for k in ("requests_per_s", "conversations_per_s", "output_tokens_per_s")),
          format_pct(goodput["share"]), format_fixed(goodput["requests_per_s"]), requests["sent"], requests["ok"]),),
    )  # fmt: skip
    gates = Section("Validity gates", tuple(gates_blocks(step)), key=f"gates-{key}")
    return [figures, latency_numbers(step), _over_time(step, key), _histograms(step, rows, key), _errors(step, key),
            gates]  # fmt: skip


def _sweep_plot(summary: Mapping[str, Any]) -> Canvas:
    """e2e p99 against the rate on the left axis, the goodput share (0–105%: the whole range, since a 96–104%
    axis makes 1% look like a cliff) on the right, the legend below."""
    steps, sweep = summary["steps"], summary["sweep"]
    rates = [float(step["target_rate"]) for step in steps]
    p99 = [(step["latency_ms"]["e2e"] or {}).get("p99") for step in steps]
    e2e_slo = _slo(steps[0]).get("e2e_ms")
    knee = sweep["knee_rate"] if sweep["knee_rate"] is not None and sweep.get("knee_reached", True) else None
    canvas = Canvas(540, 260)
    box = Box(52, 10, 540 - 60, 260 - 66)
    ax = Axes(canvas, box, fit([*rates, knee]), fit([*p99, e2e_slo], floor=0.0))
    twin = Axes(canvas, box, (ax.x.low, ax.x.high), (0.0, 105.0))
    ax.grid(ys=ax.y.ticks(5))
    legend = [Legend("e2e p99 (ms)", _BLUE)]
    ax.line(rates, p99, color=_BLUE)
    for rate, value in zip(rates, p99, strict=True):
        if value is not None:
            ax.marker(rate, value, color=_BLUE)
    if e2e_slo is not None:
        ax.hline(e2e_slo, color=_RED, width=1.2, dash=_SLO_DASH)
        legend.append(Legend(f"e2e SLO {format_setting(e2e_slo)} ms", _RED, width=1.2, dash=_SLO_DASH))
    if knee is not None:
        ax.vline(knee, color=_GREY, dash="5 3")
        legend.append(Legend("knee (last passing step)", _GREY, width=1.0, dash="5 3"))
    goodput = [step["goodput"]["share"] * 100 for step in steps]
    twin.line(rates, goodput, color=_GREEN, dash="5 3")
    for rate, value in zip(rates, goodput, strict=True):
        twin.marker(rate, value, "s", color=_GREEN)
    twin.hline(sweep["goodput_target"] * 100, color=_GREEN, dash=_SLO_DASH)
    legend += [Legend("goodput %", _GREEN, dash="5 3"), Legend("goodput target", _GREEN, width=1.0, dash=_SLO_DASH)]
    ax.frame()
    canvas.line(box.right, box.top, box.right, box.bottom, stroke=FRAME, width=0.8)
    ax.xticks(ax.x.ticks(6))
    _value_axis(ax)
    _value_axis(twin, right=True)
    ax.xlabel("conversations / s")
    ax.ylabel("ms", offset=36)
    twin.ylabel("goodput %", offset=34, right=True)
    legend_at(canvas, box.left, box.bottom + 34, legend, columns=3)
    return canvas


def _sweep(summary: Mapping[str, Any]) -> Figure:
    steps, sweep = summary["steps"], summary["sweep"]
    rows = tuple(
        (format_fixed(s["target_rate"]), format_fixed(s["throughput"]["requests_per_s"]),
         format_pct(s["goodput"]["share"]), "yes" if s["gates"]["valid"] else "no")
        for s in steps
    )  # fmt: skip
    numbers = Table(("rate", "requests/s", "goodput share", "valid"), rows)
    return Figure(_sweep_plot(summary), (numbers,), key="sweep", caption=f"Sweep: {knee_text(sweep)}")


def render_load_html(summary: Mapping[str, Any], config: Mapping[str, Any], rows: Sequence[RequestRecord]) -> str:
    """The whole page; deterministic for the same files."""
    blocks: list[Block] = [_facts(summary, config)]
    nav = [("sec-run", "run")]
    if "steps" in summary:
        blocks.append(Section("Sweep", (_sweep(summary),), key="sweep"))
        nav.append(("sec-sweep", "sweep"))
        for index, step in enumerate(summary["steps"]):
            found = [row for row in rows if row.step == index]
            blocks.append(
                Section(
                    f"Step {index}: {load_phrase(step)}", tuple(_step(step, found, str(index))), key=f"step-{index}"
                )
            )
            nav.append((f"sec-step-{index}", f"step {index}"))
    else:
        blocks.append(Section("Results", tuple(_step(summary, rows, "run")), key="results"))
        nav.append(("sec-results", "results"))
    body = html_blocks(blocks)
    return render_page(title=f"simrun load test: {summary['name']}", header=None, body=body, nav=nav)
