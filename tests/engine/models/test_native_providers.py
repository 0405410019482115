"""Native providers over real HTTP on loopback: Anthropic's Messages API (a fake that checks its rules) and one
LiteLLM route (to the OpenAI-compatible fake). Each is an optional extra; its tests skip when it is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from engine.cli._main import main
from engine.core._errors import ProviderError, QuotaExhausted, RateLimited
from engine.models._provider import PROVIDERS, ChatRequest, RequestContext
from engine.scenario._spec import ModelSpec
from tests.engine.runtime.test_secrets_and_damage import _scan
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import scenario_data, write_bank

KEY = "sk-ant-PLANTED-native-key-99"
KEY_ENV = "SIMRUN_ANTHROPIC_TEST_KEY"
needs_anthropic = pytest.mark.skipif(importlib.util.find_spec("anthropic") is None, reason="the anthropic extra")
needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm extra")
MESSAGES = [
    {"role": "system", "content": "Be a tutor."},
    {"role": "assistant", "content": "What is 6 x 9?"},
    {"role": "user", "content": "Is it 56?"},
]


def _fairness(max_turns: int) -> dict[str, Any]:
    """A small fairness scenario on the bank, the tutor left for the test to set."""
    return {
        "name": "fair",
        "kind": "fairness",
        "seed": 3,
        "factors": {},
        "items": [{"source": "bank", "path": "bank.yaml"}],
        "student": {"strategy": "persona", "max_turns": max_turns},
        "judges": ["turn_quality", "conversation_stats"],
        "models": {"student": "sim/student", "judge": ["sim/judge"]},
    }


def _tutor_says(body: dict[str, Any]) -> str:
    return f"Turn {len(body['messages'])}: not quite. What is 6 x 10, then take one 6 away?"


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _records(out: Path) -> list[dict[str, Any]]:
    (run,) = out.iterdir()
    return [orjson.loads(line) for line in (run / "episodes.jsonl").read_bytes().splitlines()]


@needs_anthropic
async def test_anthropic_sends_the_messages_api_shape_and_reads_text_and_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with FakeAnthropic(_tutor_says, key=KEY) as fake:
        spec = ModelSpec(model="anthropic/claude-fake", base_url=fake.base_url, api_key_env=KEY_ENV)
        model = PROVIDERS.get("anthropic")()(spec)
        try:
            request = ChatRequest(messages=MESSAGES, context=RequestContext(role="tutor"), json_output=True)
            reply = await model.complete(request)
            listed = await model.list_models()  # type: ignore[attr-defined]
        finally:
            await model.aclose()
    body = fake.seen[0]
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"], "starts with the user"
    assert body["system"].startswith("Be a tutor.") and "JSON" in body["system"] and body["max_tokens"] == 1024
    assert reply.text.startswith("Turn 3:") and reply.usage.completion_tokens == len(reply.text.split())
    assert listed == ["claude-fake"]


@needs_anthropic
@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ((429, "rate_limit_error"), RateLimited),
        ((400, "billing_error"), QuotaExhausted),
        ((529, "overloaded_error"), ProviderError),
    ],
)
async def test_anthropic_errors_map_into_simruns_classes(
    monkeypatch: pytest.MonkeyPatch, answer: tuple[int, str], error: type[ProviderError]
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with FakeAnthropic(lambda body: answer, key=KEY) as fake:
        spec = ModelSpec(model="anthropic/claude-fake", base_url=fake.base_url, api_key_env=KEY_ENV)
        model = PROVIDERS.get("anthropic")()(spec)
        try:
            with pytest.raises(ProviderError) as raised:
                await model.complete(ChatRequest(messages=MESSAGES, context=RequestContext(role="tutor")))
        finally:
            await model.aclose()
    assert type(raised.value) is error and raised.value.status == answer[0]
    assert len(fake.seen) == 1, "the SDK's own retries are off"


@needs_anthropic
@pytest.mark.parametrize("kind", ["crescendo", "fairness"])
def test_a_run_with_an_anthropic_tutor_completes_and_keeps_the_key_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    echo = lambda body: _tutor_says(body) + f" (key {KEY})"  # noqa: E731 - a leaky proxy echoes the key
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeAnthropic(echo, key=KEY)) as fake:
        tutor = {"model": "anthropic/claude-fake", "base_url": fake.base_url, "api_key_env": KEY_ENV}
        data = scenario_data(limit=6, concurrency=3)
        if kind == "fairness":
            data = _fairness(max_turns=6)
        data["models"]["tutor"] = tutor
        data["prices"] = {"anthropic/claude-fake": {"input": 3.0, "output": 15.0}}
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs"), "--max-cost", "50"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    records = _records(tmp_path / "runs")
    assert records and all(r["status"] == "ok" for r in records)
    assert any(t["model"] == "anthropic/claude-fake" for r in records for t in r["turns"])
    assert _scan([tmp_path], [KEY]) == [] and KEY not in printed.out + printed.err


@needs_anthropic
def test_max_cost_holds_a_run_whose_tutor_is_an_anthropic_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Priced by the bundled price data (no `prices:` in the scenario): a tiny limit stops admitting episodes."""
    monkeypatch.setenv(KEY_ENV, KEY)
    long = lambda body: " ".join(["word"] * 2000)  # noqa: E731 - an expensive reply
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(FakeAnthropic(long, key=KEY, models=("claude-sonnet-4-5",))) as fake,
    ):
        data = scenario_data(limit=30, concurrency=1)
        data["models"]["tutor"] = {
            "model": "anthropic/claude-sonnet-4-5",
            "base_url": fake.base_url,
            "api_key_env": KEY_ENV,
        }
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs"), "--max-cost", "0.05"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 130 and "cost budget reached" in err
    assert len(_records(tmp_path / "runs")) < 30


