"""The async runtime: admit episodes under bounded concurrency, play each one, append its record as it ends."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import structlog

from engine.core._errors import ProviderError, ScenarioError
from engine.core._events import HOST_LOG, Redactor, RunEvents
from engine.core._records import EpisodeRecord, ErrorInfo, Turn, Usage
from engine.models._breaker import BreakerPolicy, ErrorLimit
from engine.models._cache import resolve_cache_path
from engine.models._client import CallStats, ModelClient
from engine.models._endpoints import BreakerSetup, EndpointKey, open_endpoints, shared_throttle
from engine.models._probe import ProbeFailed, probe_endpoints
from engine.models._provider import key_variables
from engine.models._seats import ranked_calls
from engine.models._throttle import Throttle
from engine.runtime._build import BuiltScenario, build, preflight
from engine.runtime._manifest import describe_run, versions
from engine.runtime._plugins import Agent, EpisodeContext, InputMemo, Judge
from engine.runtime._rundir import RunDir, utc_now
from engine.runtime._sequential import FixedAdmission, WaveAdmission, admission_for
from engine.runtime._tutors import TutorSet
from engine.scenario._budget import Budget, Spend, spend
from engine.scenario._plan import Episode
from engine.scenario._spec import ModelSpec, Scenario

__all__ = ("EpisodeCallback", "RunResult", "Runner", "TurnCallback")

log = HOST_LOG

EpisodeCallback = Callable[[EpisodeRecord], Awaitable[None]]
TurnCallback = Callable[[Episode, Turn], Awaitable[None]]
Status = Literal["finished", "interrupted"]


@dataclass
class RunResult:
    run_dir: Path
    status: Status
    planned: int
    ok: int
    errors: int
    summary: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    """Why an interrupted run stopped (Ctrl-C, a budget, an open circuit breaker, `--max-errors`)."""

    @property
    def exit_code(self) -> int:
        """The CLI's contract: 0 all ok, 3 some episodes recorded as errors, 130 interrupted."""
        if self.status == "interrupted":
            return 130
        return 3 if self.errors else 0


