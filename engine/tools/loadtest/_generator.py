"""The load generator of one process: conversations arrive on absolute deadlines and talk until their last turn.

Each conversation is a simulated student (the `sim` provider, in-process and free) asking the target tutor about
an item: the history grows turn by turn, with think time between a reply and the student's next message. Per
turn, client work is O(new content): messages are appended, never copied or re-tokenised.

Open loop (`constant`, `poisson`): conversation i starts at its scheduled offset whatever the server does, and
turn k+1 is scheduled a think time after turn k's reply. Every request records when it was scheduled and when
it was sent; with a `max_in_flight` cap, or a client too slow to keep up, the two part and the gap is reported
as dispatch delay. Closed loop (`concurrency`): a fixed number of conversations run back to back; there is no
schedule to be late for, so latency is from the send only — the report says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel

from engine.core._errors import ProviderError
from engine.core._seeds import derive_seed
from engine.models._endpoints import open_model
from engine.models._provider import ChatRequest, RequestContext
from engine.models._retry import classify, retry_delay
from engine.models.sim._provider import SimChatModel
from engine.scenario._items import Item
from engine.scenario._spec import ModelSpec
from engine.tools.loadtest._arrivals import arrival_offsets, think_times
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._progress import LiveCounts
from engine.tools.loadtest._records import RequestRecord
from engine.tools.loadtest._transport import LoadTransport, Messages

__all__ = ("Generator", "Health")

MONITOR_TICK_S = 0.01
_OPENINGS = (
    "Hi, I'm stuck on this one: {question}",
    "Can you help me with this problem? {question}",
    "I don't get how to start this: {question}",
)


@dataclass
class Health:
    """How the client itself fared: a late timer or a busy CPU means the numbers may be the client's."""

    worker: int
    cpu_s: float = 0.0
    wall_s: float = 0.0
    loop_lag_s: list[float] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    scheduled_starts: int = 0
    """Open loop: conversation starts this worker's schedule asked for."""
    started: int = 0
    completed: int = 0
    """Conversations whose every turn succeeded."""
    scheduled_requests: int = 0
    """Requests scheduled, including those the hard stop cancelled before they were sent."""


