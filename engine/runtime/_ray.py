"""`--executor ray`: the plan's episodes are played by Ray actors; this process stays the run's only writer.

The driver (`run_on_ray`, called by `Runner` in place of its local admission loop) holds the run directory, its
lock and its plan, exactly as a local run does. It hands small shards of episode ids to worker actors, and each
worker plays them with the runner's own episode code (`Runner.episode_player`) and returns the records as JSON.
The driver accepts a record once per planned id and appends it through `Runner.accept`, so resume, the lock and
exactly-once are those of a local run. A worker that dies loses only the shards in flight: the driver puts their
unrecorded episodes back at the front of the queue and starts a replacement actor. A breaker on the endpoint of one
tutor of several stops only that tutor, on every worker, as in a local run (`engine.runtime._tutors`).

Ray is imported only here, and only when `--executor ray` is used (`require_ray`).
"""

from __future__ import annotations

import importlib
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import structlog

from engine.core._errors import ScenarioError
from engine.core._records import EpisodeRecord
from engine.models._client import CallStats
from engine.models._endpoints import EndpointKey, endpoint_key, endpoint_limits, shared_throttle
from engine.models._ray_budget import EndpointBudget, LeasedThrottle, endpoint_label
from engine.models._throttle import Throttle
from engine.runtime._build import BuiltScenario
from engine.runtime._ray_leftovers import note_driver, stop_leftovers
from engine.runtime._runner import Runner
from engine.scenario._plan import Episode
from engine.scenario._spec import ModelSpec

__all__ = ("EpisodeWorker", "connect", "require_ray", "run_on_ray", "worker_name")

INSTALL_HINT = "--executor ray needs Ray, an optional extra: pip install 'simrun[ray]'"
MAX_BATCH = 8
"""Episodes per shard at most: small shards stream records back and bound what a worker's death costs."""


