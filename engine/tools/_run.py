"""The library's one call: run a scenario and write its report (the runner itself knows no report format)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.core._records import EpisodeRecord
from engine.models._breaker import BreakerPolicy, ErrorLimit
from engine.report._rebuild import write_report
from engine.runtime._build import BuiltScenario
from engine.runtime._plugins import Agent
from engine.runtime._runner import EpisodeCallback, Runner, RunResult, TurnCallback
from engine.scenario._budget import Budget
from engine.scenario._spec import Scenario

__all__ = ("RunHandle", "RunOptions", "open_run", "run", "run_sync")


class RunOptions(TypedDict, total=False):
    """The keyword options of `run`, `run_sync` and `open_run`, typed once so mypy checks every caller.

    They are `Runner`'s keywords (its docstring says what each does) except `report`, which the library fixes to the
    run directory's report; a test keeps the two lists equal."""

    out: Path | str | None
    resume: Path | str | None
    tutor: Agent | None
    on_episode: EpisodeCallback | None
    on_turn: TurnCallback | None
    grace_s: float
    cache: Path | str | bool | None
    budget: Budget | None
    retry_errors: bool
    probe: bool
    max_errors: ErrorLimit | None
    breaker: BreakerPolicy | None


async def _runner(scenario: Scenario | BuiltScenario, **options: Unpack[RunOptions]) -> Runner:
    # Building reads item files and a resumed run's records: keep that file I/O off the event loop.
    runner = Runner(scenario, report=write_report, **options)
    await runner.open()
    return runner


async def run(scenario: Scenario | BuiltScenario, **options: Unpack[RunOptions]) -> RunResult:
    """Run a scenario to completion inside the caller's event loop (see `Runner` for the options)."""
    return await (await _runner(scenario, **options)).run()


def run_sync(scenario: Scenario | BuiltScenario, **options: Unpack[RunOptions]) -> RunResult:
    """Run a scenario from synchronous code, in a fresh asyncio event loop."""
    return anyio.run(lambda: run(scenario, **options), backend="asyncio")


@dataclass
class RunHandle:
    """An in-progress run: iterate `records` as episodes finish; `result` is set once the run ends."""

    runner: Runner
    records: MemoryObjectReceiveStream[EpisodeRecord]
    result: RunResult | None = None


@asynccontextmanager
async def open_run(scenario: Scenario | BuiltScenario, **options: Unpack[RunOptions]) -> AsyncIterator[RunHandle]:
    """Start a run in the background of a block and stream its records::

        async with open_run(scenario) as handle:
            async for record in handle.records:
                ...
    Leaving the block early cancels the episodes still in flight (a later `resume` completes them).
    """
    send, receive = anyio.create_memory_object_stream[EpisodeRecord](max_buffer_size=math.inf)
    user_callback: EpisodeCallback | None = options.pop("on_episode", None)

    async def forward(record: EpisodeRecord) -> None:
        await send.send(record)
        if user_callback is not None:
            await user_callback(record)

    options["on_episode"] = forward
    runner = await _runner(scenario, **options)
    handle = RunHandle(runner, receive)

    async def drive() -> None:
        async with send:
            handle.result = await runner.run()

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        async with receive:
            yield handle
        if handle.result is None:
            group.cancel_scope.cancel()
