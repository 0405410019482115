"""An endpoint's in-flight seats, given to the oldest episode waiting rather than to the first call that asked.

One local server answers one request at a time and keeps the prompt it just evaluated. With 64 episodes sharing
it first-come-first-served, every conversation's next call queues behind 63 others and finds the cache holding
someone else's prompt (calls grew from 2.5-12 s to 30-107 s). Ranking each call by when its episode started
serves the calls of episodes under way before any new episode's first call, so conversations run nearly one
after another and the server's cache stays warm; calls outside an episode (probe, calibration) rank last, in
arrival order. A rank only orders waiting calls: with a free seat any call goes at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio

__all__ = ("Seats", "episode_rank", "ranked_calls")

_RANK: ContextVar[float] = ContextVar("simrun_episode_rank", default=float("inf"))
_EPISODES = itertools.count()


def episode_rank() -> float:
    """The rank of the episode the current task belongs to (lower goes first), or infinity outside one."""
    return _RANK.get()


@contextmanager
def ranked_calls() -> Iterator[None]:
    """Rank every model call made inside the block (and the tasks it starts) as one episode, after every episode
    that entered earlier."""
    token = _RANK.set(float(next(_EPISODES)))
    try:
        yield
    finally:
        _RANK.reset(token)


@dataclass(order=True)
class _Waiter:
    rank: float
    arrival: int
    event: anyio.Event = field(compare=False, default_factory=anyio.Event)
    granted: bool = field(compare=False, default=False)
    gone: bool = field(compare=False, default=False)


class Seats:
    """At most `total` holders at once; a freed seat goes to the waiter of lowest (rank, arrival)."""

    def __init__(self, total: int) -> None:
        self._free = total
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def seat(self, rank: float | None = None) -> AsyncIterator[None]:
        await self._take(episode_rank() if rank is None else rank)
        try:
            yield
        finally:
            self._give_back()

    async def _take(self, rank: float) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        waiter = _Waiter(rank, next(self._arrivals))
        heapq.heappush(self._waiting, waiter)
        try:
            await waiter.event.wait()
        except BaseException:  # cancelled while waiting: a seat handed over meanwhile goes to the next waiter
            waiter.gone = True
            if waiter.granted:
                self._give_back()
            raise

    def _give_back(self) -> None:
        while self._waiting:
            waiter = heapq.heappop(self._waiting)
            if not waiter.gone:
                waiter.granted = True
                waiter.event.set()
                return
        self._free += 1
