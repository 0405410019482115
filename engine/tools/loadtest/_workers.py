"""Running a load step in this process or split over worker processes, and merging what they measured.

Past one process's ceiling (measured by `bench/loadtest_ceiling.py`) the event loop itself delays sends, so
the conversations are split: worker w of W owns conversations i with i mod W = w and the matching slice of
the arrival schedule, which every worker derives from the same seed. All workers share one start instant on
the wall clock, mapped once onto each process's monotonic clock; their rows are relative to it and merge as
they are. A worker is `python -m engine.tools.loadtest._workers N`:
the job in on stdin, `ready` out, the start in, rows out.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, astuple
from functools import partial
from typing import Any

import anyio
import anyio.abc
import orjson

from engine.core._errors import ScenarioError
from engine.core._registry import load_plugins
from engine.scenario._items import Item
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Generator, Health
from engine.tools.loadtest._progress import LiveCounts, ProgressSink
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._transport import open_transport

__all__ = ("run_step",)

START_LEAD_S = 0.2
"""Once every worker is ready, the run starts this long later (time to pass the start on)."""


async def run_in_process(
    config: LoadConfig, items: Sequence[Item], *, rate: float | None, step: int, worker: int = 0,
    workers: int = 1, start: float | None = None, stop: anyio.Event | None = None,
    progress: ProgressSink | None = None,
) -> tuple[list[RequestRecord], Health]:  # fmt: skip
    load_plugins()
    connections = max(64, (config.max_in_flight or config.concurrency or 1000) // workers + 1)
    transport = open_transport(config, connections)
    # Objects that exist before the run are moved out of the collector's reach, so a full collection in
    # the middle of a run (tens of ms with a large heap, e.g. an earlier sweep step's rows) cannot stall sends.
    gc.collect()
    gc.freeze()
    try:
        generator = Generator(
            config, transport, items, start=start if start is not None else time.perf_counter(),
            rate=rate, worker=worker, workers=workers, step=step, stop=stop,
        )  # fmt: skip
        async with anyio.create_task_group() as group:
            if progress is not None:
                group.start_soon(progress.watch, generator.live)
            health = await generator.run()
            group.cancel_scope.cancel()
    finally:
        gc.unfreeze()
        with anyio.CancelScope(shield=True):
            await transport.aclose()
    return generator.records, health


async def run_step(
    config: LoadConfig, items: Sequence[Item], *, rate: float | None, step: int, stop: anyio.Event | None = None,
    progress: ProgressSink | None = None,
) -> tuple[list[RequestRecord], list[Health]]:  # fmt: skip
    """One run (or one sweep step) on `config.workers` processes; rows sorted by send time.

    Each worker reports ready once imported; only then is the shared start set, a moment ahead, so a slow
    start-up (imports on a busy machine) cannot make the first arrivals late. Setting `stop` ends the step
    early everywhere (workers get SIGTERM) and still returns every row measured.
    """
    if config.executor == "ray":
        from engine.tools.loadtest._ray import run_step_on_ray  # Ray is imported only when it is used

        return await run_step_on_ray(config, items, rate=rate, step=step, stop=stop, progress=progress)
    if config.workers == 1:
        rows, health = await run_in_process(config, items, rate=rate, step=step, stop=stop, progress=progress)
        return rows, [health]
    job = orjson.dumps(
        {"config": config.model_dump(mode="json"), "items": [item.model_dump(mode="json") for item in items],
         "rate": rate, "step": step}
    )  # fmt: skip
    workers = _Workers(config, job, stop)
    async with anyio.create_task_group() as watching:
        if progress is not None:
            watching.start_soon(progress.watch, workers.live)
        async with anyio.create_task_group() as group:
            for worker in range(config.workers):
                group.start_soon(workers.spawn, worker)
        watching.cancel_scope.cancel()
    if workers.failures:
        raise ScenarioError("load worker processes failed:\n" + "\n".join(workers.failures))
    rows = sorted((row for found, _ in workers.results for row in found), key=lambda row: row.dispatched)
    return rows, sorted((health for _, health in workers.results), key=lambda health: health.worker)


class _Workers:
    """The coordinator's side of a multi-process step: the processes, their shared start, rows and progress."""

    def __init__(self, config: LoadConfig, job: bytes, stop: anyio.Event | None) -> None:
        self.config, self.job, self.stop = config, job, stop
        self.ready = 0
        self.all_ready = anyio.Event()
        self.start_wall: list[float] = []
        self.results: list[tuple[list[RequestRecord], Health]] = []
        self.failures: list[str] = []
        self.counts = WorkerCounts(config.workers)
        self.live = self.counts.live

    async def spawn(self, worker: int) -> None:
        stop = self.stop
        command = [sys.executable, "-m", "engine.tools.loadtest._workers", str(worker)]
        async with await anyio.open_process(command) as process:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            with suppress(anyio.BrokenResourceError):  # a worker that died at once is reported below
                await process.stdin.send(self.job + b"\n")
            received = await _read_until_newline(process.stdout)
            self.ready += 1  # a worker that died counts too, so the others are not left waiting for it
            if self.ready == self.config.workers:
                self.start_wall.append(time.time() + START_LEAD_S)
                self.all_ready.set()
            await self.all_ready.wait()
            if received is not None:
                with suppress(anyio.BrokenResourceError):
                    await process.stdin.send(orjson.dumps(self.start_wall[0]) + b"\n")
            await process.stdin.aclose()
            output, errors = bytearray(), bytearray()
            async with anyio.create_task_group() as watch:
                if stop is not None:
                    watch.start_soon(_terminate_on, stop, process)
                async with anyio.create_task_group() as drain:  # both pipes at once, so neither fills and blocks
                    drain.start_soon(_drain, process.stdout, output)
                    drain.start_soon(_drain_stderr, process.stderr, errors, partial(self.merge, worker))
                watch.cancel_scope.cancel()
            if await process.wait() != 0 or received is None:
                if not (stop is not None and stop.is_set()):  # else it was stopped before measuring anything
                    self.failures.append(f"worker {worker}: {errors.decode(errors='replace')[-800:].strip()}")
                return
        self.results.append(_decode(orjson.loads(output)))

    def merge(self, worker: int, line: bytes) -> None:
        self.counts.merge(worker, orjson.loads(line))


