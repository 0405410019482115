"""What a load test says while it runs: a live line once a second on a terminal, a line every 10 s when piped,
and one line per sweep step as it ends, so a long run is never silent and a broken one shows at once."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import numpy as np
from rich.console import Console
from rich.live import Live
from rich.text import Text

from engine.core._format import MISSING, format_count, format_fixed, format_ms, format_pct

__all__ = ("ConsoleProgress", "LiveCounts", "ProgressSink", "load_label", "load_phrase", "step_line")

TERMINAL_INTERVAL_S = 1.0
PIPED_INTERVAL_S = 10.0


@dataclass
class LiveCounts:
    """Counters the generator bumps as requests end; the progress line reads them, nothing is scanned."""

    sent: int = 0
    ok: int = 0
    errors: int = 0
    in_flight: int = 0
    ttfts: list[float] = field(default_factory=list)
    """TTFTs (s) of requests that ended since the last line; the line empties it."""
    watched: bool = False
    """Set by whoever prints the line; TTFTs are only kept then, so an unwatched run does not grow a list."""


class ProgressSink(Protocol):
    """Where a running step's counters go: the console, or (in a worker process) the coordinator."""

    async def watch(self, live: LiveCounts, label: str = "", /) -> None: ...


def load_label(step: Mapping[str, Any]) -> str:
    """How hard the step pushed: a rate for an open loop, a number of conversations at once for a closed one."""
    if step.get("concurrency") is not None:
        return f"{step['concurrency']} at once"
    rate = step.get("target_rate")
    return f"{format_fixed(rate)}/s" if rate is not None else MISSING


def load_phrase(step: Mapping[str, Any]) -> str:
    if step.get("concurrency") is not None:
        return f"{step['concurrency']} conversations at once"
    return f"{format_fixed(step['target_rate'])} conversations/s"


def _ms(value: float | None) -> str:
    return MISSING if value is None else f"{format_ms(value, 0)} ms"


def step_line(index: int, total: int, step: Mapping[str, Any], *, passed: bool) -> str:
    """One sweep step as it ends: what it achieved and whether the sweep goes on."""
    e2e = step["latency_ms"].get("e2e") or {}
    errors = sum(step["errors"].values())
    verdict = "passed" if passed else "FAILED: the sweep stops here"
    return (
        f"step {index + 1}/{total} · {load_phrase(step)}: "
        f"{format_fixed(step['throughput']['requests_per_s'])} requests/s, "
        f"goodput {format_pct(step['goodput']['share'])}, "
        f"e2e p99 {_ms(e2e.get('p99'))}, {errors} error{'s' * (errors != 1)}, "
        f"gates {'valid' if step['gates']['valid'] else 'NOT valid'} → {verdict}"
    )


class ConsoleProgress:
    """Prints the progress of a load test on `console` (a terminal gets a live line, a pipe periodic lines)."""

    def __init__(self, console: Console, *, interval_s: float | None = None) -> None:
        self.console = console
        self.interval_s = interval_s or (TERMINAL_INTERVAL_S if console.is_terminal else PIPED_INTERVAL_S)

    def line(self, label: str, live: LiveCounts, elapsed: float, sent_before: int, span: float) -> str:
        ttft = float(np.median(live.ttfts)) * 1000 if live.ttfts else None
        live.ttfts.clear()
        rate = (live.sent - sent_before) / span if span > 0 else 0.0
        return (
            f"{label}{format_fixed(elapsed, 0)} s · requests {format_count(live.sent)} "
            f"({format_fixed(rate, 1)}/s) · in flight {live.in_flight} · "
            f"errors {live.errors} · TTFT p50 {_ms(ttft)}"
        )

    async def watch(self, live: LiveCounts, label: str = "", /) -> None:
        """Runs until cancelled (the step's end)."""
        live.watched = True
        started = last = time.perf_counter()
        sent_before = 0
        display = Live(console=self.console, transient=True, auto_refresh=False) if self.console.is_terminal else None
        try:
            if display is not None:
                display.start()
            while True:
                await anyio.sleep(self.interval_s)
                now = time.perf_counter()
                text = self.line(label, live, now - started, sent_before, now - last)
                sent_before, last = live.sent, now
                if display is not None:
                    display.update(Text(text), refresh=True)
                else:
                    await anyio.to_thread.run_sync(self.console.print, Text(text))
        finally:
            if display is not None:
                display.stop()

    def step_finished(self, index: int, total: int, step: Mapping[str, Any], *, passed: bool) -> None:
        self.console.print(Text(step_line(index, total, step, passed=passed), style="" if passed else "red"))
