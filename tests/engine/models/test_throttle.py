"""Per-endpoint admission: bucket sizing, RPM and TPM rates, in-flight cap, quota exhaustion."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from aiolimiter import AsyncLimiter
from hypothesis import given
from hypothesis import strategies as st

from engine.core._errors import QuotaExhausted
from engine.models._client import CallStats, ModelClient
from engine.models._openai import OpenAIChatModel
from engine.models._provider import RequestContext
from engine.models._throttle import Throttle, bucket_shape
from engine.scenario._spec import ModelSpec
from tests.fakes.openai_server import FakeOpenAI, Reply, Seen

KEY_ENV = "SIMRUN_TEST_KEY"


def _token_limiter(throttle: Throttle) -> AsyncLimiter:
    """The TPM bucket's limiter (private), to read its level without waiting on the clock."""
    bucket = throttle._tokens
    assert bucket is not None
    return bucket.limiter


@asynccontextmanager
async def _open_client(fake: FakeOpenAI, stats: CallStats, **spec_fields: Any) -> AsyncIterator[ModelClient]:
    """A ModelClient wired the way `Runner._open_clients` wires one, closed on exit."""
    spec = ModelSpec(model="openai/fake-model", base_url=fake.base_url, api_key_env=KEY_ENV, **spec_fields)
    model = OpenAIChatModel(spec)
    try:
        throttle = Throttle(rpm=spec.rpm, tpm=spec.tpm, max_in_flight=spec.max_concurrency)
        yield ModelClient("tutor", spec, model, throttle, stats)
    finally:
        await model.aclose()


@given(per_minute=st.floats(min_value=0.1, max_value=1e6, exclude_min=True, allow_nan=False))
def test_bucket_shape_drains_the_rate_with_a_burst_of_at_least_one(per_minute: float) -> None:
    """A bucket holds at least one request, refills over at least a second, and drains exactly `per_minute`."""
    capacity, period = bucket_shape(per_minute)
    # capacity is computed as per_second * (1 / per_second) and may land one ulp below 1.0.
    assert capacity >= 1.0 - 1e-9
    assert period >= 1.0
    assert math.isclose(capacity / period * 60.0, per_minute, rel_tol=1e-9)


@given(per_minute=st.floats(min_value=0.1, max_value=1e6, exclude_min=True, allow_nan=False))
def test_bucket_shape_uses_one_second_unless_the_rate_is_too_low(per_minute: float) -> None:
    """The burst is one second's share of the rate, unless that share is below the minimum capacity."""
    capacity, period = bucket_shape(per_minute)
    if per_minute >= 60.0:
        assert period == 1.0 and math.isclose(capacity, per_minute / 60.0)
    else:
        assert math.isclose(capacity, 1.0)


def test_token_bucket_has_the_4096_minimum_capacity() -> None:
    """A 6000 TPM bucket refills at 100 tokens/s and holds 4096 tokens, so one large call is never refused."""
    capacity, period = bucket_shape(6000, min_capacity=4096)
    assert capacity == pytest.approx(4096) and period == pytest.approx(40.96)
    assert capacity / period == pytest.approx(100.0)


async def test_rpm_is_held_after_the_initial_burst() -> None:
    """At 3000 RPM, 40 concurrent tasks are admitted at 50/s (within a few percent) once the burst is spent."""
    throttle = Throttle(rpm=3000)
    capacity, _ = bucket_shape(3000)
    admitted: list[float] = []

    async def worker() -> None:
        for _ in range(4):
            async with throttle.slot(1):
                admitted.append(anyio.current_time())

    async with anyio.create_task_group() as group:
        for _ in range(40):
            group.start_soon(worker)

    assert len(admitted) == 160
    admitted.sort()
    burst_end = admitted[int(capacity) - 1]
    later = admitted[int(capacity) :]
    achieved = len(later) / (later[-1] - burst_end)
    assert 0.75 * 50 <= achieved <= 1.05 * 50


