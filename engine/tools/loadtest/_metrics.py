"""From request rows and client health to the summary: throughput, latency percentiles, goodput, errors, gates."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from engine.core._format import format_ms, format_pct
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._records import RequestRecord

__all__ = ("PERCENTILES", "latency_table", "summarize")

PERCENTILES = (50, 90, 95, 99)
MIN_WALL_FOR_CPU_S = 1.0
BUSY_SHARE = 0.5
"""Share of `max_cpu` from which a late event loop is the client's own doing; below it, other processes on the
machine made the loop late (a shared machine), which delays sends but does not make the client the bottleneck."""
LATENCIES = ("ttft", "ttft_from_schedule", "itl", "tpot", "e2e", "e2e_from_schedule", "dispatch_delay")


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    """Milliseconds: mean, percentiles and max; None when nothing was measured."""
    if not values:
        return None
    ms = np.asarray(values, dtype=float) * 1000
    found = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(ms, PERCENTILES), strict=True)}
    return {"n": len(ms), "mean": float(ms.mean()), **found, "max": float(ms.max())}


def _column(rows: Sequence[RequestRecord], metric: str) -> list[float]:
    values = (getattr(row, metric) for row in rows)
    return [v for v in values if v is not None]


def _meets(config: LoadConfig) -> Callable[[RequestRecord], bool]:
    slo = config.slo
    schedule = slo.from_schedule and config.open_loop
    limits = (
        ("ttft_from_schedule" if schedule else "ttft", slo.ttft_ms),
        ("itl", slo.itl_ms),
        ("tpot", slo.tpot_ms),
        ("e2e_from_schedule" if schedule else "e2e", slo.e2e_ms),
    )
    active = [(metric, limit / 1000) for metric, limit in limits if limit is not None]

    def meets(row: RequestRecord) -> bool:
        if not row.ok:
            return False
        return all((value := getattr(row, metric)) is not None and value <= limit for metric, limit in active)

    return meets


def _timeline(rows: Sequence[RequestRecord], start: float) -> list[dict[str, Any]]:
    """Per-second buckets by completion time: counts, errors, tokens and latency percentiles over the run."""
    buckets: dict[int, list[RequestRecord]] = {}
    for row in rows:
        if row.end is not None:
            buckets.setdefault(int(row.end - start), []).append(row)
    timeline = []
    for second in range(max(buckets, default=-1) + 1):
        bucket = buckets.get(second, [])
        ok = [row for row in bucket if row.ok]
        e2e, ttft = _stats(_column(ok, "e2e")), _stats(_column(ok, "ttft"))
        timeline.append(
            {
                "second": second,
                "completed": len(ok),
                "errors": len(bucket) - len(ok),
                "output_tokens": sum(row.completion_tokens for row in ok),
                "e2e_p50_ms": e2e["p50"] if e2e else None,
                "e2e_p99_ms": e2e["p99"] if e2e else None,
                "ttft_p50_ms": ttft["p50"] if ttft else None,
                "ttft_p99_ms": ttft["p99"] if ttft else None,
            }
        )
    return timeline


def _on_time_starts(config: LoadConfig, rows: Sequence[RequestRecord]) -> int:
    """Conversations whose first request left before the schedule ended: a client that falls behind sends
    the tail of its schedule late, past the end, and this count falls short of the schedule's."""
    end = config.duration_s if config.duration_s is not None else float("inf")
    return sum(1 for row in rows if row.turn == 0 and row.attempt == 0 and row.dispatched < end)


def _schedule_span(config: LoadConfig, rows: Sequence[RequestRecord], rate: float | None) -> float | None:
    """How much of the schedule the run covered: to its end, or to its last start when it stopped sooner
    (`max_requests`, Ctrl-C), so a run cut short is not read as a client that fell behind."""
    if not config.open_loop or not rate:
        return None
    starts = [row.scheduled for row in rows if row.turn == 0 and row.attempt == 0 and row.scheduled is not None]
    covered = max(starts, default=0.0) + 1 / rate
    return min(covered, config.duration_s) if config.duration_s is not None else covered


