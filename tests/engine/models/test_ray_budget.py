"""The cluster's rate budget without Ray: the pace a budget actor keeps, on a clock the test drives.

What the budget promises is a property of its schedule: at the server's own limit, no window of W seconds may
hold more than the server admits, even when sends are a little late. A fake clock makes the schedule exact.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.models._ray_budget import HEADROOM, EndpointBudget, Pace


class _Clock:
    """`time.monotonic` and `anyio.sleep` for the budget module: sleeping moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr("engine.models._ray_budget.time", SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr("engine.models._ray_budget.anyio", SimpleNamespace(sleep=fake.sleep))
    return fake


def _most_in_a_window(times: list[float], window_s: float) -> int:
    times = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), mean_gap=st.floats(0.0, 0.06), most_late=st.floats(0.0, 0.08))
def test_a_paced_limit_fits_any_window_even_with_late_sends(seed: int, mean_gap: float, most_late: float) -> None:
    """20 requests/s against a server that admits 120 per 6 s, 300 callers arriving mostly faster than that, each
    send late by up to 80 ms (under 6 s x HEADROOM): no 6-s window holds more than 120."""
    draw = random.Random(seed)
    gaps = [draw.uniform(0, 2 * mean_gap) for _ in range(300)]
    lateness = [draw.uniform(0, most_late) for _ in range(300)]
    assert _most_in_a_window(_sends(gaps, lateness), 6.0) <= 120


def test_without_headroom_one_late_send_overfills_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the headroom: paced at exactly the limit, a first send 80 ms late shares a window with the 121st."""
    first_late = [0.08] + [0.0] * 299
    assert _most_in_a_window(_sends([0.0] * 300, first_late), 6.0) <= 120
    monkeypatch.setattr("engine.models._ray_budget.HEADROOM", 0.0)
    assert _most_in_a_window(_sends([0.0] * 300, first_late), 6.0) > 120


def _sends(gaps: list[float], lateness: list[float]) -> list[float]:
    """Send times of callers arriving after `gaps`, paced at 20/s, each then late by its `lateness`."""
    pace, now, sends = Pace.at(20 * 60), 0.0, []
    for gap, late in zip(gaps, lateness, strict=True):
        now += gap
        sends.append(pace.reserve(1, now) + late)
    return sends


def test_the_pace_is_the_rate_less_its_headroom_with_no_opening_burst() -> None:
    """Requests waiting from the start leave one spacing apart, the first at once: no bucket starts full."""
    pace = Pace.at(600)
    starts = [pace.reserve(1, 5.0) for _ in range(5)]
    assert starts[0] == 5.0
    assert [b - a for a, b in zip(starts, starts[1:], strict=False)] == pytest.approx([0.1 / (1 - HEADROOM)] * 4)


def _lease(budget: EndpointBudget, kind: str, need: float, want: float) -> dict[str, Any]:
    async def once() -> dict[str, Any]:
        return await budget.lease(kind, need, want)

    return anyio.run(once)


def test_a_lease_is_at_most_a_slice_and_brings_its_spacing(clock: _Clock) -> None:
    """At 600 rpm a slice is 1 request; a call that needs more than a slice still gets what it needs."""
    budget = EndpointBudget(rpm=600, tpm=60_000)
    first = _lease(budget, "requests", 1, 50)
    assert first["granted"] == 1 and first["spacing"] == pytest.approx(0.1 / (1 - HEADROOM))
    tokens = _lease(budget, "tokens", 4096, 4096)
    assert tokens["granted"] == 4096, "a need above a slice (100 tokens here) is granted whole"
    started = clock.now
    _lease(budget, "tokens", 10, 10)
    assert clock.now - started == pytest.approx(4096 * 60 / 60_000 / (1 - HEADROOM)), "after its time"


def test_a_retry_after_moves_every_lease_past_it_without_a_burst(clock: _Clock) -> None:
    """A hold of 2 s: the next leases start when it ends and then keep the pace."""
    budget = EndpointBudget(rpm=600, tpm=None)
    _lease(budget, "requests", 1, 1)
    held_at = clock.now
    budget.hold(2.0)
    returned = []
    for _ in range(3):
        _lease(budget, "requests", 1, 1)
        returned.append(clock.now - held_at)
    spacing = 0.1 / (1 - HEADROOM)
    assert returned == pytest.approx([2.0, 2.0 + spacing, 2.0 + 2 * spacing])


def test_an_exhausted_quota_grants_nothing_to_anyone(clock: _Clock) -> None:
    budget = EndpointBudget(rpm=600, tpm=None)
    budget.exhaust("quota exceeded")
    lease = _lease(budget, "requests", 1, 1)
    assert lease["granted"] == 0 and lease["exhausted"] == "quota exceeded"
    assert budget.state() == {"granted": {"requests": 0.0, "tokens": 0.0}, "exhausted": "quota exceeded"}
