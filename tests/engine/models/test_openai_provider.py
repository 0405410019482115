"""The `openai` provider over real HTTP: request shape, reply parsing, error translation, credentials, secrecy.

Every test runs on both transports (the SDK and the lean aiohttp path): they must be indistinguishable to the engine.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog

import engine.models._client
import engine.models._retry
from engine.core._errors import MissingCredentials, ProviderError, ProviderTimeout, QuotaExhausted, RateLimited
from engine.models._client import CallStats, ModelClient
from engine.models._openai import OpenAIChatModel
from engine.models._provider import ChatRequest, Message, RequestContext
from engine.models._throttle import Throttle
from engine.scenario._spec import ModelSpec
from tests.fakes.openai_server import FakeOpenAI, Reply

KEY_ENV = "SIMRUN_TEST_KEY"
KEY = "sk-simrun-provider-test"
MODEL = "openai/fake-model"
TRANSPORT = "sdk"
MESSAGES: list[Message] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what is six times nine"},
]


@pytest.fixture(autouse=True, params=["sdk", "lean"])
def _api_key_and_transport(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(sys.modules[__name__], "TRANSPORT", request.param)


def _spec(fake: FakeOpenAI, **fields: Any) -> ModelSpec:
    return ModelSpec(model=MODEL, base_url=fake.base_url, api_key_env=KEY_ENV, transport=TRANSPORT, **fields)


def _request(*, seed: int = 0, json_output: bool = False, params: dict[str, Any] | None = None) -> ChatRequest:
    return ChatRequest(
        messages=MESSAGES, context=RequestContext(role="tutor"), seed=seed, json_output=json_output, params=params or {}
    )


@asynccontextmanager
async def _open_model(spec: ModelSpec) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel(spec)
    try:
        yield model
    finally:
        await model.aclose()


@asynccontextmanager
async def _open_client(spec: ModelSpec, stats: CallStats) -> AsyncIterator[ModelClient]:
    """A ModelClient wired the way `Runner._open_clients` wires one, closed on exit."""
    async with _open_model(spec) as model:
        throttle = Throttle(rpm=spec.rpm, tpm=spec.tpm, max_in_flight=spec.max_concurrency)
        yield ModelClient("tutor", spec, model, throttle, stats)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without a Retry-After happen at once instead of after up to 0.5 * 2**attempt seconds."""
    monkeypatch.setattr(engine.models._retry, "backoff_delay", lambda attempt, **_: 0.0)


# -- success -------------------------------------------------------------------------------------------------------


async def test_reply_text_usage_and_model() -> None:
    """A 200 gives the message text, the server's usage counts and the spec's full model id."""
    async with FakeOpenAI([Reply(content="fifty four")]) as fake, _open_model(_spec(fake)) as model:
        reply = await model.complete(_request())
    assert reply.text == "fifty four"
    assert reply.usage.prompt_tokens == 7 and reply.usage.completion_tokens == 2  # the fake counts words
    assert reply.model == MODEL
    assert fake.errors == []


async def test_request_body_carries_model_messages_seed_and_json_format() -> None:
    """The body names the model without its provider prefix and carries the messages, seed and json_object format."""
    async with FakeOpenAI() as fake, _open_model(_spec(fake)) as model:
        await model.complete(_request(seed=4321, json_output=True))
    (seen,) = fake.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body == {
        "model": "fake-model",
        "messages": MESSAGES,
        "seed": 4321,
        "response_format": {"type": "json_object"},
    }
    assert seen.headers["authorization"] == f"Bearer {KEY}"


async def test_no_response_format_without_json_output() -> None:
    """Plain chat calls do not ask for a JSON object."""
    async with FakeOpenAI() as fake, _open_model(_spec(fake)) as model:
        await model.complete(_request(seed=1))
    assert "response_format" not in fake.seen[0].body
    assert fake.seen[0].body["seed"] == 1


async def test_spec_params_are_passed_through() -> None:
    """Generation parameters from ModelSpec.params reach the server unchanged."""
    params = {"temperature": 0.25, "max_tokens": 64, "top_p": 0.9, "stop": ["\n\n"]}
    async with FakeOpenAI() as fake, _open_model(_spec(fake, params=params)) as model:
        await model.complete(_request(seed=3, params=params))
    body = fake.seen[0].body
    assert {key: body[key] for key in params} == params
    assert body["seed"] == 3


