"""The response cache: stable and sensitive keys, no cached errors, safe concurrent writers, zero-call re-runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from click.testing import CliRunner

import engine.models._client
import engine.models._retry
from engine import EpisodeRecord, Runner, ScenarioError, write_report
from engine.cli._cache import cache_group
from engine.core._errors import ProviderError, QuotaExhausted
from engine.core._records import Usage
from engine.models._cache import (
    CacheError,
    ResponseCache,
    cache_key,
    default_cache_path,
    resolve_cache_path,
)
from engine.models._client import CallStats, ModelClient
from engine.models._openai import OpenAIChatModel
from engine.models._provider import ChatModel, ChatReply, ChatRequest, Message, RequestContext
from engine.models._throttle import Throttle
from engine.runtime._rundir import RunDir
from engine.scenario._items import Item
from engine.scenario._spec import ModelSpec
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import make_scenario

ROOT = Path(__file__).resolve().parents[3]
SPEC = ModelSpec(model="openai/gpt-4o-mini", base_url="http://localhost:8000/v1", params={"temperature": 0.7})
MESSAGES: list[Message] = [{"role": "system", "content": "Tutor."}, {"role": "user", "content": "6 × 9?"}]
ITEM = Item(id="t-add", domain="mathematics", question="6 × 9?", answer="54")
OTHER_ITEM = ITEM.model_copy(update={"answer": "55"})
CONTEXT = RequestContext(role="tutor", item=ITEM, condition={"dimension": "cognitive"})
REQUEST = ChatRequest(messages=MESSAGES, context=CONTEXT, seed=42, params=dict(SPEC.params))
REPLY = ChatReply(text="What is 6 × 10?", usage=Usage(prompt_tokens=12, completion_tokens=5), model="gpt-4o-mini")


# -- keys ---------------------------------------------------------------------------------------------------------


def test_same_request_same_key() -> None:
    """A key is a pure function of the request: rebuilt objects, reordered dicts and tuples give the same key."""
    rebuilt = ChatRequest(
        messages=tuple({"content": m["content"], "role": m["role"]} for m in MESSAGES),
        context=RequestContext(role="tutor", item=ITEM.model_copy(), condition={"dimension": "cognitive"}),
        seed=42,
        params={"temperature": 0.7},
    )
    key = cache_key(SPEC, REQUEST)
    assert len(key) == 64 and int(key, 16) >= 0
    assert cache_key(SPEC, rebuilt) == key == cache_key(SPEC.model_copy(), REQUEST)


_CHANGES: dict[str, tuple[ModelSpec, ChatRequest, int | None]] = {
    "provider": (SPEC.model_copy(update={"model": "sim/gpt-4o-mini"}), REQUEST, None),
    "model": (SPEC.model_copy(update={"model": "openai/gpt-4o"}), REQUEST, None),
    "base_url": (SPEC.model_copy(update={"base_url": "http://localhost:8001/v1"}), REQUEST, None),
    "no base_url": (SPEC.model_copy(update={"base_url": None}), REQUEST, None),
    "message text": (SPEC, replace(REQUEST, messages=[MESSAGES[0], {"role": "user", "content": "6 × 8?"}]), None),
    "message role": (SPEC, replace(REQUEST, messages=[MESSAGES[0], {"role": "assistant", "content": "6 × 9?"}]), None),
    "one more message": (SPEC, replace(REQUEST, messages=[*MESSAGES, {"role": "user", "content": "ok"}]), None),
    "param value": (SPEC, replace(REQUEST, params={"temperature": 0.2}), None),
    "extra param": (SPEC, replace(REQUEST, params={"temperature": 0.7, "max_tokens": 300}), None),
    "json_output": (SPEC, replace(REQUEST, json_output=True), None),
    "seed (call, episode, replicate)": (SPEC, replace(REQUEST, seed=43), None),
    "context role": (SPEC, replace(REQUEST, context=replace(CONTEXT, role="judge")), None),
    "context task": (SPEC, replace(REQUEST, context=replace(CONTEXT, task="harm")), None),
    "context item": (SPEC, replace(REQUEST, context=replace(CONTEXT, item=OTHER_ITEM)), None),
    "context condition": (SPEC, replace(REQUEST, context=replace(CONTEXT, condition={"dimension": "epistemic"})), None),
    "context data": (SPEC, replace(REQUEST, context=replace(CONTEXT, data={"pressure": "just tell me"})), None),
    "explicit replicate": (SPEC, REQUEST, 1),
}


def test_every_keyed_field_changes_the_key() -> None:
    """Changing any keyed field gives a new key, and no two of the changed requests collide."""
    keys = {name: cache_key(spec, request, replicate) for name, (spec, request, replicate) in _CHANGES.items()}
    base = cache_key(SPEC, REQUEST)
    assert [name for name, key in keys.items() if key == base] == []
    assert len(set(keys.values())) == len(keys)
    assert cache_key(SPEC, REQUEST, 0) != cache_key(SPEC, REQUEST, 1)


def test_fields_that_change_no_reply_are_not_keyed() -> None:
    """Keys, timeouts, retries and limits change no reply; a trailing slash names the same endpoint."""
    same = SPEC.model_copy(
        update={"api_key_env": "OTHER_KEY", "timeout_s": 5.0, "max_retries": 0, "rpm": 10.0, "max_concurrency": 2}
    )
    slash = SPEC.model_copy(update={"base_url": "http://localhost:8000/v1/"})
    assert cache_key(same, REQUEST) == cache_key(slash, REQUEST) == cache_key(SPEC, REQUEST)


def test_a_context_without_canonical_form_is_not_keyed() -> None:
    """A value orjson cannot encode canonically makes the call uncacheable instead of guessing a key."""
    with pytest.raises(TypeError):
        cache_key(SPEC, replace(REQUEST, context=replace(CONTEXT, data={"odd": object()})))


# -- the store ----------------------------------------------------------------------------------------------------


def test_put_get_round_trip_and_counters(tmp_path: Path) -> None:
    """A stored reply comes back equal (usage extras included); the first reply of a key is kept."""
    path = tmp_path / "nested" / "cache.sqlite3"
    reply = ChatReply(text="hi", usage=Usage.model_validate({"prompt_tokens": 3, "cached_tokens": 1}), model="m")
    with ResponseCache(path) as cache:
        assert cache.get_sync("k") is None
        cache.put_sync("k", reply)
        cache.put_sync("k", ChatReply(text="other", usage=Usage(), model="m"))
        assert cache.get_sync("k") == reply
        stats = cache.stats()
    assert stats["entries"] == 1 and stats["hits"] == 1 and stats["misses"] == 1 and stats["bytes"] > 0
    assert stats["by_model"] == {"m": 1} and stats["path"] == str(path)
    assert cache.closed
    cache.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        cache.get_sync("k")
    with ResponseCache(path) as reopened:
        assert reopened.get_sync("k") == reply, "entries outlive the process that wrote them"


def test_wal_mode_and_busy_timeout(tmp_path: Path) -> None:
    """The file is in WAL mode (persistent, seen by any other connection) with a busy timeout set."""
    path = tmp_path / "c.sqlite3"
    with ResponseCache(path, busy_timeout_s=7.5) as cache:
        conn = cache._open_connection()
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 7500
        other = sqlite3.connect(path)
        try:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            other.close()


def test_clear_removes_everything(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        for index in range(5):
            cache.put_sync(f"k{index}", REPLY)
        assert cache.clear() == 5
        assert cache.stats()["entries"] == 0 and cache.get_sync("k0") is None


def test_a_bad_file_is_a_cache_error(tmp_path: Path) -> None:
    """A directory or a file that is not SQLite is a user error (a ScenarioError), not a traceback."""
    garbage = tmp_path / "not-a-db.sqlite3"
    garbage.write_bytes(b"this is not a database" * 100)
    for path in (tmp_path, garbage):
        with pytest.raises(CacheError) as caught:
            ResponseCache(path)
        assert isinstance(caught.value, ScenarioError) and str(path) in str(caught.value)


async def test_many_concurrent_tasks_share_one_cache(tmp_path: Path) -> None:
    """Hundreds of concurrent gets and puts from one event loop: all land, none fail, counters add up."""
    async with await ResponseCache.open(tmp_path / "c.sqlite3") as cache:

        async def one(index: int) -> None:
            assert await cache.get(f"k{index}") is None
            await cache.put(f"k{index}", replace(REPLY, text=f"reply {index}"))
            got = await cache.get(f"k{index}")
            assert got is not None and got.text == f"reply {index}"

        async with anyio.create_task_group() as group:
            for index in range(300):
                group.start_soon(one, index)
        stats = await anyio.to_thread.run_sync(cache.stats)
    assert stats["entries"] == 300 and stats["hits"] == 300 and stats["misses"] == 300


_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from engine.models._cache import ResponseCache
    from engine.models._provider import ChatReply
    from engine.core._records import Usage

    path, name, count, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    (go.parent / f"ready-{name}").touch()
    while not go.exists():
        time.sleep(0.001)
    with ResponseCache(path) as cache:  # both processes also open (and set up) the file at the same moment
        for index in range(count):
            cache.put_sync(f"{name}-{index}", ChatReply(text=f"{name} {index}", usage=Usage(), model=name))
            cache.put_sync(f"shared-{index}", ChatReply(text=f"shared by {name}", usage=Usage(), model="shared"))
            assert cache.get_sync(f"{name}-{index}") is not None
    """
)


