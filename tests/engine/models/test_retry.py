"""The one retry layer: classification, jittered backoff, Retry-After parsing and the ModelClient loop over HTTP."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.models._client
import engine.models._retry
from engine.core._errors import ProviderError, ProviderTimeout, QuotaExhausted, RateLimited
from engine.models._client import CallStats, ModelClient
from engine.models._openai import OpenAIChatModel
from engine.models._provider import Message, RequestContext
from engine.models._retry import MAX_RETRY_AFTER_S, RetryDecision, backoff_delay, classify, parse_retry_after
from engine.models._throttle import Throttle
from engine.scenario._items import Item
from engine.scenario._spec import ModelSpec
from tests.fakes.openai_server import FakeOpenAI, Reply

KEY_ENV = "SIMRUN_TEST_KEY"
MODEL = "openai/fake-model"
MESSAGES: list[Message] = [{"role": "user", "content": "what is six times nine"}]
CONTEXT = RequestContext(role="tutor")
NOW = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)

# -- classify -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        ProviderTimeout(MODEL, "no reply within 1s"),
        ProviderError(MODEL, "connection failed: RemoteProtocolError"),
        RateLimited(MODEL, "HTTP 429", status=429),
        *(ProviderError(MODEL, f"HTTP {status}", status=status) for status in (408, 409, 429, 500, 502, 503, 504, 599)),
    ],
    ids=lambda exc: exc.kind,
)
def test_transient_failures_are_retried(exc: ProviderError) -> None:
    """Timeouts, dropped connections (no status), 408, 409, 429 and 5xx are retried."""
    assert classify(exc).retry


@pytest.mark.parametrize(
    "exc",
    [
        *(ProviderError(MODEL, f"HTTP {status}", status=status) for status in (400, 401, 403, 404, 422)),
        QuotaExhausted(MODEL, "HTTP 429: insufficient_quota", status=429),
        QuotaExhausted(MODEL, "quota", status=None),
    ],
    ids=lambda exc: f"{exc.kind}-{exc.status}",
)
def test_final_failures_are_not_retried(exc: ProviderError) -> None:
    """Other 4xx and quota exhaustion (whatever its status) are final."""
    assert classify(exc) == RetryDecision(False)


@pytest.mark.parametrize(
    "exc",
    [
        RateLimited(MODEL, "HTTP 429", status=429, retry_after=1.5),
        ProviderError(MODEL, "HTTP 503", status=503, retry_after=1.5),
    ],
    ids=lambda exc: exc.kind,
)
def test_classify_carries_the_servers_retry_after(exc: ProviderError) -> None:
    """A transient failure's Retry-After becomes the decision's wait."""
    assert classify(exc) == RetryDecision(True, 1.5)


# -- backoff_delay ------------------------------------------------------------------------------------------------


@given(attempt=st.integers(min_value=0, max_value=10_000), seed=st.integers(min_value=0, max_value=2**32))
def test_backoff_is_full_jitter_under_the_capped_exponential(attempt: int, seed: int) -> None:
    """The delay is uniform in [0, min(cap, base * 2**attempt)] for any attempt, however large."""
    ceiling = 30.0 if attempt >= 64 else min(30.0, 0.5 * 2**attempt)
    assert 0.0 <= backoff_delay(attempt, rng=random.Random(seed)) <= ceiling
    assert 0.0 <= backoff_delay(attempt) <= ceiling


@given(
    attempt=st.integers(min_value=0, max_value=200),
    base_s=st.floats(min_value=0.001, max_value=10.0),
    cap_s=st.floats(min_value=0.001, max_value=600.0),
)
def test_backoff_respects_custom_base_and_cap(attempt: int, base_s: float, cap_s: float) -> None:
    """The bound holds for any base and cap, not only the defaults."""
    ceiling = min(cap_s, base_s * 2 ** min(attempt, 64))
    assert 0.0 <= backoff_delay(attempt, base_s=base_s, cap_s=cap_s) <= ceiling


def test_backoff_is_jittered() -> None:
    """Delays for the same attempt differ (full jitter spreads retries) and use the whole range."""
    rng = random.Random(7)
    delays = [backoff_delay(3, rng=rng) for _ in range(200)]
    assert len(set(delays)) == 200
    assert min(delays) < 0.5 and max(delays) > 3.5  # ceiling is 0.5 * 2**3 = 4.0


# -- parse_retry_after --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": " 7 "}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "0.05"}, 0.05),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After-Ms": "1500.5"}, 1.5005),
        ({"retry-after": "Mon, 01 Jan 2024 12:00:30 GMT"}, 30.0),
        ({"retry-after": format_datetime(NOW + timedelta(seconds=90), usegmt=True)}, 90.0),
        ({"retry-after": "Mon, 01 Jan 2024 11:59:00 GMT"}, 0.0),
        ({"retry-after": "-5"}, 0.0),
        ({"retry-after-ms": "-1"}, 0.0),
        ({"retry-after": "1e9"}, MAX_RETRY_AFTER_S),
        ({"retry-after": "inf"}, MAX_RETRY_AFTER_S),
        ({"retry-after-ms": "1e12"}, MAX_RETRY_AFTER_S),
        ({"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"}, MAX_RETRY_AFTER_S),
        ({}, None),
        ({"x-ratelimit-reset-requests": "1s"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "Mon, 99 Jan 2024 12:00:30 GMT"}, None),
        ({"retry-after-ms": "later"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    """Seconds, decimals, milliseconds (preferred), HTTP dates; past → 0, huge → capped, garbage → None."""
    result = parse_retry_after(headers, now=NOW)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


_HEADER_NAMES = st.sampled_from(["retry-after", "Retry-After", "RETRY-AFTER", "retry-after-ms", "Retry-After-Ms", "x"])
_HEADER_VALUES = st.one_of(
    st.text(),
    st.floats().map(str),
    st.integers().map(str),
    st.datetimes(timezones=st.just(UTC)).map(format_datetime),
    st.datetimes().map(format_datetime),
)


@given(headers=st.dictionaries(_HEADER_NAMES, _HEADER_VALUES, max_size=4), fixed_now=st.booleans())
def test_parse_retry_after_never_raises(headers: dict[str, str], fixed_now: bool) -> None:
    """Any header values give None or a wait in [0, MAX_RETRY_AFTER_S], never an exception."""
    result = parse_retry_after(headers, now=NOW if fixed_now else None)
    assert result is None or 0.0 <= result <= MAX_RETRY_AFTER_S


# -- the ModelClient retry loop over real HTTP --------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-simrun-test")


@pytest.fixture
def backoff_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replaces the jittered backoff with no wait and records the attempts it was asked for."""
    calls: list[int] = []

    def no_wait(attempt: int, **_: Any) -> float:
        calls.append(attempt)
        return 0.0

    monkeypatch.setattr(engine.models._retry, "backoff_delay", no_wait)
    return calls


