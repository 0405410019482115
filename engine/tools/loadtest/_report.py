"""A load run's files and views: the per-request CSV, client health, and its results as report blocks (report.md
and the console table; report.html draws the same tables around its plots)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import astuple, fields
from pathlib import Path
from typing import Any

import orjson
from rich.console import RenderableType

from engine.core._dirfiles import read_in, write_in
from engine.core._format import MISSING, format_fixed, format_ms, format_pct, format_setting, format_sig
from engine.report._blocks import Block, BlockCell, Bullets, Note, Section, Strong, Table
from engine.report._console import console_blocks
from engine.report._markdown import markdown_blocks
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._metrics import PERCENTILES, latency_table
from engine.tools.loadtest._progress import load_label
from engine.tools.loadtest._records import CSV_COLUMNS, DERIVED, RequestRecord

__all__ = (
    "HEALTH",
    "REQUESTS",
    "gates_blocks",
    "knee_text",
    "latency_numbers",
    "load_blocks",
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
    return format_ms(value)


def _rate(value: float | None) -> str:
    return format_fixed(value, 2)


def _step_facts(step: Mapping[str, Any]) -> Bullets:
    requests, throughput, goodput = step["requests"], step["throughput"], step["goodput"]
    load = (
        f"{step['concurrency']} conversations at once"
        if step.get("concurrency") is not None
        else f"target {_rate(step['target_rate'])} conversations/s"
    )
    return Bullets(
        (
            f"arrival `{step['arrival']}`, {load}, measured window {format_fixed(step['window_s'], 1)} s",
            f"requests: {requests['sent']} sent, {requests['measured']} measured, {requests['ok']} ok, "
            f"{requests['warmup']} in warm-up, {requests['retries']} retries, {requests['scheduled_not_sent']} "
            "scheduled but never sent",
            f"throughput: {_rate(throughput['requests_per_s'])} requests/s, "
            f"{_rate(throughput['conversations_per_s'])} conversations/s, "
            f"{_rate(throughput['output_tokens_per_s'])} output tokens/s",
            f"goodput: {format_pct(goodput['share'], 1)} of measured requests succeeded and met the SLO "
            f"({_slo(goodput['slo'])}), {_rate(goodput['requests_per_s'])} requests/s",
            f"errors: {', '.join(f'{k} {v}' for k, v in step['errors'].items()) or 'none'}",
        )
    )


def latency_numbers(step: Mapping[str, Any]) -> Table:
    """Each latency's count, mean, percentiles and maximum (ms), the table every output shows."""
    rows: tuple[tuple[BlockCell, ...], ...] = tuple(
        (name, int(stats["n"]), _ms(stats["mean"]), *(_ms(stats[f"p{p}"]) for p in PERCENTILES), _ms(stats["max"]))
        for name, stats in latency_table(step)
        if stats is not None
    )
    return Table(("latency (ms)", "n", "mean", *(f"p{p}" for p in PERCENTILES), "max"), rows, key="latency")


def gates_blocks(step: Mapping[str, Any]) -> list[Block]:
    """The validity gates: what a reader checks before trusting the step's numbers."""
    gates = step["gates"]
    rows = tuple((name, "ok" if check["ok"] else "FAILED", _check(check)) for name, check in gates["checks"].items())
    table = Table(
        ("gate", "ok", "measured"),
        rows,
        caption=f"Validity: {'valid' if gates['valid'] else 'NOT valid'}.",
        row_classes=tuple("" if check["ok"] else "violation" for check in gates["checks"].values()),
        left=("ok", "measured"),
    )
    return [table, *(Note(f"Note: {note}") for note in gates["notes"])]


def _step_blocks(step: Mapping[str, Any]) -> list[Block]:
    return [_step_facts(step), latency_numbers(step), *gates_blocks(step)]


def _slo(slo: Mapping[str, Any]) -> str:
    limits = [
        f"{name.removesuffix('_ms')} ≤ {format_setting(limit)} ms"
        for name, limit in slo.items()
        if name.endswith("_ms")
    ]
    if not limits:
        return "none set"
    return ", ".join(limits) + (" from the schedule" if slo.get("from_schedule") else " from the send")


