"""Live endpoints over real HTTP: probe first, fail fast, retry errors on resume, and report what was spent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

import engine
from engine.cli._main import main
from engine.core._errors import ScenarioError
from engine.core._records import EpisodeRecord, ErrorInfo
from engine.models._breaker import ErrorLimit, parse_max_errors
from engine.models._probe import ProbeFailed
from engine.runtime._rundir import RunDir
from engine.tools.compare._runs import compare_runs
from engine.tools.serve._server import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import make_scenario

KEY_ENV = "SIMRUN_LIVE_TEST_KEY"
PRICES = {
    "openai/sim-tutor": {"input": 1.0, "output": 2.0},
    "openai/sim-student": {"input": 0.5, "output": 0.5},
    "openai/sim-judge": {"input": 3.0, "output": 4.0},
}


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.001 * (attempt + 1))
    monkeypatch.setenv(KEY_ENV, "sk-live-test-not-a-real-key")


def _models(base_url: str, **extra: Any) -> dict[str, Any]:
    def one(name: str) -> dict[str, Any]:
        return {"model": f"openai/{name}", "base_url": base_url, "api_key_env": KEY_ENV, "max_retries": 2, **extra}

    return {"tutor": one("sim-tutor"), "student": one("sim-student"), "judge": [one("sim-judge")]}


def _scenario(tmp_path: Path, base_url: str, **overrides: Any) -> engine.Scenario:
    data: dict[str, Any] = {
        "models": _models(base_url),
        "concurrency": 3,
        "student": {"strategy": "crescendo", "max_turns": 5},
        "prices": PRICES,
    }
    data.update(overrides)
    tmp_path.mkdir(parents=True, exist_ok=True)
    return make_scenario(tmp_path, **data)


def _content(record: EpisodeRecord) -> dict[str, Any]:
    """What an episode measured, without timings."""
    return {
        "status": record.status,
        "turns": [(t.role, t.text, t.visible_to_tutor) for t in record.turns],
        "judgments": [j.model_dump() for j in record.judgments],
        "metrics": record.metrics,
    }


def _current(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {r.id: _content(r) for r in RunDir(run_dir).current_records().records}


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    data.pop("run")
    return data


# -- probe --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["sdk", "lean"])
async def test_the_probe_passes_a_listed_model_and_one_the_server_serves_unlisted(
    tmp_path: Path, transport: str
) -> None:
    async with LoopbackServer() as server:
        models = _models(server.base_url, transport=transport)
        models["tutor"]["model"] = "openai/some-alias-the-server-does-not-list"
        result = await engine.run(_scenario(tmp_path, server.base_url, models=models, limit=1), out=tmp_path / "runs")
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(status=401, error_code="invalid_api_key"), f"the API key was refused (HTTP 401); check ${KEY_ENV}"),
        (Reply(status=404, error_code="model_not_found"), "the endpoint does not know this model"),
        (Reply(status=429, error_code="insufficient_quota"), "quota is spent"),
    ],
)
async def test_the_probe_refuses_a_bad_key_an_unknown_model_and_a_spent_quota(
    tmp_path: Path, reply: Reply, expected: str
) -> None:
    """No model is in the fake's list, so a one-token completion per endpoint decides; every failing endpoint
    is named, and nothing is left behind."""
    async with FakeOpenAI(lambda body: reply) as fake:
        models = _models(fake.base_url)
        models["judge"][0]["model"] = "openai/unknown-judge"
        with pytest.raises(ProbeFailed) as raised:
            await engine.run(_scenario(tmp_path, fake.base_url, models=models), out=tmp_path / "runs")
        url = fake.base_url
        asked = [seen.path for seen in fake.seen]
    message = str(raised.value)
    assert f"judge model openai/unknown-judge at {url}" in message and expected in message
    assert f"tutor model openai/sim-tutor at {url}" in message
    assert asked.count("/v1/models") == asked.count("/v1/chat/completions") == 3, "one probe per endpoint, no episode"
    assert not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_refused_model_list_falls_back_to_a_completion(tmp_path: Path, status: int) -> None:
    """Some proxies refuse `/models` to keys that may chat: the one-token completion decides."""
    async with FakeOpenAI(lambda body: Reply(content="OK"), models_status=status) as fake:
        runner = engine.Runner(
            _scenario(tmp_path, fake.base_url, limit=1), out=tmp_path / "runs", probe=True, report=engine.write_report
        )
        await runner.open()
        runner.pending = []  # the probe alone
        result = await runner.run()
        asked = [seen.path for seen in fake.seen]
    assert result.exit_code == 0
    assert asked.count("/v1/models") == asked.count("/v1/chat/completions") == 3


async def test_no_probe_skips_it(tmp_path: Path) -> None:
    async with FakeOpenAI(lambda body: Reply(status=401)) as fake:
        result = await engine.run(_scenario(tmp_path, fake.base_url, limit=1), out=tmp_path / "runs", probe=False)
        paths = {seen.path for seen in fake.seen}
    assert "/v1/models" not in paths and result.errors == 1


# -- fail fast, then resume --retry-errors ------------------------------------------------------------------------


async def test_an_outage_opens_the_breaker_and_retry_errors_recovers_the_clean_run(tmp_path: Path) -> None:
    """The endpoint dies mid-run: the run stops (130) with the reason; once it is back on the same port,
    `resume` + `retry_errors` ends with exactly the records and summary of an uninterrupted run."""
    async with LoopbackServer() as server:
        clean = await engine.run(_scenario(tmp_path / "clean", server.base_url), out=tmp_path / "clean-runs")
    assert clean.exit_code == 0

    results: list[engine.RunResult] = []
    async with anyio.create_task_group() as group, LoopbackServer() as server:
        port, url = server.port, server.base_url
        scenario = _scenario(tmp_path / "outage", url)
        three = anyio.Event()
        seen = 0

        async def on_episode(_: EpisodeRecord) -> None:
            nonlocal seen
            seen += 1
            if seen == 3:
                three.set()

        async def go() -> None:
            results.append(await engine.run(scenario, out=tmp_path / "runs", on_episode=on_episode))

        group.start_soon(go)
        await three.wait()
        # the server is gone; the run is still going
    (broken,) = results
    assert broken.exit_code == 130 and broken.reason is not None
    assert "circuit breaker opened" in broken.reason and url in broken.reason
    assert broken.ok < len(_current(clean.run_dir))
    manifest = orjson.loads((broken.run_dir / "manifest.json").read_bytes())
    assert manifest["status"] == "interrupted" and manifest["reason"] == broken.reason

    with pytest.raises(ProbeFailed):  # still down: the resume says so at once and leaves the directory as it was
        await engine.run(scenario, resume=broken.run_dir, retry_errors=True)
    async with LoopbackServer(port=port):
        resumed = await engine.run(scenario, resume=broken.run_dir, retry_errors=True)
    assert resumed.exit_code == 0 and resumed.errors == 0
    assert _current(resumed.run_dir) == _current(clean.run_dir)
    assert _summary(resumed.run_dir) == _summary(clean.run_dir)
    summary = orjson.loads((resumed.run_dir / "summary.json").read_bytes())["run"]
    assert summary["episodes"] == summary["planned"] == len(_current(clean.run_dir))


async def test_max_errors_stops_the_run_at_the_bound(tmp_path: Path) -> None:
    """A tutor endpoint that refuses every call (a final 400): every episode is an error; the run stops at 2
    (one episode at a time). An invalid verdict no longer fails an episode (the reply is unjudged)."""
    async with FakeOpenAI(lambda body: Reply(status=400)) as fake:
        tutor = {"model": "openai/sim-tutor", "base_url": fake.base_url, "api_key_env": KEY_ENV, "max_retries": 0}
        models = {"tutor": tutor, "student": "sim/student", "judge": ["sim/judge"]}
        scenario = make_scenario(tmp_path, concurrency=1, models=models)
        result = await engine.run(scenario, out=tmp_path / "runs", max_errors=ErrorLimit(count=2), probe=False)
    assert result.exit_code == 130 and result.errors == 2 and result.ok == 0
    assert result.reason is not None and "--max-errors 2" in result.reason
    assert len(list(RunDir(result.run_dir).iter_records())) == 2


def test_max_errors_reads_counts_and_shares() -> None:
    assert parse_max_errors("7").bound(100) == 7
    assert parse_max_errors("5%").bound(660) == 33
    assert parse_max_errors("0.1%").bound(20) == 1
    for bad in ("x", "-1", "2.5", "0%", "101%"):
        with pytest.raises(ScenarioError):
            parse_max_errors(bad)


# -- spend ---------------------------------------------------------------------------------------------------------


async def test_spend_per_role_and_model_reaches_the_manifest_and_the_report(tmp_path: Path) -> None:
    async with LoopbackServer() as server:
        result = await engine.run(_scenario(tmp_path, server.base_url, limit=2), out=tmp_path / "runs")
    manifest = orjson.loads((result.run_dir / "manifest.json").read_bytes())
    tokens = manifest["calls"]["tokens_by_model"]
    expected = {
        model: (tokens[model][0] * PRICES[model]["input"] + tokens[model][1] * PRICES[model]["output"]) / 1e6
        for model in tokens
    }
    assert set(expected) == set(PRICES) and all(value > 0 for value in expected.values())
    assert manifest["cost_usd"]["by_model"] == pytest.approx(expected)
    assert manifest["cost_usd"]["total"] == pytest.approx(sum(expected.values()))
    by_role = manifest["calls"]["tokens_by_role"]
    assert by_role["tutor"] == {"openai/sim-tutor": tokens["openai/sim-tutor"]}
    html = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert f"${manifest['cost_usd']['total']:,.4f}" in html and "tutor · openai/sim-tutor" in html


# -- one writer, and readers that take the last record per planned id ----------------------------------------------


def _run_offline(tmp_path: Path, **overrides: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = engine.run_sync(make_scenario(tmp_path, **overrides), out=tmp_path / "runs")
    return result.run_dir


def _append(run_dir: Path, record: EpisodeRecord) -> None:
    with (run_dir / "episodes.jsonl").open("ab") as handle:
        handle.write(orjson.dumps(record.model_dump(mode="json")) + b"\n")


def test_readers_take_the_last_record_per_planned_id_and_set_aside_the_rest(tmp_path: Path) -> None:
    run_dir = _run_offline(tmp_path)
    before = orjson.loads((run_dir / "summary.json").read_bytes())["run"]
    first = next(RunDir(run_dir).iter_records())
    _append(run_dir, first.model_copy(update={"status": "error", "error": ErrorInfo(type="Planted", message="m")}))
    _append(run_dir, first.model_copy(update={"id": "not-in-the-plan"}))
    summary = engine.write_report(run_dir)["run"]
    assert summary["episodes"] == summary["planned"] == before["planned"]
    assert summary["error"] == 1 and summary["errors_by_type"] == {"Planted": 1} and summary["superseded"] == 1
    assert "not-in-the-plan" in summary["warnings"][0]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert html.count("not-in-the-plan") == 1 and "<dt>warning</dt>" in html, "named once, in the warning"


def test_report_and_compare_refuse_records_of_another_scenario(tmp_path: Path) -> None:
    a = _run_offline(tmp_path / "a")
    b = _run_offline(tmp_path / "b", seed=99)
    (a / "manifest.json").write_bytes((b / "manifest.json").read_bytes())
    with pytest.raises(ScenarioError, match="another scenario"):
        engine.write_report(a)
    with pytest.raises(ScenarioError, match="another scenario"):
        compare_runs([a, b])


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """Another process holds the run directory: resume and report exit 2 naming it; once it dies, resume works."""
    run_dir = _run_offline(tmp_path)
    code = (
        "import sys, time; from pathlib import Path; from engine.runtime._rundir import RunDir; "
        "r = RunDir(Path(sys.argv[1])); r.acquire('run'); print('held', flush=True); time.sleep(30)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[3]
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
            with pytest.raises(ScenarioError, match=rf"in use by simrun run \(pid {holder.pid} "):
                engine.Runner(make_scenario(tmp_path), resume=run_dir, report=engine.write_report).prepare()
            assert main(["report", str(run_dir)]) == 2
        finally:
            holder.kill()
    assert engine.run_sync(make_scenario(tmp_path), resume=run_dir).exit_code == 0, "the lock dies with its holder"


def test_cache_hits_are_counted_live_and_in_the_summary(tmp_path: Path) -> None:
    from engine.cli._live import status_line

    scenario = make_scenario(tmp_path, limit=2)
    engine.run_sync(scenario, out=tmp_path / "runs", cache=tmp_path / "cache.db")
    runner = engine.Runner(scenario, out=tmp_path / "runs", cache=tmp_path / "cache.db", report=engine.write_report)
    result = anyio.run(runner.run)
    assert runner.stats.cache_hits > 0 and runner.stats.requests == 0
    assert f"cache hits {runner.stats.cache_hits:,}" in status_line(runner)
    assert result.summary["run"]["cache_hits"] == runner.stats.cache_hits


def test_view_serves_only_the_current_record_of_an_episode(tmp_path: Path) -> None:
    from engine.tools._view import ReportServer

    run_dir = _run_offline(tmp_path, limit=2)
    first = next(RunDir(run_dir).iter_records())
    _append(run_dir, first.model_copy(update={"metrics": {"planted": 1}}))
    engine.write_report(run_dir)
    server = ReportServer(run_dir, 0)  # binds nothing until entered
    assert server.episode_page(1) is None, "superseded by line 3"
    page = server.episode_page(3)
    assert page is not None and "planted" in page


async def test_max_errors_is_a_bound_with_episodes_in_flight(tmp_path: Path) -> None:
    """Many episodes at once, all failing: never more error records than the bound."""
    async with FakeOpenAI(lambda body: Reply(status=400)) as fake:
        tutor = {"model": "openai/sim-tutor", "base_url": fake.base_url, "api_key_env": KEY_ENV, "max_retries": 0}
        models = {"tutor": tutor, "student": "sim/student", "judge": ["sim/judge"]}
        scenario = make_scenario(tmp_path, concurrency=8, models=models)
        result = await engine.run(scenario, out=tmp_path / "runs", max_errors=parse_max_errors("25%"), probe=False)
    records = list(RunDir(result.run_dir).iter_records())
    assert result.exit_code == 130 and len(records) == result.errors == 3  # 25% of 12