class Generator:
    """Runs this worker's share of the conversations against `transport`; rows land in `records`."""

    def __init__(
        self,
        config: LoadConfig,
        transport: LoadTransport,
        items: Sequence[Item],
        *,
        start: float,
        rate: float | None = None,
        worker: int = 0,
        workers: int = 1,
        step: int = 0,
        stop: anyio.Event | None = None,
    ) -> None:
        """`start` is the shared `time.perf_counter()` origin; `rate` overrides the config's (sweep steps).

        Setting `stop` ends the run at once, as the hard stop does: requests in flight become `cancelled` rows.
        """
        self.config, self.transport, self.items = config, transport, items
        self.rate = rate if rate is not None else config.rate
        self.worker, self.workers, self.step = worker, workers, step
        self.records: list[RequestRecord] = []
        self.health = Health(worker=worker)
        self._start = start
        student = open_model(ModelSpec(model="sim/student"))
        assert isinstance(student, SimChatModel)  # its `reply_text` answers at once, with no await
        self._student = student
        cap = config.max_in_flight
        self._limiter = anyio.CapacityLimiter(cap // workers + (worker < cap % workers)) if cap else None
        quota = config.max_requests
        self._quota = None if quota is None else quota // workers + (worker < quota % workers)
        self.live = LiveCounts()
        self._stop = stop

    def now(self) -> float:
        return time.perf_counter() - self._start

    async def run(self) -> Health:
        config, health = self.config, self.health
        cpu = time.process_time()
        hard_stop = config.duration_s + config.grace_s if config.duration_s is not None else math.inf
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._monitor)
            with anyio.move_on_after(hard_stop - self.now()) as scope:
                if self._stop is not None:
                    outer.start_soon(self._stop_on_request, self._stop, scope)
                async with anyio.create_task_group() as conversations:
                    if config.open_loop:
                        await self._arrivals(conversations)
                    else:
                        for slot in range(self.worker, config.concurrency or 0, self.workers):
                            conversations.start_soon(self._closed_loop, slot)
            outer.cancel_scope.cancel()
        for record in self.records:
            if not record.ok and record.error is None:
                record.error = "cancelled"
        health.cpu_s, health.wall_s = time.process_time() - cpu, self.now()
        return health

    @staticmethod
    async def _stop_on_request(stop: anyio.Event, scope: anyio.CancelScope) -> None:
        await stop.wait()
        scope.cancel()

    def _may_schedule(self, at: float) -> bool:
        if self.config.duration_s is not None and at >= self.config.duration_s:
            return False
        return self._quota is None or self.health.scheduled_requests < self._quota

    async def _until(self, at: float) -> None:
        delay = at - self.now()
        if delay > 0:
            await anyio.sleep(delay)
        else:
            await anyio.lowlevel.checkpoint()  # let due conversations run instead of spawning a burst

    async def _arrivals(self, conversations: anyio.abc.TaskGroup) -> None:
        assert self.rate is not None
        offsets = arrival_offsets(self.config.arrival, self.rate, seed=self.config.seed, until_s=self.config.duration_s)
        for index, offset in enumerate(offsets):
            if index % self.workers != self.worker:
                continue
            if not self._may_schedule(offset):
                return
            await self._until(offset)
            self.health.scheduled_starts += 1
            conversations.start_soon(self._conversation, index, offset)

    async def _closed_loop(self, slot: int) -> None:
        index = slot
        while self._may_schedule(self.now()):
            await self._conversation(index, None)
            index += self.config.concurrency or 1

    async def _conversation(self, index: int, scheduled: float | None) -> None:
        config = self.config
        item = self.items[index % len(self.items)]
        opening = _OPENINGS[index % len(_OPENINGS)].format(question=item.question)
        messages: Messages = [{"role": "system", "content": config.system_prompt}, {"role": "user", "content": opening}]
        pauses = think_times(config.think, config.think_time_s, seed=config.seed, conversation=index)
        self.health.started += 1
        for turn in range(config.turns):
            if not self._may_schedule(scheduled if scheduled is not None else self.now()):
                return
            self.health.scheduled_requests += 1
            if scheduled is not None:
                await self._until(scheduled)
            reply = await self._request(index, turn, messages, scheduled)
            if reply is None:
                return  # an error ends the conversation: its next turns would answer a reply never received
            if turn + 1 == config.turns:
                self.health.completed += 1
                return
            messages.append({"role": "assistant", "content": reply})
            messages.append({"role": "user", "content": self._student_turn(item, reply, index, turn)})
            pause = next(pauses)
            if scheduled is not None:
                scheduled = self.now() + pause
            elif pause > 0:
                await anyio.sleep(pause)

    async def _request(self, index: int, turn: int, messages: Messages, scheduled: float | None) -> str | None:
        config = self.config
        for attempt in range(config.retries + 1):
            record = RequestRecord(
                conversation=index, turn=turn, worker=self.worker, step=self.step, attempt=attempt,
                messages=len(messages), scheduled=scheduled,
                warmup=(scheduled if scheduled is not None else self.now()) < config.warmup_s,
            )  # fmt: skip
            if self._limiter is None:
                outcome = await self._send(messages, record)
            else:
                async with self._limiter:
                    outcome = await self._send(messages, record)
            if not isinstance(outcome, ProviderError):
                return outcome
            decision = classify(outcome)  # the engine's retry policy; each attempt stays a row of its own
            if not decision.retry or attempt == config.retries:
                return None
            await anyio.sleep(retry_delay(decision, attempt))
        return None

    async def _send(self, messages: Messages, record: RequestRecord) -> str | ProviderError:
        self.records.append(record)
        live = self.live
        live.sent += 1
        live.in_flight += 1
        try:
            reply = await self.transport.send(messages, record, self.now)
        finally:
            live.in_flight -= 1
        if record.ok:
            live.ok += 1
            if live.watched and record.first_token is not None:
                live.ttfts.append(record.first_token - record.dispatched)
        else:
            live.errors += 1
        return reply

    def _student_turn(self, item: Item, reply: str, index: int, turn: int) -> str:
        context = RequestContext(role="student", task="persona", item=item, data={"last_tutor": reply, "turn": turn})
        seed = derive_seed(self.config.seed, index, turn, bits=32)
        return self._student.reply_text(ChatRequest(messages=(), context=context, seed=seed))

    async def _monitor(self) -> None:
        """Samples event-loop lag (how late a short timer fires) and requests in flight."""
        lags, flights = self.health.loop_lag_s, self.health.in_flight
        while True:
            before = time.perf_counter()
            await anyio.sleep(MONITOR_TICK_S)
            lags.append(time.perf_counter() - before - MONITOR_TICK_S)
            flights.append(self.live.in_flight)
