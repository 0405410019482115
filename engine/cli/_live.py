"""What a person watching a run on the console sees: the live progress line and the summary at the end.

The progress line is re-read on every refresh of the bar (not only when an episode ends), so retries, spend
and cache hits move while a slow episode is still going.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from rich.console import Console
from rich.progress import ProgressColumn, Task
from rich.table import Table
from rich.text import Text

from engine.runtime._runner import Runner, RunResult
from engine.runtime._sequential import live_text
from engine.scenario._budget import format_usd

__all__ = ("LiveDetail", "print_end_summary", "resume_hint", "status_line")


def _tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    return f"{count / 1000:.1f}k" if count >= 10_000 else f"{count:,}"


def status_line(runner: Runner) -> str:
    """Errors by kind, retries, spend per role and model, cache hits: one line."""
    stats = runner.stats
    kinds = dict(runner.errors_by_kind)
    errors = "errors " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) if kinds else "0")
    spend = runner.spend()
    roles = " · ".join(
        f"{role} {model} {_tokens(p + c)} tok" + (f" {format_usd(usd)}" if usd is not None and usd > 0 else "")
        for role, model, p, c, usd in spend.rows
    )
    parts = [errors, f"retries {stats.retries}", roles or "tokens 0", f"total {format_usd(spend.total)}"]
    if stats.cache_hits:
        parts.append(f"cache hits {stats.cache_hits:,}")
    parts.append(live_text(runner.admission.manifest()))
    return " · ".join(part for part in parts if part)


class LiveDetail(ProgressColumn):
    """A progress-bar column that renders `status_line` afresh on every refresh."""

    def __init__(self, runner: Runner) -> None:
        super().__init__()
        self._runner = runner
        self._last = ""

    def render(self, task: Task) -> Text:
        with contextlib.suppress(RuntimeError):  # rich refreshes from its own thread while counters change
            self._last = status_line(self._runner)
        return Text(self._last, style="dim")


def resume_hint(scenario: str, result: RunResult, options: Sequence[str] = ()) -> str:
    """The command that completes an interrupted run."""
    retry = " --retry-errors" if result.errors else ""
    same = f" {' '.join(options)}" if options else ""
    return f"simrun {scenario}{same} --resume {result.run_dir}{retry}"


def print_end_summary(console: Console, runner: Runner, result: RunResult) -> None:
    """Errors grouped by kind (count, first message, which names the endpoint), then spend per role and model."""
    errors = (result.summary.get("run") or {}).get("errors") or {}
    if errors:
        table = Table(title="errors by kind", title_justify="left")
        for column in ("kind", "episodes", "first message"):
            table.add_column(column, overflow="fold")
        for kind, entry in sorted(errors.items(), key=lambda kv: -int(kv[1]["count"])):
            table.add_row(Text(kind), str(entry["count"]), Text(str(entry["first"])))
        console.print(table)
    spend = runner.spend()
    table = Table(title="spend", title_justify="left")
    for column in ("role", "model", "prompt tokens", "completion tokens", "USD"):
        table.add_column(column, justify="left" if column in ("role", "model") else "right")
    for role, model, prompt, completion, usd in spend.rows:
        table.add_row(Text(role), Text(model), f"{prompt:,}", f"{completion:,}", format_usd(usd))
    unpriced = f" (no price for {', '.join(spend.unpriced)})" if spend.unpriced else ""
    table.caption = f"total {format_usd(spend.total)}{unpriced} · cache hits {runner.stats.cache_hits:,}"
    console.print(table)