def require_ray() -> ModuleType:
    """The `ray` module, or a user error (exit 2) saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ScenarioError(INSTALL_HINT) from None


def connect(address: str | None) -> bool:
    """Join the cluster at `address` (`auto`, `ray://HEAD:10001`) or start a local one; True if started here.

    Blocking (a local cluster takes seconds to start): call it before the event loop or in a worker thread.
    An already initialised Ray (a test session's, a notebook's) is used as it is.
    """
    ray = require_ray()
    if ray.is_initialized():
        return False
    if address is None:
        for line in stop_leftovers():
            structlog.get_logger("simrun").warning("ray.leftovers_stopped", detail=line)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning")
    except (ConnectionError, ValueError, RuntimeError) as exc:
        _shut_down(ray)
        raise ScenarioError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None
    except Exception as exc:  # Ray raises bare exceptions too (a node that times out while starting)
        _shut_down(ray)
        where = f"the Ray cluster at {address!r}" if address else "a local Ray cluster"
        raise ScenarioError(f"cannot start {where}: {type(exc).__name__}: {exc}") from None
    if address is None:
        note_driver()  # a SIGKILL now leaves Ray's agents running: the next start stops them
    return True


def _shut_down(ray: ModuleType) -> None:
    """Stop what a failed `ray.init` may have started, so no Ray process outlives the message."""
    try:
        ray.shutdown()
    except Exception as exc:  # the message about the first failure matters more
        structlog.get_logger("simrun").warning("ray.shutdown_failed", error=str(exc))


class _EventBuffer:
    """A worker's run events, kept until its shard returns; the driver writes them into the run's events.jsonl."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def _add(self, level: str, event: str, fields: dict[str, Any]) -> None:
        self.events.append((level, event, {**structlog.contextvars.get_contextvars(), **fields}))

    def info(self, event: str, **fields: Any) -> None:
        self._add("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._add("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._add("error", event, fields)

    def drain(self) -> list[tuple[str, str, dict[str, Any]]]:
        events, self.events = self.events, []
        return events


class _WorkerRunner(Runner):
    """The runner inside a worker actor: no run directory, throttles that spend the cluster's budgets."""

    def __init__(self, built: BuiltScenario, budgets: dict[str, Any], workers: int, cache: Path | None) -> None:
        super().__init__(built, probe=False, cache=cache if cache is not None else False)
        self._budgets, self._workers = budgets, workers
        self.buffer = _EventBuffer()
        self._events = self.buffer
        self.tutors_halted: dict[str, str] = {}
        """Tutors this worker's breakers stopped since its last reply (label → why), for the driver to decide."""

    def _breaker_opened(self, reason: str) -> None:
        """A tutor's own endpoint: halt that tutor here and report it; whether the run goes on is the driver's call."""
        if dead := self.tutors.dead_for(reason):
            self.tutors.halt(dead, reason)
            self.tutors_halted.update(dict.fromkeys(dead, reason))
            return
        super()._breaker_opened(reason)

    def _new_throttle(self, endpoint: EndpointKey, sharing: Sequence[ModelSpec]) -> Throttle:
        budget = self._budgets.get(endpoint_label(endpoint))
        if budget is None:  # no rate limits: only the in-flight bound, split across the workers
            return shared_throttle(sharing, share=self._workers)
        limits = endpoint_limits(sharing, share=self._workers)
        return LeasedThrottle(
            budget, endpoint[3], rpm=limits["rpm"], tpm=limits["tpm"], max_in_flight=limits["max_in_flight"]
        )


def _delta(now: Any, before: Any) -> Any:
    """`now - before` over CallStats' nested counters (numbers, lists of numbers, dicts of those)."""
    if isinstance(now, dict):
        return {k: _delta(v, before.get(k) if isinstance(before, dict) else None) for k, v in now.items()}
    if isinstance(now, list):
        return [a - b for a, b in zip(now, before or [0] * len(now), strict=True)]
    return now - (before or 0)


class EpisodeWorker:
    """A Ray actor (async: its shards run concurrently on one event loop) that plays episodes of one scenario."""

    def __init__(self, built: BuiltScenario, budgets: dict[str, Any], workers: int, cache: Path | None) -> None:
        self._runner = _WorkerRunner(built, budgets, workers, cache)
        self._by_id = {episode.id: episode for episode in built.episodes}
        self._stack = AsyncExitStack()
        self._play: Callable[[Episode], Awaitable[EpisodeRecord]] | None = None
        self._opening: anyio.Lock | None = None
        self._reported: dict[str, Any] = asdict(CallStats())

    async def _player(self) -> Callable[[Episode], Awaitable[EpisodeRecord]]:
        self._opening = self._opening or anyio.Lock()
        async with self._opening:
            if self._play is None:
                self._play = await self._runner.episode_player(self._stack)
        return self._play

    async def play(self, ids: list[str]) -> dict[str, Any]:
        """Play the shard's episodes concurrently; their records as JSON, with the counters and events since the
        last shard returned, and why the worker would stop (an open breaker), if it would."""
        play = await self._player()
        records: list[bytes] = []

        async def one(episode: Episode) -> None:
            with self._runner.tutors.playing(episode):  # a halted tutor's episode ends here unrecorded
                records.append((await play(episode)).model_dump_json().encode())

        async with anyio.create_task_group() as group:
            for episode_id in ids:
                group.start_soon(one, self._by_id[episode_id])
        now = asdict(self._runner.stats)
        stats, self._reported = _delta(now, self._reported), now
        halted, self._runner.tutors_halted = self._runner.tutors_halted, {}
        return {
            "records": records,
            "stats": stats,
            "events": self._runner.buffer.drain(),
            "reason": self._runner.reason,
            "tutors_halted": halted,
        }

    async def halt_tutors(self, labels: list[str], reason: str) -> None:
        """The driver stopped these tutors (another worker's breaker): cancel their episodes here too."""
        self._runner.tutors.halt(labels, reason)


@dataclass
class _Worker:
    """One worker place: its current actor, replaced (a new generation) when the actor dies."""

    index: int
    actor: Any
    generation: int = 0


@dataclass
class _Dispatch:
    """The driver's queue of unrecorded episodes and the shards in flight on the workers."""

    runner: Runner
    ray: ModuleType
    start_actor: Callable[[int], Any]
    workers: list[_Worker]
    batch: int
    calls_per_worker: int
    queue: deque[Episode] = field(default_factory=deque)
    accepted: set[str] = field(default_factory=set)
    in_flight: int = 0
    respawns_left: int = 0
    lost: int = 0
    """Shards whose worker died before they returned (their episodes were queued again)."""

    def __post_init__(self) -> None:
        self.queue.extend(self.runner.pending)
        self._planned = {episode.id for episode in self.runner.pending}
        self.respawns_left = 2 * len(self.workers) + 2

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            for worker in self.workers:
                for _ in range(self.calls_per_worker):
                    group.start_soon(self._feed, worker)

    def _next_shard(self) -> list[Episode] | None:
        """The next shard, or None once nothing may start (stopped, a budget spent) or nothing is left."""
        runner = self.runner
        if runner._interrupted or not self.queue:
            return None
        reason = runner.admission_refused()
        if reason is not None:
            runner.refuse_admission(reason)
            return None
        shard: list[Episode] = []  # a shard never crosses into a wave a sequential run has not opened yet
        while self.queue and len(shard) < self.batch and runner.admission.is_open(self.queue[0]):
            episode = self.queue.popleft()
            if runner.tutors.admits(episode):  # a stopped tutor's episodes are left for a resume
                shard.append(episode)
        return shard or None

    async def _feed(self, worker: _Worker) -> None:
        while worker.actor is not None:  # None: it died and no replacement was left
            shard = self._next_shard()
            if shard is None:
                if self.in_flight == 0 or self.runner._interrupted:
                    return
                await anyio.sleep(0.02)  # a shard in flight may still come back unfinished
                continue
            self.in_flight += 1
            try:
                await self._send(worker, shard)
            finally:
                self.in_flight -= 1

    async def _send(self, worker: _Worker, shard: list[Episode]) -> None:
        generation = worker.generation
        try:
            reply = await worker.actor.play.remote([episode.id for episode in shard])
        except self.ray.exceptions.RayActorError as exc:
            self._requeue(shard)
            self.runner._events.warning(
                "ray.worker_lost", gate="ray.worker_lost", worker=worker.index, requeued=len(shard), error=str(exc)
            )
            if worker.generation == generation:  # the first shard to see this death replaces the actor
                self._replace(worker)
            return
        await self._take(worker, reply)

    def _requeue(self, shard: list[Episode]) -> None:
        self.lost += 1
        self.queue.extendleft(reversed([e for e in shard if e.id not in self.accepted]))

    def _replace(self, worker: _Worker) -> None:
        worker.generation += 1
        if self.respawns_left <= 0:
            worker.actor = None
            if all(w.actor is None for w in self.workers):
                self.runner._stop("every Ray worker died; resume the run to play the rest")
            return
        self.respawns_left -= 1
        worker.actor = self.start_actor(worker.index)

    async def _take(self, worker: _Worker, reply: dict[str, Any]) -> None:
        runner = self.runner
        runner.stats.add(reply["stats"])
        for level, event, fields in reply["events"]:
            getattr(runner._events, level)(event, **{**fields, "worker": worker.index})
        for raw in reply["records"]:
            record = EpisodeRecord.model_validate_json(raw)
            if record.id in self.accepted or record.id not in self._planned:
                continue  # a shard re-run after a worker death: the first record of an id is the one kept
            self.accepted.add(record.id)
            await runner.accept(record)
        for reason in sorted(set(reply["tutors_halted"].values())):
            self._tutors_halted([label for label, why in reply["tutors_halted"].items() if why == reason], reason)
        if reply["reason"] is not None:
            runner._stop(reply["reason"], cancel_in_flight=True)

    def _tutors_halted(self, labels: list[str], reason: str) -> None:
        """A worker's breaker stopped these tutors: stop them on every worker if another tutor is alive, as a
        local run does; otherwise stop the whole run."""
        runner = self.runner
        why = runner.tutors.stop(labels, reason, runner._events)
        if why is None:
            runner._stop(f"circuit breaker opened: {reason}", cancel_in_flight=True)
            return
        runner.tutor_stopped(why)
        for worker in self.workers:
            if worker.actor is not None:  # no reply is awaited: a dead worker's episodes are queued again anyway
                worker.actor.halt_tutors.remote(labels, reason)


def worker_name(run_dir: Path, index: int, generation: int = 0) -> str:
    """The Ray actor name of a run's worker `index` (its `generation`-th replacement): the dashboard shows it."""
    return f"simrun:{run_dir}:w{index}.{generation}"


def _budget_actors(ray: ModuleType, runner: Runner) -> dict[str, Any]:
    """One budget actor per endpoint that has an RPM or TPM limit, shared by every worker."""
    sharing: dict[EndpointKey, list[ModelSpec]] = {}
    for _, spec in runner.built.models:
        sharing.setdefault(endpoint_key(spec), []).append(spec)
    budgets: dict[str, Any] = {}
    actor = ray.remote(num_cpus=0)(EndpointBudget)
    for endpoint, specs in sharing.items():
        limits = endpoint_limits(specs)
        if limits["rpm"] is not None or limits["tpm"] is not None:
            budgets[endpoint_label(endpoint)] = actor.remote(rpm=limits["rpm"], tpm=limits["tpm"])
    return budgets


async def run_on_ray(runner: Runner) -> None:
    """Play `runner.pending` on Ray workers; every record goes through `runner.accept` in this process."""
    ray = require_ray()
    settings = runner.scenario.executor
    started_here = await anyio.to_thread.run_sync(connect, settings.address)
    workers = settings.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    built_ref = ray.put(runner.built)
    budgets = _budget_actors(ray, runner)
    actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(EpisodeWorker)

    generations: dict[int, int] = {}

    def start_actor(index: int) -> Any:
        generations[index] = generations.get(index, -1) + 1
        name = worker_name(runner.run_dir.path, index, generations[index])
        return actor_class.options(name=name).remote(built_ref, budgets, workers, runner.cache_path)

    per_worker = math.ceil(runner.scenario.concurrency / workers)
    batch = max(1, min(MAX_BATCH, per_worker, math.ceil(len(runner.pending) / (workers * 4))))
    dispatch = _Dispatch(
        runner,
        ray,
        start_actor,
        [_Worker(i, start_actor(i)) for i in range(workers)],
        batch=batch,
        calls_per_worker=max(1, per_worker // batch),
    )
    runner._events.info("ray.started", workers=workers, batch=batch, calls_per_worker=dispatch.calls_per_worker)
    assert runner._episodes_scope is not None
    try:
        with runner._episodes_scope:
            await dispatch.run()
    finally:
        for actor in [w.actor for w in dispatch.workers if w.actor is not None] + list(budgets.values()):
            ray.kill(actor)
        if started_here:
            ray.shutdown()
    runner._events.info("ray.finished", lost_shards=dispatch.lost, accepted=len(dispatch.accepted))