async def _terminate_on(stop: anyio.Event, process: anyio.abc.Process) -> None:
    await stop.wait()
    process.terminate()  # the worker stops as on its hard stop and still writes its rows


async def _drain(stream: anyio.abc.ByteReceiveStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk


_PROGRESS = b"\x1esimrun-progress "
"""Marks a worker's progress line on its stderr; every other byte there is kept for the error report."""


async def _drain_stderr(
    stream: anyio.abc.ByteReceiveStream, into: bytearray, on_progress: Callable[[bytes], None]
) -> None:
    pending = b""
    async for chunk in stream:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(_PROGRESS):
                on_progress(line[len(_PROGRESS) :])
            else:
                into += line + b"\n"
    into += pending


class _StderrProgress:
    """A worker's side of the live line: its counters on stderr once a second, for the coordinator to sum."""

    async def watch(self, live: LiveCounts, label: str = "", /) -> None:
        live.watched = True
        while True:
            await anyio.sleep(1.0)
            sys.stderr.buffer.write(_PROGRESS + orjson.dumps(snapshot(live)) + b"\n")
            sys.stderr.buffer.flush()


def snapshot(live: LiveCounts) -> dict[str, Any]:
    """A worker's counters for the coordinator, with the TTFTs since the last snapshot (which it empties)."""
    counts = {"sent": live.sent, "ok": live.ok, "errors": live.errors, "in_flight": live.in_flight}
    ttfts, live.ttfts = live.ttfts, []
    return {**counts, "ttfts": ttfts}


class WorkerCounts:
    """The coordinator's live counters: each worker's latest snapshot replaces its last one, the TTFTs add up."""

    def __init__(self, workers: int) -> None:
        self.live = LiveCounts()
        self._per_worker = {worker: LiveCounts() for worker in range(workers)}

    def merge(self, worker: int, counts: dict[str, Any]) -> None:
        self._per_worker[worker] = LiveCounts(**{k: v for k, v in counts.items() if k != "ttfts"})
        if not self.live.watched:
            return
        self.live.ttfts.extend(counts["ttfts"])
        for name in ("sent", "ok", "errors", "in_flight"):
            setattr(self.live, name, sum(getattr(each, name) for each in self._per_worker.values()))


async def _read_until_newline(stream: anyio.abc.ByteReceiveStream) -> bytes | None:
    """The worker's ready line; None if it exited first."""
    line = b""
    while not line.endswith(b"\n"):
        try:
            line += await stream.receive(1)
        except anyio.EndOfStream:
            return None
    return line


def _encode(rows: Sequence[RequestRecord], health: Health) -> bytes:
    return orjson.dumps({"rows": [astuple(row) for row in rows], "health": asdict(health)})


def _decode(data: dict[str, Any]) -> tuple[list[RequestRecord], Health]:
    return [RequestRecord(*row) for row in data["rows"]], Health(**data["health"])


async def _set_on_sigterm(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            stop.set()
            return


def _worker_main(worker: int) -> None:
    job = orjson.loads(sys.stdin.buffer.readline())
    config = LoadConfig.model_validate(job["config"])
    items = [Item.model_validate(item) for item in job["items"]]
    load_plugins()  # the sim student's behaviour is a plug-in: import it before the shared start, not after
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.buffer.flush()
    start_wall = orjson.loads(sys.stdin.buffer.readline())
    start = time.perf_counter() + (start_wall - time.time())

    async def main() -> tuple[list[RequestRecord], Health]:
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_set_on_sigterm, stop)
            found = await run_in_process(
                config, items, rate=job["rate"], step=job["step"], worker=worker, workers=config.workers,
                start=start, stop=stop, progress=_StderrProgress(),
            )  # fmt: skip
            group.cancel_scope.cancel()
        return found

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the coordinator, which stops us with SIGTERM
    rows, health = anyio.run(main)
    sys.stdout.buffer.write(_encode(rows, health))


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