def _check(check: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {format_sig(v) if isinstance(v, float) else v}" for k, v in check.items() if k != "ok")


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


def _sweep_note(sweep: Mapping[str, Any]) -> Note:
    return Note(
        f"Sweep: {knee_text(sweep)} (a step passes when ≥ {format_pct(sweep['goodput_target'])} of its requests "
        "meet the SLO and its gates hold)",
        console=True,
    )


def load_blocks(summary: Mapping[str, Any]) -> list[Block]:
    """A load run's results as report blocks (report.md; report.html adds its plots around the same tables)."""
    facts = Bullets((f"status: **{summary['status']}**, transport `{summary['transport']}`",))
    if "latency_ms" not in summary and "steps" not in summary:
        return [facts, Note(_unreachable(summary) or "nothing was measured", console=True)]
    sweep = summary.get("sweep")
    if sweep is None:
        return [facts, *_step_blocks(summary)]
    steps = [
        Section(f"step {index}: {_rate(step['target_rate'])} conversations/s", tuple(_step_blocks(step)))
        for index, step in enumerate(summary["steps"])
    ]
    return [facts, _sweep_note(sweep), *steps]


def render_markdown(summary: Mapping[str, Any]) -> str:
    return f"# simrun load test: {summary['name']}\n\n" + markdown_blocks(load_blocks(summary))


def _gate_line(step: Mapping[str, Any]) -> str:
    """The validity gates in one line: what a reader checks before trusting the row above."""
    checks, parts = step["gates"]["checks"], []
    if "rate" in checks:
        achieved, scheduled = step["throughput"]["achieved_start_rate"], step["throughput"]["scheduled_start_rate"]
        parts.append(
            f"starts {_rate(achieved)}/s, scheduled {_rate(scheduled)}/s for a target of "
            f"{_rate(step['target_rate'])}/s ({format_pct(checks['rate']['ratio'])} on time)"
        )
        dispatch = checks["dispatch_delay"]
        parts.append(f"dispatch delay p50/p99 {_ms(dispatch['p50_ms'])}/{_ms(dispatch['p99_ms'])} ms")
    parts.append(f"loop lag p99 {_ms(checks['event_loop_lag']['p99_ms'])} ms")
    parts.append(f"client CPU {format_pct(checks['client_cpu']['share_of_core'])} of a core")
    verdict = "valid" if step["gates"]["valid"] else "NOT valid"
    return f"gates: {' · '.join(parts)} → {verdict}"


def _console_row(step: Mapping[str, Any]) -> tuple[BlockCell, ...]:
    lat = step["latency_ms"]

    def pick(name: str, p: str) -> str:
        return _ms(lat[name][p]) if lat.get(name) else MISSING

    return (
        load_label(step),
        _rate(step["throughput"]["requests_per_s"]),
        _rate(step["throughput"]["output_tokens_per_s"]),
        f"{pick('ttft', 'p50')}/{pick('ttft', 'p99')}",
        pick("itl", "p50"),
        f"{pick('e2e', 'p50')}/{pick('e2e', 'p99')}",
        pick("e2e_from_schedule", "p99"),
        pick("dispatch_delay", "p99"),
        format_pct(step["goodput"]["share"]),
        str(sum(step["errors"].values())),
        Strong("yes") if step["gates"]["valid"] else Strong("NO"),
    )


def render_console(summary: Mapping[str, Any]) -> RenderableType:
    """One row per step, then each step's gates in a line and the run's notes, through the console renderer."""
    if "latency_ms" not in summary and "steps" not in summary:
        return console_blocks([Note(f"gates: {_unreachable(summary) or 'nothing was measured'}", console=True)])
    steps = summary.get("steps") or [summary]
    columns = ("load", "req/s", "tok/s", "TTFT p50/p99", "ITL p50", "e2e p50/p99", "from schedule p99",
               "dispatch p99", "goodput", "errors", "valid")  # fmt: skip
    table = Table(columns, tuple(_console_row(step) for step in steps), title=f"load test {summary['name']} "
                  f"({summary['transport']})")  # fmt: skip
    notes = list(dict.fromkeys(n for s in steps for n in s["gates"]["notes"]))
    blocks: list[Block] = [table, Bullets(tuple(_gate_line(step) for step in steps), console=True)]
    if notes:
        blocks.append(Bullets(tuple(f"note: {note}" for note in notes), console=True))
    sweep = summary.get("sweep")
    if sweep is not None:
        blocks.insert(1, Note(knee_text(sweep), console=True))
    return console_blocks(blocks)