@asynccontextmanager
async def _open_client(
    fake: FakeOpenAI, stats: CallStats, throttle: Throttle | None = None, **spec_fields: Any
) -> AsyncIterator[ModelClient]:
    """A ModelClient wired the way `Runner._open_clients` wires one, closed on exit."""
    spec = ModelSpec(model=MODEL, base_url=fake.base_url, api_key_env=KEY_ENV, **spec_fields)
    model = OpenAIChatModel(spec)
    try:
        if throttle is None:
            throttle = Throttle(rpm=spec.rpm, tpm=spec.tpm, max_in_flight=spec.max_concurrency)
        yield ModelClient("tutor", spec, model, throttle, stats)
    finally:
        await model.aclose()


def _retry_counts(fake: FakeOpenAI) -> list[str | None]:
    return [seen.headers.get("x-stainless-retry-count") for seen in fake.seen]


async def test_429_with_retry_after_is_retried_after_the_servers_wait(backoff_calls: list[int]) -> None:
    """A 429 with retry-after 0.05 is retried once, no sooner than 0.05 s later, then the 200 is returned."""
    stats = CallStats()
    script = [Reply(status=429, error_code="rate_limit_exceeded", headers={"retry-after": "0.05"}), Reply(content="54")]
    async with FakeOpenAI(script) as fake, _open_client(fake, stats) as client:
        reply, latency = await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert reply.text == "54" and latency >= 0.0
    assert len(fake.seen) == 2 and fake.errors == []
    assert fake.seen[1].at - fake.seen[0].at >= 0.05
    assert stats.requests == 2 and stats.retries == 1 and stats.failures == 0
    assert stats.retries_by_kind == {"rate_limited": 1}
    assert backoff_calls == []  # the server's wait replaced the jittered backoff
    assert _retry_counts(fake) == ["0", "0"]


@pytest.mark.parametrize(
    ("first", "kind"),
    [
        pytest.param(reply, kind, id=kind)
        for reply, kind in [
            (Reply(status=500), "http_500"),
            (Reply(status=502), "http_502"),
            (Reply(status=503), "http_503"),
            (Reply(status=408), "http_408"),
            (Reply(status=409), "http_409"),
            (Reply(status=429, error_code="rate_limit_exceeded"), "rate_limited"),
            (Reply(drop=True), "connection"),
            (Reply(delay_s=1.0), "timeout"),
        ]
    ],
)
async def test_transient_failure_then_success(first: Reply, kind: str, backoff_calls: list[int]) -> None:
    """A transient failure without Retry-After is retried after the jittered backoff, and the retry succeeds."""
    stats = CallStats()
    timeout_s = 0.3 if first.delay_s else 60.0
    async with (
        FakeOpenAI([first, Reply(content="fifty four")]) as fake,
        _open_client(fake, stats, timeout_s=timeout_s) as client,
    ):
        reply, _ = await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert reply.text == "fifty four"
    assert len(fake.seen) == 2 and fake.errors == []
    assert stats.retries == 1 and stats.retries_by_kind == {kind: 1} and stats.failures == 0
    assert backoff_calls == [0]
    assert _retry_counts(fake) == ["0", "0"]


