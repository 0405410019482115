"""A load run's files and views: the per-request CSV, client health, the markdown report and the console table."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import astuple, fields
from pathlib import Path
from typing import Any

import orjson
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.core._dirfiles import read_in, write_in
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._metrics import PERCENTILES, latency_table
from engine.tools.loadtest._progress import load_label
from engine.tools.loadtest._records import CSV_COLUMNS, DERIVED, RequestRecord

__all__ = (
    "HEALTH",
    "REQUESTS",
    "knee_text",
    "read_health",
    "read_requests",
    "render_console",
    "render_markdown",
    "write_requests",
)

REQUESTS = "requests.csv"
HEALTH = "client_health.json"
_FIELDS = fields(RequestRecord)


def write_requests(path: Path, rows: Sequence[RequestRecord]) -> None:
    """Every attempt, raw stamps (s since the shared start) and the derived latencies (s)."""
    file = io.StringIO(newline="")
    writer = csv.writer(file)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([*astuple(row), *(getattr(row, name) for name in DERIVED)])
    write_in(path.parent, path.name, file.getvalue().encode("utf-8"))


def _cell(kind: str, text: str) -> Any:
    if text == "":
        return None
    if kind == "bool":
        return text == "True"
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def read_requests(path: Path) -> list[RequestRecord]:
    kinds = [str(f.type).split(" | ")[0] for f in _FIELDS]
    reader = csv.reader(io.StringIO(read_in(path.parent, path.name).decode("utf-8"), newline=""))
    next(reader)
    return [RequestRecord(*(_cell(k, t) for k, t in zip(kinds, line, strict=False))) for line in reader]


def read_health(path: Path) -> list[Health]:
    return [Health(**health) for health in orjson.loads(read_in(path.parent, path.name))]


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.2f}"


def _step_lines(step: Mapping[str, Any]) -> list[str]:
    requests, throughput, goodput, gates = step["requests"], step["throughput"], step["goodput"], step["gates"]
    load = (
        f"{step['concurrency']} conversations at once"
        if step.get("concurrency") is not None
        else f"target {_rate(step['target_rate'])} conversations/s"
    )
    lines = [
        f"- arrival `{step['arrival']}`, {load}, measured window {step['window_s']:.1f} s",
        f"- requests: {requests['sent']} sent, {requests['measured']} measured, {requests['ok']} ok, "
        f"{requests['warmup']} in warm-up, {requests['retries']} retries, {requests['scheduled_not_sent']} scheduled "
        "but never sent",
        f"- throughput: {_rate(throughput['requests_per_s'])} requests/s, {_rate(throughput['conversations_per_s'])} "
        f"conversations/s, {_rate(throughput['output_tokens_per_s'])} output tokens/s",
        f"- goodput: {goodput['share']:.1%} of measured requests succeeded and met the SLO ({_slo(goodput['slo'])}), "
        f"{_rate(goodput['requests_per_s'])} requests/s",
        f"- errors: {', '.join(f'{k} {v}' for k, v in step['errors'].items()) or 'none'}",
        "",
        "| latency (ms) | n | mean | " + " | ".join(f"p{p}" for p in PERCENTILES) + " | max |",
        "|---|---|---|" + "---|" * len(PERCENTILES) + "---|",
    ]
    for name, stats in latency_table(step):
        if stats is not None:
            cells = [_ms(stats[f"p{p}"]) for p in PERCENTILES]
            lines.append(
                f"| {name} | {stats['n']} | {_ms(stats['mean'])} | {' | '.join(cells)} | {_ms(stats['max'])} |"
            )
    lines += ["", f"**Validity: {'valid' if gates['valid'] else 'NOT valid'}**", ""]
    lines += [
        f"- {name}: {'ok' if check['ok'] else 'FAILED'} ({_check(check)})" for name, check in gates["checks"].items()
    ]
    lines += [f"- note: {note}" for note in gates["notes"]]
    return lines


def _slo(slo: Mapping[str, Any]) -> str:
    limits = [f"{name.removesuffix('_ms')} ≤ {limit:g} ms" for name, limit in slo.items() if name.endswith("_ms")]
    if not limits:
        return "none set"
    return ", ".join(limits) + (" from the schedule" if slo.get("from_schedule") else " from the send")


def _check(check: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in check.items() if k != "ok")


def knee_text(sweep: Mapping[str, Any]) -> str:
    """Where the sweep's knee lies, without claiming one that was never reached."""
    rates = sweep.get("rates_run") or []
    if sweep.get("broke_at") is None:
        last = f"{_rate(rates[-1])} conversations/s, the last rate" if rates else "the last rate"
        return f"knee not reached (≥ {last}): every step passed, so the endpoint holds more"
    if sweep.get("stopped_by") == "gates":
        return (
            f"no knee found: the sweep stopped at {_rate(sweep['broke_at'])} conversations/s because a validity "
            "gate failed while goodput still met its target (see the gates)"
        )
    if sweep["knee_rate"] is None:
        return f"knee below the first rate: {_rate(sweep['broke_at'])} conversations/s already failed"
    return (
        f"knee: {_rate(sweep['knee_rate'])} conversations/s ({_rate(sweep['knee_requests_per_s'])} requests/s); "
        f"broke at {_rate(sweep['broke_at'])} conversations/s"
    )