class Runner:
    """Runs one scenario into one run directory. Build it, then `await runner.run()` once.

    Args:
        scenario: a checked scenario (see `load_scenario` / `build_scenario`).
        out: parent folder for a new run directory (default `runs/`).
        resume: an existing run directory; only episodes missing from it are run.
        retry_errors: with `resume`, run again the episodes whose current record is an error; the new record
            supersedes the old one (records are never rewritten).
        tutor: an `Agent` to use as the tutor instead of the scenario's (for embedding and tests).
        on_episode: awaited with each record right after it is written.
        on_turn: awaited with each turn as it is produced.
        grace_s: after Ctrl-C, how long in-flight episodes may take to finish before they are cancelled.
        cache: the response cache: None follows the scenario's `cache` key, False is off, True the default file,
            a path that file (see `resolve_cache_path`).
        probe: call each distinct endpoint once before the first episode (see `engine.models._probe`).
        max_errors: end the run (interrupted) once this many episodes have error records; never more are written.
        breaker: the circuit-breaker policy applied to every endpoint (see `engine.models._breaker`).
        report: called in a worker thread with the run directory when the run ends; returns the summary
            (`engine.write_report` writes summary.json, report.md and report.html). None writes no report.

    The constructor does no I/O: `prepare` (called by `run`) builds the scenario if it was given unbuilt,
    and creates or reopens the run directory.
    """

    run_dir: RunDir
    _plan_hash: str
    _started_at: str

    def __init__(
        self,
        scenario: Scenario | BuiltScenario,
        *,
        out: Path | str | None = None,
        resume: Path | str | None = None,
        tutor: Agent | None = None,
        on_episode: EpisodeCallback | None = None,
        on_turn: TurnCallback | None = None,
        grace_s: float = 10.0,
        cache: Path | str | bool | None = None,
        budget: Budget | None = None,
        retry_errors: bool = False,
        probe: bool = True,
        max_errors: ErrorLimit | None = None,
        breaker: BreakerPolicy | None = None,
        report: Callable[[RunDir], dict[str, Any]] | None = None,
    ) -> None:
        if isinstance(scenario, BuiltScenario):
            self._built: BuiltScenario | None = scenario
            if tutor is not None:
                self._built = replace(scenario, tutor=tutor)
                preflight(self._built)
            self.scenario = scenario.scenario
        else:
            self._built, self.scenario = None, scenario
        self._custom_tutor = tutor or (self._built.tutor if self._built is not None else None)
        self.budget = budget or Budget()
        self.budget.check_prices([spec.model for _, spec in self.scenario.models.by_role()], self.scenario.prices)
        if retry_errors and not resume:
            raise ScenarioError("--retry-errors needs --resume RUN_DIR: it re-runs that run's error records")
        self.redactor = Redactor(
            [os.environ.get(v, "") for v in key_variables([spec for _, spec in self.scenario.models.by_role()])],
            [spec.base_url for _, spec in self.scenario.models.by_role()] + [os.environ.get("OPENAI_BASE_URL")],
        )
        """Every secret of the run (keys, credentials in base URLs), kept out of all it writes and prints."""
        self._inputs = InputMemo()
        self.tutors = TutorSet(self.scenario.models)
        self._cache_setting = cache
        self._out = Path(out) if out is not None else Path("runs")
        self._resume = Path(resume) if resume is not None else None
        self._retry_errors, self._fresh, self._prepared = retry_errors, not resume, False
        self.pending: list[Episode] = []
        self.admission: FixedAdmission | WaveAdmission = FixedAdmission()
        """Which episodes may start now: all (fixed sample) or item waves of a `design.stopping` run."""
        self.already_done = self.retried = self.ok = self.errors = 0
        self.stats = CallStats()
        self.errors_by_kind: Counter[str] = Counter()
        """Current error records by kind, live: what the progress line shows."""
        self.first_errors: dict[str, str] = {}
        self._max_errors, self._breaker_policy = max_errors, breaker or BreakerPolicy()
        self._probe, self._report = probe, report
        self.reason: str | None = None
        self._events: RunEvents | Any = log  # the run's own event log while `run` is going on
        self.on_episode, self._on_turn = on_episode, on_turn
        self._grace_s, self._interrupted = grace_s, False
        self._admission: anyio.CancelScope | None = None
        self._episodes_scope: anyio.CancelScope | None = None

    @property
    def built(self) -> BuiltScenario:
        """The built scenario; a Runner given a plain `Scenario` builds it here, on first use (reads files)."""
        if self._built is None:
            self._built = build(self.scenario, tutor=self._custom_tutor)
        return self._built

    @property
    def episodes(self) -> tuple[Episode, ...]:
        return self.built.episodes

    @property
    def cache_path(self) -> Path | None:
        return resolve_cache_path(self._cache_setting, self.scenario, check=False)

    async def open(self) -> None:
        """`prepare` in a worker thread, for async callers."""
        await anyio.to_thread.run_sync(self.prepare)

    def prepare(self) -> None:
        """Build if needed, create or reopen the run directory, keep or check its plan and count what is done.

        This is where the file I/O is (the constructor does none); `run` calls it first, in a worker thread.
        """
        if self._prepared:
            return
        built = self.built
        resolve_cache_path(self._cache_setting, self.scenario)  # a bad cache path fails before the run
        if self._resume:
            self.run_dir = RunDir.for_resume(self._resume, self.scenario)
        else:
            self.run_dir = RunDir.create(self._out, self.scenario.name)
            self.run_dir.acquire("run")
        try:
            self._plan_hash, current = self._open_plan()
            manifest = self.run_dir.read_manifest() if self._resume else {}
        except BaseException:
            self.run_dir.release()
            raise
        retried = {r.id for r in current if r.status == "error"} if self._retry_errors else set()
        done = {r.id for r in current} - retried
        self.admission = admission_for(self.scenario, built.episodes)
        self.pending = self.admission.order([episode for episode in built.episodes if episode.id not in done])
        self.already_done, self.retried = len(built.episodes) - len(self.pending), len(retried)
        if manifest:
            self.stats.add(manifest.get("calls") or {})
        kept = [r for r in current if r.id not in retried]
        self.admission.load(kept)
        self.ok = sum(1 for r in kept if r.status == "ok")
        """Episodes recorded ok in this run directory, earlier sessions of a resumed run included."""
        self.errors = len(kept) - self.ok
        self.errors_by_kind.update(r.error.type for r in kept if r.error is not None)
        for r in kept:
            if r.error is not None:
                self.first_errors.setdefault(r.error.type, r.error.message)
        self._started_at = manifest.get("started_at") or utc_now()
        self._prepared = True

    def _open_plan(self) -> tuple[str, list[EpisodeRecord]]:
        """Keep the plan in plan.json (a new run) or check it (a resume); the current records of a resume."""
        ids = [episode.id for episode in self.episodes]
        if self._fresh:
            return self.run_dir.write_plan(ids), []
        manifest = self.run_dir.read_manifest()
        stored = self.run_dir.read_plan(manifest)
        if stored is None:  # a run directory from before plans were kept
            digest = self.run_dir.write_plan(ids)
        elif stored != ids:
            raise ScenarioError(f"cannot resume {self.run_dir.path}: its plan.json is not this scenario's plan")
        else:
            digest = str(manifest.get("plan_hash") or self.run_dir.write_plan(ids))
        current = self.run_dir.current_records(ids, manifest=manifest)
        for warning in current.warnings:
            log.warning("records.outside_plan", run_dir=str(self.run_dir.path), detail=warning)
        return digest, current.records

    def spend(self) -> Spend:
        """Tokens and dollars so far, per role and model (every session of a resumed run)."""
        return spend(self.stats.tokens_by_role, self.scenario.prices)

    async def run(self, *, handle_signals: bool = False) -> RunResult:
        """Play every pending episode; with `handle_signals`, Ctrl-C stops admission and flushes (CLI only)."""
        await self.open()
        events = self._events = RunEvents(self.run_dir.events_path, secrets=self.redactor)
        discard = False
        try:
            with self.built.templates.active():
                return await self._run(handle_signals)
        except ProbeFailed:
            discard = self._fresh  # nothing ran: leave no empty run directory behind
            raise
        finally:
            self._events = log
            events.close()
            self.run_dir.release()
            if discard:
                shutil.rmtree(self.run_dir.path, ignore_errors=True)

    async def _run(self, handle_signals: bool) -> RunResult:
        self._admission, self._episodes_scope = anyio.CancelScope(), anyio.CancelScope()
        completed = started = False
        try:
            async with AsyncExitStack() as stack:
                clients, judge_clients = await self._open_clients(stack)
                if self._probe:
                    for warning in await probe_endpoints(self._endpoints):
                        self._events.warning("probe.doubtful", detail=warning)
                self._write_manifest("running")
                started = True
                self._events.info(
                    "run.started",
                    scenario=self.scenario.name,
                    planned=len(self.episodes),
                    pending=len(self.pending),
                    retried=self.retried,
                )
                judges = list(self.built.judges)
                async with anyio.create_task_group() as outer:
                    if handle_signals:
                        outer.start_soon(self._watch_signals)
                    if self.scenario.executor.name == "ray":
                        from engine.runtime._ray import run_on_ray  # Ray is imported only when it is used

                        await run_on_ray(self)
                    else:
                        await self._run_episodes(clients, judge_clients, judges)
                    outer.cancel_scope.cancel()
            completed = True
        finally:
            self.run_dir.close()
            if started and not completed:  # cancelled from outside: what was appended stays, and resume completes it
                self._write_manifest("interrupted")
        status: Status = "interrupted" if self._interrupted or self.tutors.stopped else "finished"
        self._write_manifest(status)
        summary = {} if self._report is None else await anyio.to_thread.run_sync(self._report, self.run_dir)
        path = str(self.run_dir.path)
        self._events.info(
            "run.finished", status=status, ok=self.ok, errors=self.errors, run_dir=path, reason=self.reason
        )
        result = RunResult(self.run_dir.path, status, len(self.episodes), self.ok, self.errors, summary)
        result.reason = self.reason or self.admission.reason
        return result

    def interrupt(self) -> None:
        """Stop admitting episodes; those in flight finish (within the grace period, under the CLI)."""
        if not self._interrupted:
            self._stop("interrupted by a signal")
            self._events.warning("run.interrupted", in_flight="finishing", grace_s=self._grace_s)

    def _stop(self, reason: str, *, cancel_in_flight: bool = False) -> None:
        """End the run `interrupted`: no more admissions; with `cancel_in_flight`, no more calls either."""
        if self.reason is None or (self.tutors.stopped and not self._interrupted):  # the whole run stops now
            self.reason = self.redactor.text(reason)  # it quotes an endpoint's error, which may echo a key
            self._events.warning("run.stopping", reason=reason, cancel_in_flight=cancel_in_flight)
        self._interrupted = True
        if self._admission is not None:
            self._admission.cancel()
        if cancel_in_flight and self._episodes_scope is not None:
            self._episodes_scope.cancel()

    def _breaker_opened(self, reason: str) -> None:
        if self._episodes_scope is not None and (stopped := self.tutors.stop_own(reason, self._events)):
            self.tutor_stopped(stopped)
            return
        self._stop(f"circuit breaker opened: {reason}", cancel_in_flight=True)

    def tutor_stopped(self, why: str) -> None:
        """One tutor of several stopped: the others play on, and the run will end `interrupted` saying `why`."""
        self.reason = self.redactor.text(why)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                self.interrupt()
                break
            with anyio.move_on_after(self._grace_s):
                async for _ in signals:
                    break
            if self._episodes_scope is not None:
                self._episodes_scope.cancel()

    async def _open_clients(self, stack: AsyncExitStack) -> tuple[dict[str, ModelClient], list[ModelClient]]:
        roles = self.built.models
        endpoints = await stack.enter_async_context(
            open_endpoints(
                roles,
                stats=self.stats,
                cache_path=self.cache_path,
                events=self._events,
                redactor=self.redactor,
                breaker=BreakerSetup(self._breaker_policy, self._breaker_opened),
                throttle=self._new_throttle,
            )
        )
        built = [(role, endpoints.client(role, spec)) for role, spec in roles]
        self.tutors.open(endpoints)
        # What the probe calls: each endpoint once, by the first role that uses it (a custom tutor uses none).
        used = [(role, spec) for role, spec in roles if not (role == "tutor" and self._custom_tutor)]
        self._endpoints = endpoints.probe_targets(used)
        return {role: c for role, c in built if role != "judge"}, [c for role, c in built if role == "judge"]

    def _new_throttle(self, endpoint: EndpointKey, sharing: Sequence[ModelSpec]) -> Throttle:
        """The endpoint's throttle; a Ray worker's runner overrides it to spend the cluster's one budget."""
        return shared_throttle(sharing)

    async def episode_player(self, stack: AsyncExitStack) -> Callable[[Episode], Awaitable[EpisodeRecord]]:
        """Open this run's clients on `stack` and return what plays one episode into its record, with no run
        directory: how a Ray worker plays its shard with the very code of a local run."""
        clients, judge_clients = await self._open_clients(stack)
        return partial(self._play, clients=clients, judge_clients=judge_clients, judges=list(self.built.judges))

    def admission_refused(self) -> str | None:
        """Why no further episode may start (a budget spent, `--max-errors` reached), or None."""
        reason = self.budget.exceeded(self._usage_by_model(), self.scenario.prices)
        return reason if reason is not None else self._error_limit_reached()

    async def _run_episodes(
        self, clients: dict[str, ModelClient], judge_clients: list[ModelClient], judges: list[Judge]
    ) -> None:
        # Admission waits on the limiter before a task exists, so in-flight episodes are served first and
        # a large plan never turns into thousands of parked tasks.
        limiter = anyio.CapacityLimiter(self.scenario.concurrency)
        assert self._episodes_scope is not None and self._admission is not None
        with self._episodes_scope:
            async with anyio.create_task_group() as group:
                with self._admission:
                    for episode in filter(self.tutors.admits, self.pending):
                        if not await self.admission.admit(episode):
                            break
                        await limiter.acquire_on_behalf_of(episode.id)
                        reason = self.admission_refused()
                        if reason is not None:
                            limiter.release_on_behalf_of(episode.id)
                            self.refuse_admission(reason)
                            break
                        group.start_soon(self._run_one, episode, limiter, clients, judge_clients, judges)

    def refuse_admission(self, reason: str) -> None:
        self._events.warning("budget.exhausted", reason=reason)
        self._stop(reason)  # like Ctrl-C: resumable with a higher limit

    def _error_limit_reached(self) -> str | None:
        limit = self._max_errors
        if limit is None or self.errors < limit.bound(len(self.episodes)):
            return None
        return f"error limit reached: {self.errors} episodes recorded as errors (--max-errors {limit})"

    def _usage_by_model(self) -> dict[str, tuple[int, int]]:
        return {model: (p, c) for model, (p, c) in self.stats.tokens_by_model.items()}

    async def _run_one(
        self,
        episode: Episode,
        limiter: anyio.CapacityLimiter,
        clients: dict[str, ModelClient],
        judge_clients: list[ModelClient],
        judges: list[Judge],
    ) -> None:
        try:
            with self.tutors.playing(episode):
                await self.accept(await self._play(episode, clients, judge_clients, judges))
        finally:
            limiter.release_on_behalf_of(episode.id)

    async def accept(self, record: EpisodeRecord) -> None:
        """Count and append one finished episode's record: the single place records enter the run directory."""
        if record.error is not None and self._error_limit_reached() is not None:
            return  # past --max-errors (episodes that failed together): unrecorded, a resume runs it again
        # Counted before the append's await, so episodes ending together see each other's errors.
        if record.error is None:
            self.ok += 1
        else:
            self.errors += 1
            self.errors_by_kind[record.error.type] += 1
            self.first_errors.setdefault(record.error.type, record.error.message)
        await self.run_dir.append(record)
        self.admission.record(record)
        if self.on_episode is not None:
            await self.on_episode(record)
        reason = self._error_limit_reached() if record.error is not None else None
        if reason is not None:  # a bound, not a target: episodes in flight are cancelled, resume reruns them
            self._stop(reason, cancel_in_flight=True)

    async def _play(
        self,
        episode: Episode,
        clients: dict[str, ModelClient],
        judge_clients: list[ModelClient],
        judges: list[Judge],
    ) -> EpisodeRecord:
        scenario = self.scenario
        on_turn = self._on_turn

        async def turn_callback(ctx: EpisodeContext, turn: Turn) -> None:
            if on_turn is not None:
                await on_turn(ctx.episode, turn)

        ctx = EpisodeContext(
            episode=episode,
            scenario=scenario,
            tutor=self.built.make_tutor(),
            student=self.built.make_student(),
            judges=judges,
            clients=self.tutors.clients_for(episode, clients),
            judge_clients=judge_clients,
            on_turn=turn_callback if on_turn is not None else None,  # no await per turn when nobody listens
            run_memo=self._inputs,
        )
        started = utc_now()
        error: ErrorInfo | None = None
        with structlog.contextvars.bound_contextvars(episode_id=episode.id), ranked_calls():
            try:
                await self.built.protocol.run(ctx)
            except Exception as caught:
                error = self._failure(caught)
        usage = sum((turn.usage for turn in ctx.turns), Usage())
        self._events.info(
            "episode.finished",
            episode_id=episode.id,
            status="error" if error else "ok",
            turns=len(ctx.turns),
            tokens=usage.total,
            duration_s=round(time.time() - ctx.started_at, 4),
        )
        return EpisodeRecord(
            id=episode.id,
            scenario=scenario.name,
            scenario_hash=self.built.scenario_hash,
            item_id=episode.item.id,
            condition=dict(episode.condition),
            replicate=episode.replicate,
            seed=episode.seed,
            tutor=episode.tutor,
            status="error" if error else "ok",
            error=error,
            turns=ctx.turns,
            judgments=ctx.judgments,
            metrics=ctx.metrics,
            meta={"domain": episode.item.domain, **episode.extras, **ctx.meta},
            usage=usage,
            started_at=started,
            finished_at=utc_now(),
        )

    def _failure(self, caught: Exception) -> ErrorInfo:
        """What an episode's record says of its failure: the cause, not its task-group wrapper, and no secrets."""
        exc = _unwrap(caught)
        kind = exc.kind if isinstance(exc, ProviderError) else type(exc).__name__
        where = exc.endpoint if isinstance(exc, ProviderError) else None
        self._events.warning("episode.failed", gate=f"{kind} {where}", error_type=kind, error=str(exc))
        return ErrorInfo(type=kind, message=self.redactor.text(str(exc)))

    def _tutor_free(self) -> dict[str, int]:
        """A study's units played once, by no tutor (`TutorFreeConditions`); absent when there are none."""
        if self.scenario.models.tutor_labels is None:
            return {}
        free = sum(1 for episode in self.episodes if episode.tutor is None)
        return {"tutor_free": free} if free else {}

    def _write_manifest(self, status: str) -> None:
        self.run_dir.write_manifest(
            {
                **describe_run(self.built, self.redactor, self._plan_hash, custom_tutor=self._custom_tutor is not None),
                "status": status,
                "reason": self.reason or self.admission.reason,
                "sequential": self.admission.manifest(),
                "counts": {
                    "planned": len(self.episodes),
                    "ok": self.ok,
                    "error": self.errors,
                    "resumed_with": self.already_done,
                    "retried": self.retried,
                    **self._tutor_free(),
                },
                "calls": asdict(self.stats),
                "cost_usd": self.spend().manifest(),
                "versions": dict(versions()),
                "started_at": self._started_at,
                "updated_at": utc_now(),
            }
        )


def _unwrap(exc: Exception) -> Exception:
    """The single cause inside task-group wrappers, so a record says `ProviderTimeout`, not `ExceptionGroup`."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ExceptionGroup) and len({type(e) for e in exc.exceptions}) == 1:
        return _unwrap(exc.exceptions[0])
    return exc
