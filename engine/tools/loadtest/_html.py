"""report.html of a load run: latency over time, histograms, throughput, errors and the validity gates.

Built from the same blocks as the scenario reports (escaped tables, deterministic inline SVG), so the file is
self-contained and rebuilds byte-identically from requests.csv and client_health.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from engine.report._page import render_page
from engine.report._svg import Cell, new_figure, paragraph, plot, section, table
from engine.tools.loadtest._metrics import PERCENTILES, latency_table
from engine.tools.loadtest._progress import load_phrase
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._report import knee_text

__all__ = ("render_load_html",)

_HISTOGRAMS = (("ttft", "TTFT", "ttft_ms"), ("itl", "ITL", "itl_ms"), ("e2e", "e2e latency", "e2e_ms"))
_SLO_STYLE: dict[str, Any] = {"color": "tab:red", "linestyle": ":", "linewidth": 1.2}


def _legend_outside(ax: Any, *extra: Any) -> None:
    """Beside the plot (below it when a twin axis holds the right edge), never over the data; `extra` axes
    share the one legend."""
    handles, labels = ax.get_legend_handles_labels()
    for other in extra:
        more = other.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    if not handles:
        return
    if extra:
        ax.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
    else:
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _slo(step: Mapping[str, Any]) -> dict[str, float]:
    return {k: v for k, v in step["goodput"]["slo"].items() if k.endswith("_ms") and v is not None}


def _facts(summary: Mapping[str, Any], config: Mapping[str, Any]) -> Markup:
    rows: list[tuple[str, Cell]] = [
        ("status", summary["status"]),
        ("target", config["target"]),
        ("model", config["model"]),
        ("transport", config["transport"]),
        ("arrival", _arrival(config)),
        ("turns · think time", f"{config['turns']} · {config['think_time_s']} s ({config['think']})"),
        ("duration · warm-up · grace", f"{config['duration_s']} s · {config['warmup_s']} s · {config['grace_s']} s"),
        ("streaming", config["stream"]),
        ("workers", config["workers"]),
        ("seed", config["seed"]),
    ]
    note = paragraph(
        "The students are simrun's sim provider (free, deterministic); only the tutor endpoint is under test.",
        css="note",
    )
    return section("Run", table(("setting", "value"), rows), note, key="run")


def _arrival(config: Mapping[str, Any]) -> str:
    if config["arrival"] == "concurrency":
        return f"closed loop, {config['concurrency']} conversations at once"
    sweep = config.get("sweep")
    if sweep:
        return f"{config['arrival']}, sweep over {', '.join(f'{rate:g}' for rate in sweep['rates'])} conversations/s"
    return f"{config['arrival']}, {config['rate']:g} conversations/s"


def _latency_numbers(step: Mapping[str, Any]) -> Markup:
    columns = ("latency (ms)", "n", "mean", *(f"p{p}" for p in PERCENTILES), "max")
    rows: list[list[Cell]] = [
        [name, stats["n"], stats["mean"], *(stats[f"p{p}"] for p in PERCENTILES), stats["max"]]
        for name, stats in latency_table(step)
        if stats is not None
    ]
    return table(columns, rows, key="latency")


def _over_time(step: Mapping[str, Any], key: str) -> Markup:
    timeline = step["timeline"]
    seconds = [row["second"] for row in timeline]
    fig = new_figure(7.5, 4.2)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name, style in (("e2e_p50_ms", "-"), ("e2e_p99_ms", "--"), ("ttft_p50_ms", "-"), ("ttft_p99_ms", "--")):
        values = [row[name] if row[name] is not None else float("nan") for row in timeline]
        top.plot(seconds, values, style, label=name.removesuffix("_ms").replace("_", " "))
    slo = _slo(step)
    for name, label in (("ttft_ms", "TTFT SLO"), ("e2e_ms", "e2e SLO")):
        if name in slo:
            top.axhline(slo[name], label=f"{label} {slo[name]:g} ms", **_SLO_STYLE)
    top.set_ylabel("ms")
    top.set_ylim(bottom=0)
    _legend_outside(top)
    bottom.bar(seconds, [row["completed"] for row in timeline], label="completed")
    bottom.bar(seconds, [row["errors"] for row in timeline], bottom=[row["completed"] for row in timeline],
               label="errors", color="tab:red")  # fmt: skip
    bottom.set_ylabel("requests / s")
    bottom.set_xlabel("second of the run (by completion)")
    _legend_outside(bottom)
    rows = [
        (
            r["second"],
            r["completed"],
            r["errors"],
            r["output_tokens"],
            r["ttft_p50_ms"],
            r["e2e_p50_ms"],
            r["e2e_p99_ms"],
        )
        for r in timeline
    ]
    numbers = table(("s", "completed", "errors", "output tokens", "TTFT p50", "e2e p50", "e2e p99"), rows)
    return plot(fig, key=f"time-{key}", caption="Latency percentiles and throughput over time", numbers=numbers)


def _histograms(step: Mapping[str, Any], rows: Sequence[RequestRecord], key: str) -> Markup:
    fig = new_figure(7.5, 2.8)
    axes = fig.subplots(1, len(_HISTOGRAMS))
    counts: list[tuple[str, Cell]] = []
    slo = _slo(step)
    for ax, (metric, label, slo_name) in zip(axes, _HISTOGRAMS, strict=True):
        values = [v * 1000 for row in rows if row.ok and not row.warmup and (v := getattr(row, metric)) is not None]
        if values:  # from 0 and past the SLO, so a narrow spread still shows where it sits
            ax.hist(values, bins=30, range=(0.0, max(max(values), slo.get(slo_name, 0.0)) * 1.05 or 1.0))
        if slo_name in slo:
            ax.axvline(slo[slo_name], **_SLO_STYLE)
            label = f"{label} (SLO {slo[slo_name]:g} ms, dotted)"
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("ms", fontsize=8)
        counts.append((label, len(values)))
    numbers = table(("histogram", "requests"), counts)
    return plot(fig, key=f"hist-{key}", caption="Distributions over measured successful requests", numbers=numbers)


def _errors(step: Mapping[str, Any], key: str) -> Markup:
    errors = step["errors"]
    if not errors:
        return paragraph("No errors.")
    fig = new_figure(5.0, 2.4)
    ax = fig.subplots()
    ax.barh(list(errors), list(errors.values()), color="tab:red")
    ax.set_xlabel("requests")
    return plot(fig, key=f"errors-{key}", caption="Errors by type", numbers=table(("type", "count"), errors.items()))


def _gates(step: Mapping[str, Any]) -> Markup:
    gates = step["gates"]
    rows = []
    for name, check in gates["checks"].items():
        details = ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in check.items() if k != "ok"
        )
        rows.append((name, check["ok"], details))
    verdict = "valid" if gates["valid"] else "NOT valid"
    classes = ["" if ok else "violation" for _, ok, _ in rows]
    parts: list[Markup | str] = [table(("gate", "ok", "measured"), rows, row_classes=classes), f"Result: {verdict}."]
    parts += [f"Note: {note}" for note in gates["notes"]]
    return Markup("").join(part if isinstance(part, Markup) else paragraph(part) for part in parts)


def _step(step: Mapping[str, Any], rows: Sequence[RequestRecord], key: str) -> Markup:
    throughput, goodput, requests = step["throughput"], step["goodput"], step["requests"]
    figures = table(
        ("requests/s", "conversations/s", "output tokens/s", "goodput share", "goodput requests/s", "sent", "ok"),
        [(throughput["requests_per_s"], throughput["conversations_per_s"], throughput["output_tokens_per_s"],
          goodput["share"], goodput["requests_per_s"], requests["sent"], requests["ok"])],
    )  # fmt: skip
    return Markup("").join(
        [
            figures,
            _latency_numbers(step),
            _over_time(step, key),
            _histograms(step, rows, key),
            _errors(step, key),
            section("Validity gates", _gates(step), key=f"gates-{key}"),
        ]
    )


def _sweep(summary: Mapping[str, Any]) -> Markup:
    steps = summary["steps"]
    rates = [step["target_rate"] for step in steps]
    fig = new_figure(7.5, 3.6)
    ax = fig.subplots()
    p99 = [(step["latency_ms"]["e2e"] or {}).get("p99", float("nan")) for step in steps]
    ax.plot(rates, p99, "o-", label="e2e p99 (ms)")
    sweep = summary["sweep"]
    e2e_slo = _slo(steps[0]).get("e2e_ms")
    if e2e_slo is not None:
        ax.axhline(e2e_slo, label=f"e2e SLO {e2e_slo:g} ms", **_SLO_STYLE)
    if sweep["knee_rate"] is not None and sweep.get("knee_reached", True):
        ax.axvline(sweep["knee_rate"], color="0.5", linestyle="--", linewidth=1, label="knee (last passing step)")
    ax.set_ylim(bottom=0)
    twin = ax.twinx()
    twin.plot(rates, [step["goodput"]["share"] * 100 for step in steps], "s--", color="tab:green", label="goodput %")
    twin.axhline(sweep["goodput_target"] * 100, color="tab:green", linestyle=":", linewidth=1, label="goodput target")
    twin.set_ylim(0, 105)  # the whole range: a 96–104% axis makes 1% look like a cliff
    ax.set_xlabel("conversations / s")
    ax.set_ylabel("ms")
    twin.set_ylabel("goodput %")
    _legend_outside(ax, twin)
    rows = [
        (s["target_rate"], s["throughput"]["requests_per_s"], s["goodput"]["share"], s["gates"]["valid"]) for s in steps
    ]
    numbers = table(("rate", "requests/s", "goodput share", "valid"), rows)
    caption = f"Sweep: {knee_text(sweep)}"
    return plot(fig, key="sweep", caption=caption, numbers=numbers)


def render_load_html(summary: Mapping[str, Any], config: Mapping[str, Any], rows: Sequence[RequestRecord]) -> str:
    """The whole page; deterministic for the same files."""
    parts = [_facts(summary, config)]
    nav = [("sec-run", "run")]
    if "steps" in summary:
        parts.append(section("Sweep", _sweep(summary), key="sweep"))
        nav.append(("sec-sweep", "sweep"))
        for index, step in enumerate(summary["steps"]):
            found = [row for row in rows if row.step == index]
            parts.append(section(f"Step {index}: {load_phrase(step)}", _step(step, found, str(index)),
                                 key=f"step-{index}"))  # fmt: skip
            nav.append((f"sec-step-{index}", f"step {index}"))
    else:
        parts.append(section("Results", _step(summary, rows, "run"), key="results"))
        nav.append(("sec-results", "results"))
    return render_page(title=f"simrun load test: {summary['name']}", header=None, body=Markup("").join(parts), nav=nav)