async def test_per_call_params_are_passed_through() -> None:
    """Params given to one ModelClient.complete call are sent, overriding the spec's."""
    stats = CallStats()
    async with FakeOpenAI() as fake, _open_client(_spec(fake, params={"temperature": 0.25}), stats) as client:
        await client.complete(MESSAGES, context=RequestContext(role="tutor"), seed=1, params={"temperature": 0.0})
    assert fake.seen[0].body["temperature"] == 0.0


# -- error translation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error_type", "status", "retry_after"),
    [
        pytest.param(
            Reply(status=429, error_code="rate_limit_exceeded", headers={"retry-after": "7"}),
            RateLimited,
            429,
            7.0,
            id="429-retry-after",
        ),
        pytest.param(
            Reply(status=429, error_code="rate_limit_exceeded", headers={"retry-after-ms": "250"}),
            RateLimited,
            429,
            0.25,
            id="429-retry-after-ms",
        ),
        pytest.param(Reply(status=429), RateLimited, 429, None, id="429-no-header"),
        pytest.param(Reply(status=429, error_code="insufficient_quota"), QuotaExhausted, 429, None, id="quota"),
        pytest.param(Reply(status=500), ProviderError, 500, None, id="500"),
        pytest.param(Reply(status=503, headers={"retry-after": "2"}), ProviderError, 503, 2.0, id="503-retry-after"),
        pytest.param(Reply(status=400), ProviderError, 400, None, id="400"),
        pytest.param(Reply(status=401, error_code="invalid_api_key"), ProviderError, 401, None, id="401"),
        pytest.param(Reply(drop=True), ProviderError, None, None, id="dropped"),
    ],
)
async def test_errors_are_translated(
    reply: Reply, error_type: type[ProviderError], status: int | None, retry_after: float | None
) -> None:
    """Each SDK failure becomes exactly one simrun error class, with the status and Retry-After it carried."""
    async with FakeOpenAI([reply]) as fake, _open_model(_spec(fake)) as model:
        with pytest.raises(ProviderError) as raised:
            await model.complete(_request())
    assert type(raised.value) is error_type
    assert raised.value.status == status
    assert raised.value.retry_after == (pytest.approx(retry_after) if retry_after is not None else None)
    assert raised.value.model == MODEL
    assert len(fake.seen) == 1 and fake.errors == []


async def test_dropped_connection_is_a_connection_error() -> None:
    """A connection closed without an answer is a retryable ProviderError of kind `connection`."""
    async with FakeOpenAI([Reply(drop=True)]) as fake, _open_model(_spec(fake)) as model:
        with pytest.raises(ProviderError) as raised:
            await model.complete(_request())
    assert raised.value.kind == "connection" and "connection failed" in str(raised.value)


async def test_slow_server_is_a_timeout() -> None:
    """A reply slower than timeout_s raises ProviderTimeout."""
    async with FakeOpenAI([Reply(delay_s=1.0)]) as fake, _open_model(_spec(fake, timeout_s=0.2)) as model:
        with pytest.raises(ProviderTimeout) as raised:
            await model.complete(_request())
    assert raised.value.status is None and raised.value.kind == "timeout"


# -- the SDK never retries -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "attempts"),
    [
        pytest.param(Reply(status=429, error_code="rate_limit_exceeded", headers={"retry-after": "0"}), 3, id="429"),
        pytest.param(Reply(status=429, error_code="insufficient_quota"), 1, id="quota"),
        pytest.param(Reply(status=500), 3, id="500"),
        pytest.param(Reply(status=503), 3, id="503"),
        pytest.param(Reply(status=408), 3, id="408"),
        pytest.param(Reply(status=409), 3, id="409"),
        pytest.param(Reply(status=400), 1, id="400"),
        pytest.param(Reply(drop=True), 3, id="dropped"),
        pytest.param(Reply(delay_s=1.0), 3, id="timeout"),
    ],
)
async def test_sdk_makes_no_retries_of_its_own(reply: Reply, attempts: int, no_backoff: None) -> None:
    """Each engine attempt is exactly one HTTP request, and the SDK marks every one as a first try."""
    stats = CallStats()
    spec_fields: dict[str, Any] = {"max_retries": 2, "timeout_s": 0.2 if reply.delay_s else 60.0}
    async with FakeOpenAI(default=reply) as fake, _open_client(_spec(fake, **spec_fields), stats) as client:
        with pytest.raises(ProviderError):
            await client.complete(MESSAGES, context=RequestContext(role="tutor"), seed=1)
    assert stats.requests == attempts
    assert len(fake.seen) == attempts
    if TRANSPORT == "sdk":
        assert [seen.headers.get("x-stainless-retry-count") for seen in fake.seen] == ["0"] * attempts


