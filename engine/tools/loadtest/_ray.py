"""`simrun loadtest --executor ray`: the load step's workers as Ray actors, on whichever nodes Ray places them.

The split is that of local `--workers` (`run_in_process` with `worker`/`workers`: worker w owns conversations
i ≡ w mod W and that slice of the one seeded schedule). Each actor reports ready once its imports are done;
the driver then sets one start instant on the wall clock, a moment ahead, and every actor maps it onto its
own monotonic clock, so the rows of all nodes are relative to the same start and merge as local ones do.
Clocks of different machines agree only as well as their NTP sync does: that error adds to the send times.
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
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._workers import START_LEAD_S, _decode, _encode, run_in_process

__all__ = ("LoadWorker", "run_step_on_ray")


class LoadWorker:
    """A Ray actor (async) running one worker's slice of a load step."""

    def __init__(self, config: dict[str, Any], items: list[dict[str, Any]], worker: int) -> None:
        self._config = LoadConfig.model_validate(config)
        self._items = [Item.model_validate(item) for item in items]
        self._worker = worker
        self._stop: anyio.Event | None = None
        load_plugins()  # the sim student is a plug-in: imported before the shared start, not after

    def ready(self) -> int:
        return self._worker

    async def run(self, start_wall: float, rate: float | None, step: int) -> bytes:
        self._stop = anyio.Event()
        start = time.perf_counter() + (start_wall - time.time())
        rows, health = await run_in_process(
            self._config, self._items, rate=rate, step=step, worker=self._worker,
            workers=self._config.workers, start=start, stop=self._stop,
        )  # fmt: skip
        return _encode(rows, health)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()


async def run_step_on_ray(
    config: LoadConfig, items: Sequence[Item], *, rate: float | None, step: int, stop: anyio.Event | None = None
) -> tuple[list[RequestRecord], list[Health]]:
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