def _unreachable(summary: Mapping[str, Any]) -> str | None:
    check = (summary.get("gates") or {}).get("checks", {}).get("target_reachable")
    return None if check is None else f"target unreachable: {check['reason']}; nothing was sent → NOT valid"


def render_markdown(summary: Mapping[str, Any]) -> str:
    lines = [f"# simrun load test: {summary['name']}", "", f"- status: **{summary['status']}**, transport "
             f"`{summary['transport']}`", ""]  # fmt: skip
    if "latency_ms" not in summary and "steps" not in summary:
        return "\n".join([*lines, f"**{_unreachable(summary) or 'nothing was measured'}**"]) + "\n"
    sweep = summary.get("sweep")
    if sweep is None:
        return "\n".join(lines + _step_lines(summary)) + "\n"
    lines += [
        f"**Sweep: {knee_text(sweep)}** (a step passes when ≥ {sweep['goodput_target']:.0%} of its "
        "requests meet the SLO and its gates hold)",
        "",
    ]
    for index, step in enumerate(summary["steps"]):
        lines += [f"## step {index}: {_rate(step['target_rate'])} conversations/s", "", *_step_lines(step), ""]
    return "\n".join(lines)


def _gate_line(step: Mapping[str, Any]) -> str:
    """The validity gates in one line: what a reader checks before trusting the row above."""
    checks, parts = step["gates"]["checks"], []
    if "rate" in checks:
        achieved, scheduled = step["throughput"]["achieved_start_rate"], step["throughput"]["scheduled_start_rate"]
        parts.append(
            f"starts {_rate(achieved)}/s, scheduled {_rate(scheduled)}/s for a target of "
            f"{_rate(step['target_rate'])}/s ({checks['rate']['ratio']:.0%} on time)"
        )
        dispatch = checks["dispatch_delay"]
        parts.append(f"dispatch delay p50/p99 {_ms(dispatch['p50_ms'])}/{_ms(dispatch['p99_ms'])} ms")
    parts.append(f"loop lag p99 {_ms(checks['event_loop_lag']['p99_ms'])} ms")
    parts.append(f"client CPU {checks['client_cpu']['share_of_core']:.0%} of a core")
    verdict = "valid" if step["gates"]["valid"] else "NOT valid"
    return f"gates: {' · '.join(parts)} → {verdict}"


def render_console(summary: Mapping[str, Any]) -> RenderableType:
    if "latency_ms" not in summary and "steps" not in summary:
        return Text(f"gates: {_unreachable(summary) or 'nothing was measured'}", style="red")
    steps = summary.get("steps") or [summary]
    table = Table(title=f"load test {summary['name']} ({summary['transport']})")
    for column in ("load", "req/s", "tok/s", "TTFT p50/p99", "ITL p50", "e2e p50/p99", "from schedule p99",
                   "dispatch p99", "goodput", "errors", "valid"):  # fmt: skip
        table.add_column(column, justify="right")
    for step in steps:
        lat = step["latency_ms"]

        def pick(name: str, p: str) -> str:
            return _ms(lat[name][p]) if lat.get(name) else "–"  # noqa: B023

        table.add_row(
            load_label(step),
            _rate(step["throughput"]["requests_per_s"]),
            _rate(step["throughput"]["output_tokens_per_s"]),
            f"{pick('ttft', 'p50')}/{pick('ttft', 'p99')}",
            pick("itl", "p50"),
            f"{pick('e2e', 'p50')}/{pick('e2e', 'p99')}",
            pick("e2e_from_schedule", "p99"),
            pick("dispatch_delay", "p99"),
            f"{step['goodput']['share']:.0%}",
            str(sum(step["errors"].values())),
            "yes" if step["gates"]["valid"] else "NO",
        )
    gates = [Text(_gate_line(step), style="dim" if step["gates"]["valid"] else "red") for step in steps]
    notes = [
        Text(f"note: {note}", style="yellow") for note in dict.fromkeys(n for s in steps for n in s["gates"]["notes"])
    ]
    sweep = summary.get("sweep")
    if sweep is not None:
        notes.insert(0, Text(knee_text(sweep), style="bold"))
    return Group(table, *gates, *notes)