# -- credentials ---------------------------------------------------------------------------------------------------


def test_check_requires_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without base_url or api_key_env, OPENAI_API_KEY must be set; the error names the role and the variable."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentials) as raised:
        OpenAIChatModel.check(ModelSpec(model="openai/gpt-4o-mini"), "tutor")
    assert raised.value.role == "tutor" and raised.value.variable == "OPENAI_API_KEY"
    assert "'tutor'" in str(raised.value) and "OPENAI_API_KEY" in str(raised.value)


def test_check_treats_an_empty_key_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OPENAI_API_KEY set to the empty string counts as unset."""
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(MissingCredentials):
        OpenAIChatModel.check(ModelSpec(model="openai/gpt-4o-mini"), "judge")


def test_check_passes_with_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A set OPENAI_API_KEY satisfies the default spec."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    OpenAIChatModel.check(ModelSpec(model="openai/gpt-4o-mini"), "tutor")


def test_check_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A base_url without api_key_env (vLLM, Ollama) needs no key at all."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    OpenAIChatModel.check(ModelSpec(model="openai/llama3", base_url="http://localhost:11434/v1"), "student")


def test_check_explicit_key_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit api_key_env that is unset raises, naming that variable, even with a base_url."""
    monkeypatch.delenv("SIMRUN_UNSET_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")  # the default variable does not stand in for it
    spec = ModelSpec(model="openai/llama3", base_url="http://localhost:8000/v1", api_key_env="SIMRUN_UNSET_KEY")
    with pytest.raises(MissingCredentials) as raised:
        OpenAIChatModel.check(spec, "judge")
    assert raised.value.role == "judge" and raised.value.variable == "SIMRUN_UNSET_KEY"
    assert "SIMRUN_UNSET_KEY" in str(raised.value)


async def test_local_server_without_key_gets_a_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no key variable set for a local server, requests still go out (with a placeholder bearer token)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with FakeOpenAI() as fake:
        spec = ModelSpec(model=MODEL, base_url=fake.base_url, transport=TRANSPORT)
        async with _open_model(spec) as model:
            reply = await model.complete(_request())
    assert reply.text == "ok"
    assert fake.seen[0].headers["authorization"] == "Bearer unused"


# -- secrecy -------------------------------------------------------------------------------------------------------


async def test_api_key_never_appears_in_logs_or_errors(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, no_backoff: None
) -> None:
    """Retry and quota events, stdlib logs and the raised error never contain the API key."""
    secret = "sk-simrun-SECRET-4f1c9e27b"
    monkeypatch.setenv(KEY_ENV, secret)
    stats = CallStats()
    script = [Reply(status=500), Reply(drop=True), Reply(status=429, error_code="insufficient_quota")]
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with FakeOpenAI(script) as fake, _open_client(_spec(fake, max_retries=5), stats) as client:
            with pytest.raises(QuotaExhausted) as raised:
                await client.complete(MESSAGES, context=RequestContext(role="tutor"), seed=1)
    assert fake.seen[0].headers["authorization"] == f"Bearer {secret}"  # the key was really in use
    assert [event["event"] for event in events] == ["provider.retry", "provider.retry", "provider.quota_exhausted"]
    assert all(secret not in repr(event) for event in events)
    assert secret not in caplog.text
    assert all(secret not in repr(record.__dict__) for record in caplog.records)
    assert secret not in str(raised.value) and secret not in repr(raised.value.__cause__)