def test_two_processes_write_one_file_at_once(tmp_path: Path) -> None:
    """Two processes open and write the same new file simultaneously (same keys too): no errors, every row."""
    path, go, count = tmp_path / "shared.sqlite3", tmp_path / "go", 400
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), name, str(count), str(go)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{name}").exists() for name in ("a", "b")) and time.monotonic() < deadline:
            time.sleep(0.005)
        go.touch()  # both are ready: release them together
        outputs = [writer.communicate(timeout=60) for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
    assert [writer.returncode for writer in writers] == [0, 0], [err.decode() for _, err in outputs]
    assert all(b"cache.error" not in out + err for out, err in outputs), "no write was skipped"
    with ResponseCache(path) as cache:
        stats = cache.stats()
        assert stats["by_model"] == {"a": count, "b": count, "shared": count}
        assert all(cache.get_sync(f"{name}-{i}") is not None for name in ("a", "b") for i in range(count))


# -- the client -----------------------------------------------------------------------------------------------------


class ScriptedModel(ChatModel):
    """Answers from a script of replies and exceptions, counting the calls that reached it."""

    def __init__(self, spec: ModelSpec, script: list[ChatReply | Exception]) -> None:
        super().__init__(spec)
        self.script, self.calls = script, 0

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        self.calls += 1
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return step


def _client(cache: ResponseCache, model: ChatModel, stats: CallStats, throttle: Throttle | None = None) -> ModelClient:
    return ModelClient("tutor", model.spec, model, throttle or Throttle(), stats, cache=cache)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.models._retry, "backoff_delay", lambda attempt, **_: 0.0)


