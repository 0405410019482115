"""The `http` tutor target against a stateful tutoring product over real HTTP on loopback (tests/fakes/tutor_app)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from engine.cli._main import main
from engine.core._errors import ProviderError
from engine.models._endpoints import open_endpoints
from engine.models._http import HttpChatModel
from engine.models._provider import ChatRequest, RequestContext
from engine.scenario._spec import ModelSpec
from tests.engine.runtime.test_secrets_and_damage import _scan
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.tutor_app import TutorApp
from tests.helpers import scenario_data, write_bank

KEY = "tk-PLANTED/tutor+key=42"
KEY_ENV = "SIMRUN_TUTOR_APP_KEY"

DOC = Path(__file__).resolve().parents[3] / "docs" / "http-tutor.md"


def _documented_target() -> dict[str, Any]:
    """The tutor entry of docs/http-tutor.md's example: the page shows exactly what these tests run."""
    block = DOC.read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    params: dict[str, Any] = yaml.safe_load(block)["models"]["tutor"]["params"]
    return params


SESSION_TARGET = _documented_target()


def _spec(base_url: str, **params: Any) -> ModelSpec:
    return ModelSpec(
        model="http/tutor-app", base_url=base_url, api_key_env=KEY_ENV, params={**SESSION_TARGET, **params}
    )


def _request(*students: str, replies: tuple[str, ...] = (), episode: str = "e1") -> ChatRequest:
    messages = [{"role": "system", "content": "Be kind."}]
    for index, text in enumerate(students):
        messages.append({"role": "user", "content": text})
        if index < len(students) - 1:
            messages.append({"role": "assistant", "content": replies[index] if index < len(replies) else "ok"})
    return ChatRequest(messages=messages, context=RequestContext(role="tutor", episode_id=episode))


async def test_a_session_sends_only_the_new_message_and_reads_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with TutorApp(key=KEY) as app:
        model = HttpChatModel(_spec(app.base_url))
        try:
            replies = []
            for turn in range(1, 5):
                students = [f"step {n}" for n in range(1, turn + 1)]
                replies.append(await model.complete(_request(*students)))
        finally:
            await model.aclose()
    assert [body["message"] for body in app.requests] == ["step 1", "step 2", "step 3", "step 4"]
    assert [body["session_id"] for body in app.requests] == ["", "s1", "s1", "s1"], "the product named the session"
    assert list(app.sessions) == ["s1"] and len(app.sessions["s1"].history) == 4
    assert all("messages" not in body for body in app.requests)
    assert replies[2].text == app.sessions["s1"].history[2][1], "the third reply streamed and was read whole"
    assert replies[0].text.startswith("Turn 1:") and replies[3].text.startswith("Turn 4:")
    assert replies[1].usage.completion_tokens == len(replies[1].text.split())
    assert replies[2].usage.completion_tokens == len(replies[2].text.split()), "usage from the stream's last event"


async def test_a_rewound_dialogue_opens_a_new_session_and_replays_the_kept_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with TutorApp(key=KEY, stream_every=1000) as app:
        model = HttpChatModel(_spec(app.base_url))
        try:
            await model.complete(_request("a"))
            await model.complete(_request("a", "b"))
            # the protocol hid the exchange "b" and asks again with "c": the product's session still holds "b"
            reply = await model.complete(_request("a", "c"))
            await model.complete(_request("a", "c", "d"))
            await model.complete(_request("x", episode="e2"))
        finally:
            await model.aclose()
    assert [[s for s, _ in session.history] for session in app.sessions.values()] == [
        ["a", "b"],
        ["a", "c", "d"],
        ["x"],
    ]
    assert reply.text.startswith("Turn 2:")
    assert reply.usage.prompt_tokens > 0, "the replayed turn's tokens are counted with the reply"


async def test_a_client_named_session_and_a_failed_call_abandons_its_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    async with TutorApp(key=KEY, stream_every=1000) as app:
        model = HttpChatModel(_spec(app.base_url, session="client"))
        try:
            await model.complete(_request("a"))
            monkeypatch.setenv(KEY_ENV, "wrong")
            model._key = "wrong"  # the product starts refusing the key mid-dialogue
            with pytest.raises(ProviderError) as refused:
                await model.complete(_request("a", "b"))
            model._key = KEY
            await model.complete(_request("a", "b"))
        finally:
            await model.aclose()
    assert refused.value.status == 401
    first, second = (body["session_id"] for body in (app.requests[0], app.requests[-1]))
    assert len(first) == 32 and first != second, "after a failure the episode continues in a new session"
    assert [s for s, _ in app.sessions[second].history] == ["a", "b"]


async def test_a_stateless_target_sends_the_conversation_as_json() -> None:
    """An OpenAI-compatible server reached through the http target: the whole history in each request."""
    async with FakeOpenAI([Reply(content="hello there")]) as fake:
        spec = ModelSpec(
            model="http/fake",
            base_url=fake.base_url,
            params={
                "url": "{{ base_url }}/chat/completions",
                "body": {"model": "{{ model }}", "messages": "{{ messages }}", "user": "{{ episode.id }}"},
                "reply": "$.choices[0].message.content",
                "usage": {"prompt_tokens": "$.usage.prompt_tokens", "completion_tokens": "$.usage.completion_tokens"},
            },
        )
        model = HttpChatModel(spec)
        try:
            reply = await model.complete(_request("one", "two", replies=("r1",), episode="ep-7"))
        finally:
            await model.aclose()
    body = fake.seen[0].body
    assert [m["content"] for m in body["messages"]] == ["Be kind.", "one", "r1", "two"]
    assert body["model"] == "fake" and body["user"] == "ep-7"
    assert reply.text == "hello there" and reply.usage.completion_tokens == 2


