"""Fault injection over real HTTP: a run against a misbehaving endpoint loses nothing and duplicates nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog

import engine
from engine.runtime._rundir import RunDir
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import make_scenario

KEY_ENV = "SIMRUN_FAULT_TEST_KEY"


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the retry schedule's shape but not its seconds; Retry-After from the server is still honoured."""
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.001 * (attempt + 1))
    monkeypatch.setenv(KEY_ENV, "sk-fault-test-not-a-real-key")


def _endpoint(server: LoopbackServer, name: str, **extra: Any) -> dict[str, Any]:
    return {"model": f"openai/{name}", "base_url": server.base_url, "api_key_env": KEY_ENV, **extra}


def _scenario(tmp_path: Path, server: LoopbackServer, **model_extra: Any) -> engine.Scenario:
    models = {
        "tutor": _endpoint(server, "sim-tutor", **model_extra),
        "student": _endpoint(server, "sim-student", **model_extra),
        "judge": [_endpoint(server, "sim-judge", **model_extra)],
    }
    return make_scenario(tmp_path, models=models, concurrency=6, student={"strategy": "crescendo", "max_turns": 5})


def _records(result: engine.RunResult) -> list[engine.EpisodeRecord]:
    return list(RunDir(result.run_dir).iter_records())


async def test_faults_never_lose_or_duplicate_an_episode(tmp_path: Path) -> None:
    """30% 429s with Retry-After, 5% 5xx, 2% drops and slow drips: every planned episode is recorded exactly once."""
    options = ServeOptions(
        error_429=0.30,
        error_500=0.03,
        error_503=0.02,
        drop_rate=0.02,
        slow_drip_rate=0.01,
        slow_drip_s=0.5,
        retry_after_s=0.01,
        seed=11,
    )
    async with LoopbackServer(options) as server:
        scenario = _scenario(tmp_path, server, max_retries=8, timeout_s=0.3)
        with structlog.testing.capture_logs() as events:
            result = await engine.run(scenario, out=tmp_path / "runs")
        stats = server.stats
    records = _records(result)
    planned = {e.id for e in engine.Runner(scenario, out=tmp_path / "plan", report=engine.write_report).episodes}
    ids = [r.id for r in records]
    assert sorted(ids) == sorted(planned) and len(ids) == len(set(ids))
    assert all(r.status == "ok" or (r.error is not None and r.error.type and r.error.message) for r in records)
    assert stats.too_many_requests > 0 and stats.dropped > 0
    logged = [orjson.loads(line) for line in (result.run_dir / "events.jsonl").read_bytes().splitlines()]
    retries = [e for e in logged if e["event"] == "provider.retry"]
    manifest = orjson.loads((result.run_dir / "manifest.json").read_bytes())
    assert len(retries) == manifest["calls"]["retries"] > 0, "events.jsonl keeps every retry"
    shown = [e for e in events if e["event"] == "provider.retry"]
    kinds = {(e["kind"], e["model"]) for e in retries}
    assert len(kinds) <= len(shown) < len(retries), "the console gets one retry warning per kind and endpoint"
    assert manifest["calls"]["retries_by_kind"].get("rate_limited", 0) > 0
    assert manifest["counts"]["ok"] + manifest["counts"]["error"] == len(planned)


async def test_quota_exhaustion_stops_calls_to_that_endpoint(tmp_path: Path) -> None:
    """insufficient_quota is final: it opens the endpoint's breaker, the run stops (exit 130) saying why, and the
    endpoint gets no further calls."""
    async with LoopbackServer(ServeOptions(quota_rate=1.0)) as server:
        scenario = _scenario(tmp_path, server)
        with structlog.testing.capture_logs() as events:
            result = await engine.run(scenario, out=tmp_path / "runs", probe=False)
        requests, url = server.stats.requests, server.base_url
    records = _records(result)
    assert result.exit_code == 130 and all(r.status == "error" for r in records)
    assert result.reason is not None and "quota" in result.reason and url in result.reason
    assert {r.error.type for r in records if r.error} == {"quota_exhausted"}
    assert requests <= scenario.concurrency, "calls stopped once the first quota error came back"
    assert [e["event"] for e in events].count("provider.quota_exhausted") == 1


async def test_malformed_judge_output_is_retried_then_the_reply_unjudged(tmp_path: Path) -> None:
    """A judge that always answers with broken JSON is asked again, then its replies are unjudged: every episode
    is kept whole, none is an error record."""
    async with LoopbackServer(ServeOptions(sim={"judge": {"invalid_rate": 1.0}})) as server:
        result = await engine.run(_scenario(tmp_path, server), out=tmp_path / "runs")
    records = _records(result)
    assert records and all(r.status == "ok" for r in records)
    model_judges = [j for r in records for j in r.judgments if j.judge in {"harm", "pedagogy"}]
    assert model_judges and {j.metric for j in model_judges} == {"unjudged"}
    assert all(r.turns for r in records)


async def test_rpm_at_the_server_limit_meets_no_429_after_the_first_window(tmp_path: Path) -> None:
    """With the client's RPM set to the server's sliding-window limit, 429s stop after the first window."""
    async with LoopbackServer(ServeOptions(rpm=240, window_s=1.0)) as server:
        scenario = _scenario(tmp_path, server, rpm=240 * 60)  # the server's window is 1 s: 240/s = 14,400/min
        scenario = scenario.model_copy(update={"limit": 6})
        await engine.run(scenario, out=tmp_path / "runs")
        by_status = Counter(server.stats.by_status)
    assert by_status.get(429, 0) <= 1