async def test_a_hit_skips_the_model_and_the_throttle(tmp_path: Path) -> None:
    """The second identical call is answered from the cache: no model call, no throttle, latency 0.0."""
    stats, model = CallStats(), ScriptedModel(SPEC, [REPLY])
    throttle = Throttle()
    async with await ResponseCache.open(tmp_path / "c.sqlite3") as cache:
        client = _client(cache, model, stats, throttle)
        first, _ = await client.complete(MESSAGES, context=CONTEXT, seed=1)
        throttle.exhausted = QuotaExhausted(SPEC.model, "insufficient_quota")  # a slot would now raise at once
        second, latency = await client.complete(MESSAGES, context=CONTEXT, seed=1)
        assert second == first == REPLY and latency == 0.0
        assert model.calls == 1 and stats.requests == 1 and stats.cache_hits == 1
        assert stats.prompt_tokens == REPLY.usage.prompt_tokens, "a hit spends no tokens"
        with pytest.raises(QuotaExhausted):  # a miss still goes through the throttle
            await client.complete(MESSAGES, context=CONTEXT, seed=2)


async def test_errors_are_never_cached(tmp_path: Path, no_backoff: None) -> None:
    """A final ProviderError stores nothing; after retried failures only the successful reply is stored."""
    stats = CallStats()
    async with await ResponseCache.open(tmp_path / "c.sqlite3") as cache:
        failing = _client(cache, ScriptedModel(SPEC, [ProviderError(SPEC.model, "bad request", status=400)]), stats)
        with pytest.raises(ProviderError):
            await failing.complete(MESSAGES, context=CONTEXT, seed=1)
        assert cache.stats()["entries"] == 0 and stats.failures == 1

        flaky_model = ScriptedModel(SPEC, [ProviderError(SPEC.model, "oops", status=500), REPLY])
        flaky = _client(cache, flaky_model, stats)
        reply, _ = await flaky.complete(MESSAGES, context=CONTEXT, seed=1)
        assert reply == REPLY and flaky_model.calls == 2 and stats.retries == 1
        assert cache.stats()["entries"] == 1
        again, _ = await flaky.complete(MESSAGES, context=CONTEXT, seed=1)
        assert again == REPLY and flaky_model.calls == 2 and stats.cache_hits == 1