STATELESS: dict[str, Any] = {
    "url": "{{ base_url }}/chat/completions",
    "body": {"model": "{{ model }}", "messages": "{{ messages }}"},
    "reply": "$.choices[0].message.content",
}


async def test_status_codes_go_through_the_one_retry_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 503 and a 429 are retried by the engine's retry loop (the provider never retries); a 400 is final."""
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.0)
    script = [
        Reply(status=503),
        Reply(status=429, headers={"retry-after": "0"}),
        Reply(content="third time"),
        Reply(status=400),
    ]
    async with FakeOpenAI(script) as fake:
        spec = ModelSpec(model="http/fake", base_url=fake.base_url, params=STATELESS)
        async with open_endpoints([("tutor", spec)]) as endpoints:
            client = endpoints.client("tutor", spec)
            messages = [{"role": "user", "content": "hi"}]
            reply, _ = await client.complete(messages, context=RequestContext(role="tutor"), seed=1)
            with pytest.raises(ProviderError) as final:
                await client.complete(messages, context=RequestContext(role="tutor"), seed=2)
    assert reply.text == "third time" and endpoints.stats.retries == 2
    assert final.value.status == 400 and len(fake.seen) == 4


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _tutor(port: int, **params: Any) -> dict[str, Any]:
    target = {**SESSION_TARGET, **params}
    return {"model": "http/tutor-app", "base_url": f"http://127.0.0.1:{port}", "api_key_env": KEY_ENV, "params": target}


def _records(out: Path) -> list[dict[str, Any]]:
    (run,) = out.iterdir()
    return [orjson.loads(line) for line in (run / "episodes.jsonl").read_bytes().splitlines()]


def test_a_crescendo_run_against_the_product_completes_and_leaks_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(TutorApp(key=KEY, echo_key=True)) as app:
        data = scenario_data(limit=8, concurrency=4)
        data["models"]["tutor"] = _tutor(app.port)
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs"), "--cache"])
        requests = list(app.requests)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    records = _records(tmp_path / "runs")
    assert len(records) == 8 and all(r["status"] == "ok" for r in records)
    assert any(r["metrics"]["backtracks"] > 0 for r in records), "the attacker rewound some dialogues"
    assert all("messages" not in body for body in requests)
    assert "[redacted]" in (next((tmp_path / "runs").iterdir()) / "episodes.jsonl").read_text(encoding="utf-8")
    assert _scan([tmp_path], [KEY]) == [] and KEY not in printed.out + printed.err


def test_a_fairness_run_against_the_product_completes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(TutorApp(key=KEY)) as app:
        data = {
            "name": "fair",
            "kind": "fairness",
            "seed": 3,
            "factors": {},
            "models": {"tutor": _tutor(app.port), "student": "sim/student", "judge": ["sim/judge"]},
            "items": [{"source": "bank", "path": "bank.yaml"}],
            "student": {"strategy": "persona", "max_turns": 6},
            "judges": ["turn_quality", "conversation_stats"],
        }
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
        firsts = [b for b in app.requests if not b["session_id"] and b["message"] != "Say OK."]  # not the probe
    assert code == 0
    records = _records(tmp_path / "runs")
    assert records and all(r["status"] == "ok" for r in records)
    assert all(r["turns"][0]["model"] is None for r in records), "the protocol's own opening"
    assert len(firsts) == len(records), "one product session per episode"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"body": {"messages": "{{ messages }}"}}, "the product keeps the history"),
        ({"body": {"key": "{{ api_key }}"}}, "'api_key', which is not provided here"),
        ({"reply": "$.[[["}, "not a JSONPath"),
        ({"session_id": None}, "session: server reads the product's session id"),
    ],
)
def test_a_bad_target_is_refused_before_the_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    says: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    data = scenario_data()
    data["models"]["tutor"] = _tutor(9, **change)
    assert main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")]) == 2
    assert says in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "runs").exists()


def test_the_http_provider_serves_the_tutor_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = scenario_data()
    data["models"]["student"] = {"model": "http/x", "base_url": "http://127.0.0.1:9", "params": SESSION_TARGET}
    assert main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")]) == 2
    assert "serves the tutor role only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("probe", "key", "says"),
    [
        (None, "wrong", "the API key was refused (HTTP 401)"),
        ({"url": "{{ base_url }}/health", "headers": {"Authorization": "Bearer {{ api_key }}"}}, "wrong", "HTTP 401"),
        ({"url": "{{ base_url }}/nowhere", "headers": {"Authorization": "Bearer {{ api_key }}"}}, KEY, "HTTP 404"),
    ],
)
def test_the_probe_stops_a_run_the_product_refuses(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    probe: dict[str, Any] | None,
    key: str,
    says: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(TutorApp(key=KEY)) as app:
        data = scenario_data(limit=2)
        data["models"]["tutor"] = _tutor(app.port, probe=probe)
        code = main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")])
    assert code == 2
    assert says in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_probe_declared_off_sends_nothing_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(TutorApp(key=KEY)) as app:
        data = scenario_data(limit=1, factors={"dimension": ["cognitive"], "format": ["single"]})
        data["models"]["tutor"] = _tutor(app.port, probe=False)
        assert main([str(_write(tmp_path, data)), "--out", str(tmp_path / "runs")]) == 0
        sent = [body["message"] for body in app.requests]
    assert "Say OK." not in sent and len(sent) == 1
