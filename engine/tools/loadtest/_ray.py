"""`simrun loadtest --executor ray`: the load step's workers as Ray actors, on whichever nodes Ray places them.

The split is that of local `--workers` (`run_in_process` with `worker`/`workers`: worker w owns conversations
i ≡ w mod W and that slice of the one seeded schedule). Each actor reports ready once its imports are done;
the driver then sets one start instant on the wall clock, a moment ahead, and every actor maps it onto its
own monotonic clock, so the rows of all nodes are relative to the same start and merge as local ones do.
Clocks of different machines agree only as well as their NTP sync does: that error adds to the send times.
The live line polls every actor's counters once a second and sums them, as it does local workers' stderr lines.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
import orjson

from engine.core._registry import load_plugins
from engine.scenario._items import Item
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._generator import Health
from engine.tools.loadtest._progress import LiveCounts, ProgressSink
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._workers import START_LEAD_S, WorkerCounts, _decode, _encode, run_in_process, snapshot

__all__ = ("LoadWorker", "run_step_on_ray")


class LoadWorker:
    """A Ray actor (async) running one worker's slice of a load step."""

    def __init__(self, config: dict[str, Any], items: list[dict[str, Any]], worker: int) -> None:
        self._config = LoadConfig.model_validate(config)
        self._items = [Item.model_validate(item) for item in items]
        self._worker = worker
        self._stop: anyio.Event | None = None
        self._live: LiveCounts | None = None
        load_plugins()  # the sim student is a plug-in: imported before the shared start, not after

    def ready(self) -> int:
        return self._worker

    def counts(self) -> dict[str, Any] | None:
        """The live counters for the driver's progress line (None before the step has started)."""
        return None if self._live is None else snapshot(self._live)

    async def watch(self, live: LiveCounts, label: str = "", /) -> None:
        """This actor as the step's progress sink: it keeps the counters for `counts` to read."""
        live.watched, self._live = True, live
        await anyio.sleep_forever()

    async def run(self, start_wall: float, rate: float | None, step: int) -> bytes:
        self._stop = anyio.Event()
        start = time.perf_counter() + (start_wall - time.time())
        rows, health = await run_in_process(
            self._config, self._items, rate=rate, step=step, worker=self._worker,
            workers=self._config.workers, start=start, stop=self._stop, progress=self,
        )  # fmt: skip
        return _encode(rows, health)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()


async def run_step_on_ray(
    config: LoadConfig, items: Sequence[Item], *, rate: float | None, step: int, stop: anyio.Event | None = None,
    progress: ProgressSink | None = None,
) -> tuple[list[RequestRecord], list[Health]]:  # fmt: skip
    """One run (or sweep step) on `config.workers` Ray actors; rows sorted by send time, as `run_step`'s."""
    from engine.runtime._ray import connect, require_ray

    ray = require_ray()
    await anyio.to_thread.run_sync(connect, config.ray_address)
    actor = ray.remote(num_cpus=1)(LoadWorker)
    payload = (config.model_dump(mode="json"), [item.model_dump(mode="json") for item in items])
    workers = [actor.remote(*payload, worker) for worker in range(config.workers)]
    results: list[tuple[list[RequestRecord], Health]] = []
    try:
        for ready in [w.ready.remote() for w in workers]:
            await ready
        start_wall = time.time() + START_LEAD_S

        async def collect(worker: Any) -> None:
            results.append(_decode(orjson.loads(await worker.run.remote(start_wall, rate, step))))

        async with anyio.create_task_group() as group:
            if stop is not None:
                group.start_soon(_stop_all_on, stop, workers)
            if progress is not None:
                counts = WorkerCounts(len(workers))
                group.start_soon(progress.watch, counts.live)
                group.start_soon(_poll_counts, workers, counts)
            async with anyio.create_task_group() as running:
                for worker in workers:
                    running.start_soon(collect, worker)
            group.cancel_scope.cancel()
    finally:
        for worker in workers:
            ray.kill(worker)
    rows = sorted((row for found, _ in results for row in found), key=lambda row: row.dispatched)
    return rows, sorted((health for _, health in results), key=lambda health: health.worker)


async def _stop_all_on(stop: anyio.Event, workers: list[Any]) -> None:
    await stop.wait()
    for worker in workers:
        worker.stop.remote()  # each stops as on its hard stop and still returns its rows


async def _poll_counts(workers: list[Any], counts: WorkerCounts) -> None:
    while True:
        await anyio.sleep(1.0)
        for worker, actor in enumerate(workers):
            found = await actor.counts.remote()
            if found is not None:
                counts.merge(worker, found)