async def test_an_uncacheable_call_still_reaches_the_model(tmp_path: Path) -> None:
    stats, model = CallStats(), ScriptedModel(SPEC, [REPLY])
    context = replace(CONTEXT, data={"odd": object()})
    async with await ResponseCache.open(tmp_path / "c.sqlite3") as cache:
        client = _client(cache, model, stats)
        for _ in range(2):
            assert (await client.complete(MESSAGES, context=context, seed=1))[0] == REPLY
        assert model.calls == 2 and stats.cache_hits == 0 and cache.stats()["entries"] == 0


async def test_a_hit_makes_no_network_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over real HTTP: the fake OpenAI server sees the first call only."""
    monkeypatch.setenv("SIMRUN_TEST_KEY", "sk-simrun-test")
    stats = CallStats()
    async with FakeOpenAI([Reply(content="54")]) as fake, await ResponseCache.open(tmp_path / "c.sqlite3") as cache:
        spec = ModelSpec(model="openai/fake-model", base_url=fake.base_url, api_key_env="SIMRUN_TEST_KEY")
        model = OpenAIChatModel(spec)
        try:
            client = ModelClient("tutor", spec, model, Throttle(), stats, cache=cache)
            replies = [await client.complete(MESSAGES, context=CONTEXT, seed=9, json_output=True) for _ in range(3)]
        finally:
            await model.aclose()
    assert [reply.text for reply, _ in replies] == ["54"] * 3
    assert len(fake.seen) == 1 and stats.requests == 1 and stats.cache_hits == 2


# -- runs -------------------------------------------------------------------------------------------------------


def _content(run_dir: Path) -> dict[str, Any]:
    records: list[EpisodeRecord] = list(RunDir(run_dir).iter_records())
    return {
        r.id: (
            r.status,
            [(t.role, t.text, t.model, t.usage, t.visible_to_tutor) for t in r.turns],
            [j.model_dump() for j in r.judgments],
            r.metrics,
            r.usage,
        )
        for r in records
    }


def _summary(run_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    summary.pop("run")
    return summary


async def test_a_rerun_with_the_cache_calls_no_model_and_reproduces_the_records(tmp_path: Path) -> None:
    """Run a scenario, then run it again on the same cache: zero requests, and the same records and summary."""
    scenario, cache = make_scenario(tmp_path), tmp_path / "responses.sqlite3"
    first = await (runner1 := Runner(scenario, out=tmp_path / "a", cache=cache, report=write_report)).run()
    second = await (runner2 := Runner(scenario, out=tmp_path / "b", cache=cache, report=write_report)).run()
    assert first.ok == second.ok == 12
    assert runner1.stats.requests > 0 and runner1.stats.cache_hits == 0
    assert runner2.stats.requests == 0 and runner2.stats.cache_hits == runner1.stats.requests
    assert _content(first.run_dir) == _content(second.run_dir)
    assert _summary(first.run_dir) == _summary(second.run_dir)
    manifest = orjson.loads((second.run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["requests"] == 0 and manifest["calls"]["cache_hits"] == runner1.stats.requests
    with ResponseCache(cache) as opened:
        assert opened.stats()["entries"] == runner1.stats.requests


async def test_replicates_are_not_collapsed(tmp_path: Path) -> None:
    """Two replicates of one episode ask different keys: the cache holds one entry per request of both."""
    scenario = make_scenario(tmp_path, replicates=2, factors={"dimension": ["cognitive"], "format": ["multi"]})
    runner = Runner(scenario, out=tmp_path / "runs", cache=tmp_path / "c.sqlite3", report=write_report)
    result = await runner.run()
    assert result.ok == 6 and runner.stats.cache_hits == 0
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        assert cache.stats()["entries"] == runner.stats.requests


def test_where_the_cache_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Runner's setting wins over the scenario's; scenario paths are relative to the scenario's folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "simrun" / "responses.sqlite3"
    off, on, named = make_scenario(tmp_path), make_scenario(tmp_path, cache=True), make_scenario(tmp_path, cache="c.db")
    assert resolve_cache_path(None, off) is None and resolve_cache_path(False, on) is None
    assert resolve_cache_path(None, on) == resolve_cache_path(True, off) == default
    assert resolve_cache_path(None, named) == resolve_cache_path(True, named) == tmp_path / "c.db"
    assert resolve_cache_path(tmp_path / "cli.db", named) == tmp_path / "cli.db"
    assert default.exists() and (tmp_path / "c.db").exists(), "checked (opened once) before the run"
    assert Runner(named, out=tmp_path / "runs", report=write_report).cache_path == tmp_path / "c.db"
    assert Runner(named, out=tmp_path / "runs", cache=False, report=write_report).cache_path is None


def test_default_path_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_path() == tmp_path / "home" / ".cache" / "simrun" / "responses.sqlite3"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert default_cache_path() == tmp_path / "home" / ".cache" / "simrun" / "responses.sqlite3"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "simrun" / "responses.sqlite3"


def test_the_cache_setting_is_not_part_of_the_scenario_hash(tmp_path: Path) -> None:
    """Turning the cache on or off changes no result, so a run may be resumed either way."""
    hashes = {make_scenario(tmp_path, cache=value).content_hash() for value in (False, True, "c.db")}
    assert hashes == {make_scenario(tmp_path).content_hash()}
    with pytest.raises(ScenarioError, match="cache"):
        make_scenario(tmp_path, cache=" ")


def test_a_bad_cache_path_fails_before_the_run_directory_exists(tmp_path: Path) -> None:
    with pytest.raises(CacheError):
        Runner(make_scenario(tmp_path), out=tmp_path / "runs", cache=tmp_path, report=write_report).prepare()
    assert not (tmp_path / "runs").exists()


# -- command line ---------------------------------------------------------------------------------------------------


def test_cache_stats_and_clear_commands(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    cli = CliRunner()
    missing = cli.invoke(cache_group, ["stats", "--path", str(path)])
    assert missing.exit_code == 0 and "no response cache" in missing.output and not path.exists()
    with ResponseCache(path) as cache:
        for index in range(3):
            cache.put_sync(f"k{index}", replace(REPLY, model="gpt-4o-mini" if index else "gpt-4o"))
    shown = cli.invoke(cache_group, ["stats", "--path", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "entries: 3" in shown.output and "gpt-4o-mini: 2" in shown.output and str(path) in shown.output
    as_json = cli.invoke(cache_group, ["stats", "--path", str(path), "--json"])
    assert orjson.loads(as_json.output)["entries"] == 3
    cleared = cli.invoke(cache_group, ["clear", "--path", str(path)])
    assert cleared.exit_code == 0 and "removed 3 entries" in cleared.output
    assert "entries: 0" in cli.invoke(cache_group, ["stats", "--path", str(path)]).output


def test_cache_commands_use_the_default_path_and_reject_bad_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with ResponseCache() as cache:
        cache.put_sync("k", REPLY)
    assert "entries: 1" in CliRunner().invoke(cache_group, ["stats"]).output
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not sqlite" * 200)
    bad = CliRunner().invoke(cache_group, ["clear", "--path", str(garbage)])
    assert bad.exit_code == 2 and "garbage.sqlite3" in bad.output