def _client_notes(*, client_bound: bool, machine_late: bool, cpu: float, lag_p99: float) -> list[str]:
    """What the client's own measures say about it, with the gate settings that tune the verdict."""
    notes = []
    if client_bound:
        notes.append(
            f"the client was the bottleneck (its CPU {format_pct(cpu)} of a core, event-loop lag past its limit): add "
            "workers, or raise gates.max_cpu / gates.loop_lag_p99_ms if this client is known to keep up"
        )
    if machine_late:
        notes.append(
            f"the event loop ran late (lag p99 {format_ms(lag_p99, 0)} ms) while the client used only "
            f"{format_pct(cpu)} of a core: other processes on this machine delayed it, not the client's own work; the "
            "results stand, and latencies from the schedule include that delay (gates.loop_lag_p99_ms tunes it)"
        )
    return notes


def _gates(
    config: LoadConfig, healths: Sequence[Health], rows: Sequence[RequestRecord], latency: dict[str, Any]
) -> dict[str, Any]:
    gates = config.gates
    lags = [lag for health in healths for lag in health.loop_lag_s]
    lag = _stats(lags)
    wall = max(h.wall_s for h in healths)
    cpu = max((h.cpu_s / h.wall_s if h.wall_s else 0.0) for h in healths)
    cpu_ok = cpu <= gates.max_cpu or wall < MIN_WALL_FOR_CPU_S  # start-up dominates a run this short
    dispatch = latency.get("dispatch_delay")
    scheduled = sum(h.scheduled_starts for h in healths)
    started = _on_time_starts(config, rows)
    checks: dict[str, dict[str, Any]] = {
        "event_loop_lag": {
            "p99_ms": lag["p99"] if lag else None,
            "limit_ms": gates.loop_lag_p99_ms,
            "ok": lag is None or lag["p99"] <= gates.loop_lag_p99_ms,
        },
        "client_cpu": {"share_of_core": cpu, "limit": gates.max_cpu, "ok": cpu_ok},
    }
    if config.open_loop:
        ratio = started / scheduled if scheduled else 1.0
        checks["rate"] = {"scheduled_starts": scheduled, "started_on_time": started, "ratio": ratio}
        checks["rate"] |= {"limit": gates.min_rate_ratio, "ok": ratio >= gates.min_rate_ratio}
        p99 = dispatch["p99"] if dispatch else None
        checks["dispatch_delay"] = {"p50_ms": dispatch["p50"] if dispatch else None, "p99_ms": p99}
        checks["dispatch_delay"] |= {
            "limit_ms": gates.dispatch_p99_ms,
            "ok": p99 is None or p99 <= gates.dispatch_p99_ms,
        }
    busy = cpu >= BUSY_SHARE * gates.max_cpu or wall < MIN_WALL_FOR_CPU_S
    lag_ok = checks["event_loop_lag"]["ok"]
    machine_late = not lag_ok and not busy
    client_bound = not checks["client_cpu"]["ok"] or (not lag_ok and busy)
    late = config.open_loop and not checks["dispatch_delay"]["ok"]
    # Sends no later than the loop itself ran late were held by the machine, not queued by the client.
    lag_p99 = lag["p99"] if lag else 0.0
    explained = machine_late and dispatch is not None and dispatch["p99"] <= lag_p99 + gates.dispatch_p99_ms
    queueing = late and not explained
    notes = _client_notes(client_bound=client_bound, machine_late=machine_late, cpu=cpu, lag_p99=lag_p99)
    if queueing:
        notes.append(
            "requests left late (dispatch delay past its limit): latency from the actual send hides this queueing "
            "(coordinated omission); read the latencies measured from the schedule"
        )
    if not config.open_loop:
        notes.append("closed loop: no schedule, so latency is from the send and queueing cannot show")
    finals = _finals(rows)
    if finals and all(row.error == "connection" for row in finals):
        notes.append("every request failed to connect: is the target up and its address right?")
    rate_ok = checks["rate"]["ok"] if "rate" in checks else True
    return {
        "valid": rate_ok and not (client_bound or queueing),
        "client_bound": client_bound,
        "machine_late": machine_late,
        "coordinated_omission": queueing,
        "checks": checks,
        "notes": notes,
    }


