"""An endpoint's in-flight seats go to the oldest episode waiting: calls of episodes under way before new ones."""

from __future__ import annotations

import math

import anyio
from anyio import wait_all_tasks_blocked
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.models._seats import Seats, episode_rank, ranked_calls

RANKS = st.lists(st.one_of(st.integers(0, 5).map(float), st.just(math.inf)), max_size=12)


async def _grant_order(total: int, ranks: list[float], cancelled: frozenset[int] = frozenset()) -> list[int]:
    """Fill every seat, queue one waiter per rank (in list order), cancel some, then free seats one at a time."""
    seats = Seats(total)
    granted: list[tuple[str, int]] = []
    done: dict[tuple[str, int], anyio.Event] = {}

    async def hold(name: tuple[str, int], rank: float, scope: anyio.CancelScope) -> None:
        with scope:
            async with seats.seat(rank):
                granted.append(name)
                await done.setdefault(name, anyio.Event()).wait()

    async with anyio.create_task_group() as group:
        scopes = {}
        for index in range(total):
            group.start_soon(hold, ("holder", index), 0.0, anyio.CancelScope())
        await wait_all_tasks_blocked()
        for index, rank in enumerate(ranks):
            scopes[index] = anyio.CancelScope()
            group.start_soon(hold, ("waiter", index), rank, scopes[index])
            await wait_all_tasks_blocked()
        for index in cancelled:
            scopes[index].cancel()
        await wait_all_tasks_blocked()
        released = 0
        while released < len(granted):
            done.setdefault(granted[released], anyio.Event()).set()
            released += 1
            await wait_all_tasks_blocked()
    return [index for kind, index in granted if kind == "waiter"]


@settings(max_examples=40)
@given(total=st.integers(1, 3), ranks=RANKS)
def test_freed_seats_go_to_the_lowest_rank_then_the_earliest_arrival(total: int, ranks: list[float]) -> None:
    found = anyio.run(_grant_order, total, ranks)
    assert found == sorted(range(len(ranks)), key=lambda index: (ranks[index], index))


@settings(max_examples=40)
@given(total=st.integers(1, 2), ranks=RANKS, data=st.data())
def test_a_waiter_cancelled_in_the_queue_takes_no_seat(total: int, ranks: list[float], data: st.DataObject) -> None:
    cancelled = frozenset(data.draw(st.sets(st.sampled_from(range(len(ranks)))) if ranks else st.just(set())))
    found = anyio.run(_grant_order, total, ranks, cancelled)
    kept = [index for index in range(len(ranks)) if index not in cancelled]
    assert found == sorted(kept, key=lambda index: (ranks[index], index))


async def test_a_free_seat_is_taken_at_once_whatever_the_rank() -> None:
    seats = Seats(2)
    async with seats.seat(math.inf), seats.seat(7.0):
        assert seats._free == 0
    assert seats._free == 2


async def test_calls_rank_by_the_episode_they_belong_to() -> None:
    assert episode_rank() == math.inf  # outside an episode (the probe, calibration): last
    seen: list[float] = []

    async def call() -> None:
        seen.append(episode_rank())

    with ranked_calls():
        first = episode_rank()
        async with anyio.create_task_group() as group:  # a judge's votes run in child tasks: same rank
            group.start_soon(call)
        with ranked_calls():
            later = episode_rank()
    assert seen == [first] and later > first and episode_rank() == math.inf