async def test_usage_is_counted_once_for_the_successful_attempt(backoff_calls: list[int]) -> None:
    """Token counters take the successful reply's usage; failed attempts count as requests only."""
    stats = CallStats()
    async with FakeOpenAI([Reply(status=500), Reply(content="fifty four")]) as fake, _open_client(fake, stats) as c:
        reply, _ = await c.complete(MESSAGES, context=CONTEXT, seed=1)
    assert reply.usage.prompt_tokens == 5 and reply.usage.completion_tokens == 2
    assert stats.prompt_tokens == 5 and stats.completion_tokens == 2 and stats.requests == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_final_status_fails_after_one_request(status: int, backoff_calls: list[int]) -> None:
    """A 400-class error other than 408/409/429 is raised after a single request."""
    stats = CallStats()
    async with FakeOpenAI([Reply(status=status)]) as fake, _open_client(fake, stats) as client:
        with pytest.raises(ProviderError) as raised:
            await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert raised.value.status == status and type(raised.value) is ProviderError
    assert len(fake.seen) == 1
    assert stats.requests == 1 and stats.retries == 0 and stats.failures == 1
    assert backoff_calls == []


async def test_retries_stop_at_max_retries(backoff_calls: list[int]) -> None:
    """With max_retries=2 and a server that always answers 503, exactly 3 requests are made, then it raises."""
    stats = CallStats()
    async with FakeOpenAI(default=Reply(status=503)) as fake, _open_client(fake, stats, max_retries=2) as client:
        with pytest.raises(ProviderError) as raised:
            await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert raised.value.status == 503
    assert len(fake.seen) == 3 and _retry_counts(fake) == ["0", "0", "0"]
    assert stats.requests == 3 and stats.retries == 2 and stats.failures == 1
    assert stats.retries_by_kind == {"http_503": 2}
    assert backoff_calls == [0, 1]


async def test_max_retries_zero_makes_one_request(backoff_calls: list[int]) -> None:
    """max_retries=0 turns retrying off: a transient failure is raised after one request."""
    stats = CallStats()
    async with FakeOpenAI(default=Reply(status=500)) as fake, _open_client(fake, stats, max_retries=0) as client:
        with pytest.raises(ProviderError):
            await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert len(fake.seen) == 1 and stats.retries == 0 and stats.failures == 1


async def test_quota_exhaustion_is_final_and_fails_later_calls_without_a_request(backoff_calls: list[int]) -> None:
    """insufficient_quota fails after one request and marks the throttle, so the next call never reaches the server."""
    stats = CallStats()
    throttle = Throttle()
    async with (
        FakeOpenAI([Reply(status=429, error_code="insufficient_quota")]) as fake,
        _open_client(fake, stats, throttle) as client,
    ):
        with pytest.raises(QuotaExhausted) as first:
            await client.complete(MESSAGES, context=CONTEXT, seed=1)
        assert len(fake.seen) == 1
        assert throttle.exhausted is first.value
        with pytest.raises(QuotaExhausted) as second:
            await client.complete(MESSAGES, context=CONTEXT, seed=2)
    assert second.value.model == first.value.model
    assert len(fake.seen) == 1
    assert stats.requests == 1 and stats.retries == 0 and stats.failures == 2
    assert backoff_calls == []


async def test_per_attempt_timeout_is_retried_then_raised(backoff_calls: list[int]) -> None:
    """With timeout_s=0.2, a server that takes 1 s and max_retries=1, the call times out after 2 requests."""
    stats = CallStats()
    async with (
        FakeOpenAI(default=Reply(delay_s=1.0)) as fake,
        _open_client(fake, stats, timeout_s=0.2, max_retries=1) as client,
    ):
        with pytest.raises(ProviderTimeout):
            await client.complete(MESSAGES, context=CONTEXT, seed=1)
    assert len(fake.seen) == 2 and _retry_counts(fake) == ["0", "0"]
    assert stats.retries_by_kind == {"timeout": 1} and stats.failures == 1


async def test_request_context_is_never_sent() -> None:
    """The body sent to the provider holds only chat-completion fields, none of the engine's RequestContext."""
    item = Item(id="item-CTX1", domain="mathematics", question="6 × 9?", answer="ANSWER-54-CTX", solution="SOL-CTX")
    context = RequestContext(
        role="judge",
        item=item,
        task="TASK-CTX-harm",
        condition={"dimension": "COND-CTX"},
        data={"pressure": "DATA-CTX"},
    )
    stats = CallStats()
    async with FakeOpenAI() as fake, _open_client(fake, stats, params={"temperature": 0.2, "max_tokens": 32}) as c:
        await c.complete(MESSAGES, context=context, seed=11, json_output=True)
    (seen,) = fake.seen
    assert set(seen.body) == {"model", "messages", "seed", "response_format", "temperature", "max_tokens"}
    assert seen.body["messages"] == MESSAGES
    raw = json.dumps(seen.body)
    for marker in ("item-CTX1", "ANSWER-54-CTX", "SOL-CTX", "TASK-CTX", "COND-CTX", "DATA-CTX", "judge"):
        assert marker not in raw
    assert not any("CTX" in value for value in seen.headers.values())
