"""Through a proxy: a 400 that says the model or the key is unknown stops the run before it starts, and an
endpoint whose every attempt fails the same way opens its breaker without spending every call's retries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from engine.cli._main import main
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import scenario_data, write_bank

KEY_ENV = "SIMRUN_PROXY_TEST_KEY"
LITELLM_MODEL = {
    "error": {
        "message": "{'error': '/chat/completions: Invalid model name passed in model=gpt-4o-typo. Call `/v1/models` "
        "to view available models for your key.'}",
        "type": "None",
        "param": "None",
        "code": "400",
    }
}
LITELLM_KEY = {
    "error": {
        "message": "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided",
        "type": None,
        "param": None,
        "code": "400",
    }
}
VLLM_MODEL = {
    "object": "error",
    "message": "The model `gpt-4o-typo` does not exist.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _tutor(base_url: str, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-typo", "base_url": base_url, "api_key_env": KEY_ENV, **extra}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (LITELLM_MODEL, "does not know this model"),
        (VLLM_MODEL, "does not know this model"),
        (LITELLM_KEY, "the key was refused"),
    ],
)
def test_a_proxy_400_naming_the_model_or_key_stops_the_run_before_it_starts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: dict[str, Any],
    says: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-proxy")

    def script(request: dict[str, Any]) -> Reply:
        return Reply(status=400, body=body) if request.get("model") == "gpt-4o-typo" else Reply(content="OK")

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeOpenAI(script)) as fake:
        data = scenario_data(limit=2)
        data["models"]["tutor"] = _tutor(fake.base_url)
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert says in err and "tutor model openai/gpt-4o-typo" in err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_400_about_something_else_does_not_stop_the_run_at_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 400 the probe's one-token call provokes (a parameter the server rejects) is a warning, not a verdict."""
    monkeypatch.setenv(KEY_ENV, "sk-proxy")
    calls = {"n": 0}

    def script(request: dict[str, Any]) -> Reply:
        calls["n"] += 1
        if calls["n"] == 1:
            return Reply(status=400, body={"error": {"message": "max_tokens must be at least 16", "code": None}})
        return Reply(content="OK")

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeOpenAI(script)) as fake:
        data = scenario_data(limit=1, factors={"dimension": ["cognitive"], "format": ["single"]})
        data["models"] = {"tutor": _tutor(fake.base_url), "student": "sim/student", "judge": ["sim/judge"]}
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
    assert code == 0
    assert "the probe call failed" in " ".join(capsys.readouterr().err.split())


def test_every_attempt_failing_alike_opens_the_breaker_before_the_calls_spend_their_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dead backend behind a proxy: each attempt gets the same 502. With 20 retries a call, five calls in a row
    would take 105 attempts to open the breaker; forty identical attempts open it first."""
    monkeypatch.setenv(KEY_ENV, "sk-proxy")
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.0)
    dead = {"error": {"message": "litellm.APIConnectionError: Connection refused (backend 10.0.0.7:8000)"}}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(FakeOpenAI(lambda request: Reply(status=502, body=dead))) as fake,
    ):
        data = scenario_data(limit=12, concurrency=4)
        data["models"]["tutor"] = _tutor(fake.base_url, max_retries=20)
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs"), "--no-probe"])
        attempts = len(fake.seen)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 130
    assert "attempts in a row failed the same way" in err
    assert attempts < 105
