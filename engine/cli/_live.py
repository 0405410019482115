"""What a person watching a run on the console sees: the live progress line and the summary at the end.

The progress line is re-read on every refresh of the bar (not only when an episode ends), so retries, spend
and cache hits move while a slow episode is still going. A console that is not a terminal (`| tee log`, a CI log)
gets no bar, which would only print at the end, but a plain line every 10 s, as the load tester prints.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from functools import partial

import anyio
from rich.console import Console
from rich.progress import ProgressColumn, Task
from rich.text import Text

from engine.core._format import fit_to_width, format_count, format_pct, format_setting, format_usd
from engine.core._records import EpisodeRecord
from engine.runtime._runner import Runner, RunResult
from engine.runtime._sequential import live_text

__all__ = ("LiveDetail", "print_end_summary", "progress_line", "resume_hint", "run_with_progress_lines", "status_line")


def _tokens(count: int) -> str:
    return format_count(count, compact=True)


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
        parts.append(f"cache hits {format_count(stats.cache_hits)}")
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


def progress_line(runner: Runner, done: int, elapsed_s: float) -> str:
    """Episodes done of the plan, time so far, then `status_line`: one line of a piped run's log."""
    total = len(runner.episodes)
    share = f" ({format_pct(done / total)})" if total else ""
    counted = f"{format_count(done)}/{format_count(total)} episodes{share}"
    return f"{runner.scenario.name}: {counted} · {format_count(elapsed_s)} s · {status_line(runner)}"


async def run_with_progress_lines(
    runner: Runner, console: Console, *, interval_s: float | None = None, handle_signals: bool = True
) -> RunResult:
    """Run with a `progress_line` on `console` every `interval_s` (the load tester's piped interval, 10 s), so a
    piped or logged run is never silent."""
    from engine.tools.loadtest._progress import PIPED_INTERVAL_S  # numpy: imported once a run starts, not for --help

    every = interval_s or PIPED_INTERVAL_S
    done = runner.already_done

    async def count(_: EpisodeRecord) -> None:
        nonlocal done
        done += 1

    runner.on_episode = count
    started = time.perf_counter()

    async def every_interval() -> None:
        while True:
            await anyio.sleep(every)
            line = Text(progress_line(runner, done, time.perf_counter() - started))
            await anyio.to_thread.run_sync(partial(console.print, line, soft_wrap=True))

    episodes = format_count(len(runner.episodes))
    planned = f"{runner.scenario.name}: {episodes} episodes; a progress line every {format_setting(every)} s"
    console.print(Text(planned), soft_wrap=True)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(every_interval)
            result = await runner.run(handle_signals=handle_signals)
            group.cancel_scope.cancel()
    except BaseExceptionGroup as failed:  # the run's own error (a failed probe: exit 2), as a run without lines
        if len(failed.exceptions) == 1:
            raise failed.exceptions[0] from None
        raise
    console.print(Text(progress_line(runner, done, time.perf_counter() - started)), soft_wrap=True)  # the final count
    return result


def resume_hint(scenario: str, result: RunResult, options: Sequence[str] = ()) -> str:
    """The command that completes an interrupted run."""
    retry = " --retry-errors" if result.errors else ""
    same = f" {' '.join(options)}" if options else ""
    return f"simrun {scenario}{same} --resume {result.run_dir}{retry}"


def print_end_summary(console: Console, runner: Runner, result: RunResult) -> None:
    """Errors grouped by kind (count, first message, which names the endpoint), then spend per role and model."""
    errors = (result.summary.get("run") or {}).get("errors") or {}
    from engine.report._blocks import Block, Note, Table  # loaded with the report, after the episodes
    from engine.report._console import console_blocks

    blocks: list[Block] = []
    if errors:
        ordered = sorted(errors.items(), key=lambda kv: -int(kv[1]["count"]))
        failed = tuple((kind, int(entry["count"]), str(entry["first"])) for kind, entry in ordered)
        blocks.append(
            Table(("kind", "episodes", "first message"), failed, title="errors by kind", left=("first message",))
        )
    spend = runner.spend()
    rows = tuple(
        (role, model, format_count(prompt), format_count(completion), format_usd(usd))
        for role, model, prompt, completion, usd in spend.rows
    )
    blocks.append(
        Table(("role", "model", "prompt tokens", "completion tokens", "USD"), rows, title="spend", left=("model",))
    )
    unpriced = f" (no price for {', '.join(spend.unpriced)})" if spend.unpriced else ""
    total = f"total {format_usd(spend.total)}{unpriced} · cache hits {format_count(runner.stats.cache_hits)}"
    blocks.append(Note(total, console=True))
    console.print(fit_to_width(console_blocks(blocks), console.width))