@needs_litellm
async def test_a_litellm_route_reaches_an_openai_compatible_server_without_retrying() -> None:
    async with FakeOpenAI([Reply(content="hello from the route"), Reply(status=503)]) as fake:
        spec = ModelSpec(model="litellm/openai/fake-model", base_url=fake.base_url, params={"temperature": 0.2})
        model = PROVIDERS.get("litellm")()(spec)
        try:
            context = RequestContext(role="judge")
            request = ChatRequest(messages=MESSAGES, context=context, seed=5, json_output=True, params=spec.params)
            reply = await model.complete(request)
            with pytest.raises(ProviderError) as raised:
                await model.complete(request)
        finally:
            await model.aclose()
    body = fake.seen[0].body
    assert body["model"] == "fake-model" and body["temperature"] == 0.2 and body["seed"] == 5
    assert body["response_format"] == {"type": "json_object"}
    assert reply.text == "hello from the route" and reply.usage.completion_tokens == 4
    assert raised.value.status == 503 and len(fake.seen) == 2, "LiteLLM's own retries are off"


@needs_litellm
def test_a_misnamed_model_on_a_litellm_route_stops_the_run_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LiteLLM has no model list: the probe's one-token call gets the server's 400 and reads its message."""
    unknown = {"error": {"message": "Invalid model name passed in model=gpt-4o-typo", "type": "None", "code": "400"}}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(FakeOpenAI(lambda body: Reply(status=400, body=unknown))) as fake,
    ):
        data = scenario_data(limit=2)
        data["models"]["tutor"] = {"model": "litellm/openai/gpt-4o-typo", "base_url": fake.base_url}
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "does not know this model" in err, err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@needs_litellm
@pytest.mark.parametrize("kind", ["crescendo", "fairness"])
def test_a_run_with_a_litellm_tutor_completes(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """The tutor on a LiteLLM route to an OpenAI-compatible server; students and judges on the simulator."""
    reply = Reply(content="Good start. What is the first step? Try it and tell me what you get.")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeOpenAI([], default=reply)) as fake:
        tutor = {"model": "litellm/openai/fake-model", "base_url": fake.base_url}
        data = scenario_data(limit=4, concurrency=2)
        if kind == "fairness":
            data = _fairness(max_turns=4)
        data["models"]["tutor"] = tutor
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
        calls = len(fake.seen)
    assert code == 0, capsys.readouterr().err
    records = _records(tmp_path / "runs")
    assert records and all(r["status"] == "ok" for r in records)
    assert calls > len(records), "every tutor turn went through the route"