async def test_rpm_keeps_a_sliding_window_server_from_rejecting_after_the_first_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With rpm at 90% of a server's sliding-window limit, the server rejects nothing once the first burst ages out."""
    monkeypatch.setenv(KEY_ENV, "sk-simrun-test")
    limit, window_s, requests = 20, 1.0, 40
    admitted: list[Seen] = []

    def script(body: dict[str, Any]) -> Reply:
        # Called synchronously right after the server recorded this request, so seen[-1] is the one admitted.
        admitted.append(server.seen[-1])
        return Reply()

    server = FakeOpenAI(script, rpm_limit=limit, window_s=window_s)
    stats = CallStats()
    async with server as fake, _open_client(fake, stats, rpm=60 * limit * 0.9, max_retries=5) as client:

        async def one(index: int) -> None:
            await client.complete(
                [{"role": "user", "content": f"question {index}"}], context=RequestContext(role="tutor"), seed=index
            )

        async with anyio.create_task_group() as group:
            for index in range(requests):
                group.start_soon(one, index)

    assert fake.errors == []
    assert len(admitted) == fake.accepted == requests
    rejected = [seen for seen in fake.seen if not any(seen is a for a in admitted)]
    assert len(rejected) == fake.rejected == stats.retries_by_kind.get("rate_limited", 0)
    capacity, _ = bucket_shape(60 * limit * 0.9)
    first_window_ends = admitted[int(capacity) - 1].at + window_s
    assert [seen.at for seen in rejected if seen.at > first_window_ends] == []


async def test_max_in_flight_caps_concurrent_slots() -> None:
    """With max_in_flight=3, no more than 3 of 20 concurrent tasks hold a slot at once, and 3 do."""
    throttle = Throttle(max_in_flight=3)
    holding = peak = 0

    async def worker() -> None:
        nonlocal holding, peak
        async with throttle.slot(1):
            holding += 1
            peak = max(peak, holding)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            holding -= 1

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(worker)

    assert peak == 3 and holding == 0


async def test_tpm_waits_for_tokens_beyond_the_bucket() -> None:
    """At 6000 TPM (100 tokens/s, 4096 burst), 50 tokens past a full bucket wait at least half a second."""
    throttle = Throttle(tpm=6000)
    async with throttle.slot(4096):
        pass
    started = anyio.current_time()
    async with throttle.slot(50):
        pass
    assert anyio.current_time() - started >= 0.49


async def test_reconcile_charges_tokens_used_beyond_the_estimate() -> None:
    """Tokens a call used beyond its estimate are charged to the bucket, delaying the next call."""
    throttle = Throttle(tpm=6000)
    async with throttle.slot(96):
        pass
    await throttle.reconcile(96, 4096)  # charges 4000 more: the bucket is now full
    assert not _token_limiter(throttle).has_capacity(50)
    started = anyio.current_time()
    async with throttle.slot(50):
        pass
    assert anyio.current_time() - started >= 0.49


async def test_reconcile_charges_nothing_when_the_estimate_covered_the_call() -> None:
    """A call that used fewer tokens than estimated is not charged again (and is not refunded)."""
    throttle = Throttle(tpm=6000)
    async with throttle.slot(4000):
        pass
    await throttle.reconcile(4000, 10)
    limiter = _token_limiter(throttle)
    assert limiter.has_capacity(90)
    assert not limiter.has_capacity(200)


async def test_reconcile_without_a_token_bucket_is_a_no_op() -> None:
    """Without a TPM limit, reconcile returns at once whatever the usage."""
    throttle = Throttle(rpm=60)
    await throttle.reconcile(0, 10**9)


async def test_slot_larger_than_the_bucket_is_charged_in_full() -> None:
    """An estimate above the bucket's capacity is charged a bucket at a time, not clamped (TPM stays honest)."""
    throttle = Throttle(tpm=600_000)  # 10,000 tokens/s, a one-second bucket
    started = anyio.current_time()
    async with throttle.slot(25_000):
        pass
    assert anyio.current_time() - started >= 1.4  # 10k now, 10k after 1 s, 5k after 0.5 s more
    assert not _token_limiter(throttle).has_capacity(9_000)


async def test_exhausted_throttle_raises_the_stored_error() -> None:
    """Once quota exhaustion is recorded, every slot() raises QuotaExhausted for that model without waiting."""
    throttle = Throttle(rpm=60, max_in_flight=1)
    exhausted = QuotaExhausted("openai/fake-model", "HTTP 429: insufficient_quota", status=429)
    throttle.exhausted = exhausted
    for _ in range(2):
        with pytest.raises(QuotaExhausted) as raised:
            async with throttle.slot(1):
                pytest.fail("an exhausted throttle admitted a call")
        assert raised.value.model == exhausted.model and raised.value is not exhausted  # fresh: no shared traceback