def summarize(
    config: LoadConfig, rows: Sequence[RequestRecord], healths: Sequence[Health], *, rate: float | None
) -> dict[str, Any]:
    """The numbers of one run (or one sweep step) over its measured window (warm-up excluded)."""
    finals = _finals(rows)
    measured = [row for row in finals if not row.warmup]
    ok = [row for row in measured if row.ok]
    ends = [row.end for row in measured if row.end is not None]
    window = max(ends) - config.warmup_s if ends else 0.0
    per_s = (lambda count: count / window) if window > 0 else (lambda count: 0.0)
    # dispatch delay over first attempts, failed ones too: queueing happens before the outcome is known, and
    # a retry leaves late by design (its backoff), which is not the client falling behind
    sends = [row for row in rows if row.attempt == 0 and not row.warmup]
    latency = {name: _stats(_column(sends if name == "dispatch_delay" else ok, name)) for name in LATENCIES}
    meets = _meets(config)
    good = sum(1 for row in measured if meets(row))
    span = _schedule_span(config, rows, rate)
    output_tokens = sum(row.completion_tokens for row in ok)
    scheduled = sum(h.scheduled_requests for h in healths)
    return {
        "target_rate": rate,
        "concurrency": None if config.open_loop else config.concurrency,
        "arrival": config.arrival,
        "window_s": window,
        "requests": {
            "sent": len(rows),
            "measured": len(measured),
            "ok": len(ok),
            "warmup": len(finals) - len(measured),
            "retries": sum(1 for row in rows if row.attempt > 0),
            "scheduled_not_sent": max(0, scheduled - len(finals)),
        },
        "errors": dict(sorted(Counter(row.error for row in measured if row.error).items())),
        "attempt_errors": dict(sorted(Counter(row.error for row in rows if row.error and not row.warmup).items())),
        "throughput": {
            "requests_per_s": per_s(len(ok)),
            "conversations_per_s": per_s(sum(h.completed for h in healths)),
            "output_tokens_per_s": per_s(output_tokens),
            "achieved_start_rate": _on_time_starts(config, rows) / span if span else None,
            # what this run's draw of the arrival process asked for (a Poisson schedule scatters round the target)
            "scheduled_start_rate": sum(h.scheduled_starts for h in healths) / span if span else None,
        },
        "tokens": {"prompt": sum(r.prompt_tokens for r in ok), "completion": output_tokens},
        "latency_ms": latency,
        "goodput": {
            "slo": config.slo.model_dump(exclude_none=True),
            "share": good / len(measured) if measured else 0.0,
            "requests_per_s": per_s(good),
        },
        "in_flight": {
            "mean": float(np.mean([n for h in healths for n in h.in_flight] or [0])),
            "max": max((n for h in healths for n in h.in_flight), default=0),
        },
        "by_turn": _by_turn(ok),
        "timeline": _timeline(rows, 0.0),
        "gates": _gates(config, healths, rows, latency),
    }


def _finals(rows: Sequence[RequestRecord]) -> list[RequestRecord]:
    """Each request's last attempt: its outcome. Without retries, every row."""
    last: dict[tuple[int, int, int], RequestRecord] = {}
    for row in rows:
        key = (row.step, row.conversation, row.turn)
        if key not in last or row.attempt > last[key].attempt:
            last[key] = row
    return list(last.values())


def _by_turn(rows: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """Per turn index: history grows with the turn, and so may TTFT (prefill)."""
    turns: dict[int, list[RequestRecord]] = {}
    for row in rows:
        turns.setdefault(row.turn, []).append(row)
    return [
        {
            "turn": turn,
            "n": len(group),
            "messages": group[0].messages,
            "ttft_ms": _stats(_column(group, "ttft")),
            "e2e_ms": _stats(_column(group, "e2e")),
        }
        for turn, group in sorted(turns.items())
    ]


def latency_table(summary: Mapping[str, Any]) -> list[tuple[str, dict[str, float] | None]]:
    """The latency rows in display order, for the console and the report."""
    return [(name, summary["latency_ms"].get(name)) for name in LATENCIES]
