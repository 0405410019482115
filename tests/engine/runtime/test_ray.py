"""`--executor ray` on a local 2-CPU cluster: the same records and summary as a local run, each episode once,
a killed worker's shards played again, one rate budget per endpoint across workers."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine.cli._main import main
from engine.runtime._rundir import RunDir
from engine.tools.serve._limits import _Window
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import make_scenario, scenario_data, write_bank

pytestmark = pytest.mark.ray
KEY_ENV = "SIMRUN_RAY_TEST_KEY"


def _summary(run_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    summary.pop("run")
    return summary


def _ids(run_dir: Path) -> list[str]:
    return [record.id for record in RunDir(run_dir).iter_records()]


def _on_ray(tmp_path: Path, workers: int = 2, **overrides: Any) -> engine.Scenario:
    return make_scenario(tmp_path, executor={"name": "ray", "workers": workers}, **overrides)


async def test_ray_run_equals_a_local_run(tmp_path: Path, ray_cluster: Any) -> None:
    """Two workers: every planned episode recorded once, the same records and summary as in one process."""
    local = await engine.run(make_scenario(tmp_path), out=tmp_path / "local")
    on_ray = await engine.run(_on_ray(tmp_path), out=tmp_path / "ray")
    planned = [episode.id for episode in engine.Runner(make_scenario(tmp_path)).episodes]
    ids = _ids(on_ray.run_dir)
    assert sorted(ids) == sorted(planned) and len(set(ids)) == len(ids) == on_ray.ok + on_ray.errors
    assert _summary(on_ray.run_dir) == _summary(local.run_dir)
    by_id = {r.id: r for r in RunDir(local.run_dir).iter_records()}
    for record in RunDir(on_ray.run_dir).iter_records():
        assert [t.text for t in record.turns] == [t.text for t in by_id[record.id].turns]
    manifest = orjson.loads((on_ray.run_dir / "manifest.json").read_bytes())
    local_manifest = orjson.loads((local.run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["requests"] == local_manifest["calls"]["requests"], "workers' counters reach the driver"
    events = [orjson.loads(line) for line in (on_ray.run_dir / "events.jsonl").read_bytes().splitlines()]
    finished = [e for e in events if e["event"] == "episode.finished"]
    assert len(finished) == len(planned) and {e["worker"] for e in finished} == {0, 1}


async def test_killed_worker_is_replaced_and_nothing_is_lost_or_duplicated(tmp_path: Path, ray_cluster: Any) -> None:
    """`ray.kill` on a worker mid-run: its shards in flight are queued again and every episode is recorded once."""
    from engine.runtime._ray import worker_name

    killed: list[str] = []
    scenario = _on_ray(tmp_path, replicates=3, concurrency=4)
    runner = engine.Runner(scenario, out=tmp_path / "runs", report=engine.write_report)

    async def kill_once(record: engine.EpisodeRecord) -> None:
        if not killed:
            name = worker_name(runner.run_dir.path, 0)
            ray_cluster.kill(ray_cluster.get_actor(name))
            killed.append(name)

    runner.on_episode = kill_once
    result = await runner.run()
    ids = _ids(result.run_dir)
    assert killed and result.status == "finished"
    assert sorted(ids) == sorted(e.id for e in runner.episodes) and len(set(ids)) == len(ids) == 36
    events = [orjson.loads(line) for line in (result.run_dir / "events.jsonl").read_bytes().splitlines()]
    lost = [e for e in events if e["event"] == "ray.worker_lost"]
    assert lost and all(e["worker"] == 0 for e in lost)
    assert [e for e in events if e["event"] == "ray.finished"][0]["lost_shards"] == len(lost)
    local = await engine.run(make_scenario(tmp_path, replicates=3), out=tmp_path / "local")
    assert _summary(result.run_dir) == _summary(local.run_dir)


async def test_resume_on_ray_runs_only_the_missing_episodes(tmp_path: Path, ray_cluster: Any) -> None:
    """A local run cut to its first 5 records (as a crash leaves it), resumed on Ray: the other 7 are played once
    and the summary is the clean local run's."""
    local = await engine.run(make_scenario(tmp_path), out=tmp_path / "local")
    records = local.run_dir / "episodes.jsonl"
    kept = records.read_bytes().splitlines(keepends=True)[:5]
    records.write_bytes(b"".join(kept))
    resumed = await engine.run(_on_ray(tmp_path), resume=local.run_dir)
    ids = _ids(resumed.run_dir)
    assert len(ids) == len(set(ids)) == 12 and resumed.ok + resumed.errors == 12
    assert ids[:5] == [orjson.loads(line)["id"] for line in kept], "the records on disk stay as they were"
    clean = await engine.run(make_scenario(tmp_path), out=tmp_path / "clean")
    assert _summary(resumed.run_dir) == _summary(clean.run_dir)


def _via_server(server: LoopbackServer, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/sim-tutor", "base_url": server.base_url, "api_key_env": KEY_ENV, **extra}


async def test_two_workers_share_one_rate_budget(
    tmp_path: Path, ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers share a 120-rpm budget against `simrun serve --rpm 120`, with time running 10x fast to keep the
    test short: the server admits 120 requests per 6-s window and the tutor is budgeted at `rpm: 1200`, the same
    limit. The workers' demand is above it, so the shared budget is what holds the rate: at most 1% 429s over
    more than two windows, the first included."""
    monkeypatch.setenv(KEY_ENV, "sk-ray-test-not-a-real-key")
    arrivals: list[tuple[float, bool]] = []
    checked = _Window.wait

    def wait(self: Any, now: float, cost: int) -> float | None:
        delay = checked(self, now, cost)
        arrivals.append((now, delay is None))
        return delay

    monkeypatch.setattr(_Window, "wait", wait)
    async with LoopbackServer(ServeOptions(rpm=120, window_s=6.0)) as server:
        models = {"tutor": _via_server(server, rpm=20 * 60), "student": "sim/student", "judge": ["sim/judge"]}
        scenario = _on_ray(tmp_path, models=models, replicates=6, concurrency=32)
        result = await engine.run(scenario, out=tmp_path / "runs", probe=False)
    admitted = [ok for _, ok in arrivals]
    assert result.ok + result.errors == 72
    assert arrivals[-1][0] - arrivals[0][0] > 12.0, "long enough to cross two windows at the limit"
    assert admitted.count(False) <= 0.01 * len(admitted), f"{admitted.count(False)} 429s of {len(admitted)}"


def test_cli_runs_on_ray(tmp_path: Path, ray_cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`simrun SCENARIO --ray-workers 2` (which implies `--executor ray`) runs on Ray and exits 0."""
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_bytes(orjson.dumps(scenario_data()))
    code = main([str(path), "--ray-workers", "2", "--out", str(tmp_path / "runs"), "-q"])
    assert code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert len(_ids(run_dir)) == 12
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["scenario_hash"] == make_scenario(tmp_path).content_hash(), "the executor is not hashed"
    events = [orjson.loads(line)["event"] for line in (run_dir / "events.jsonl").read_bytes().splitlines()]
    assert "ray.started" in events


@pytest.mark.parametrize("argv", [["--executor", "ray"], ["--set", "executor=ray"]])
def test_without_ray_the_executor_exits_2_saying_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """No ray installed (an import that fails): exit 2, the pip command, no traceback, no run directory."""
    monkeypatch.setitem(sys.modules, "ray", None)
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_bytes(orjson.dumps(scenario_data()))
    assert main([str(path), *argv, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'simrun[ray]'" in " ".join(err.split()) and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_a_simulator_study_fans_out_with_the_same_figures(ray_cluster: Any) -> None:
    """`engine.fan_out` runs the fairness bench's seeds as Ray tasks: the same results, in seed order."""
    from functools import partial

    from bench.fairness_calibration import DESIGNS, prepare, trial

    design = DESIGNS[0]
    one = partial(trial, prepare(design.scenario, design.overrides, 20), "test-fan-out", design, 0.3)
    local = engine.fan_out(one, range(6))
    assert engine.fan_out(one, range(6), executor="ray", workers=2) == local
    assert any(hit for _, hit in local) and all(family > 0 for family, _ in local)


async def test_a_load_test_across_two_ray_workers_loses_nothing(ray_cluster: Any) -> None:
    """`loadtest --executor ray --workers 2`: the split of local `--workers`, one start, every row merged."""
    from engine.tools.loadtest._config import LoadConfig
    from engine.tools.loadtest._run import load_items
    from engine.tools.loadtest._workers import run_step

    async with LoopbackServer(ServeOptions(latency_s=0.01)) as server:
        config = LoadConfig(
            target=server.base_url, model="sim-tutor", arrival="constant", rate=20.0, duration_s=0.5, turns=1,
            think_time_s=0.0, workers=2, executor="ray",
        )  # fmt: skip
        rows, healths = await run_step(config, load_items(config), rate=config.rate, step=0)
        stats = server.stats
    assert {row.worker for row in rows} == {0, 1} and [h.worker for h in healths] == [0, 1]
    assert all(row.conversation % 2 == row.worker for row in rows)
    assert sorted(row.conversation for row in rows) == list(range(10)), "the schedule, split without loss"
    assert stats.requests == len(rows) and all(row.ok for row in rows)
    due = {row.conversation: row.scheduled for row in rows}
    assert due == {i: pytest.approx(i / 20.0) for i in range(10)}, "one schedule split, not two"


async def test_a_load_test_on_ray_shows_the_workers_summed_live(ray_cluster: Any) -> None:
    """The live line polls each Ray worker's counters once a second and shows their sum, as for local workers."""
    import io

    from rich.console import Console

    from engine.tools.loadtest._config import LoadConfig
    from engine.tools.loadtest._progress import ConsoleProgress
    from engine.tools.loadtest._run import load_items
    from engine.tools.loadtest._workers import run_step

    sink = io.StringIO()
    async with LoopbackServer(ServeOptions(latency_s=0.01)) as server:
        config = LoadConfig(
            target=server.base_url, model="sim-tutor", arrival="constant", rate=8.0, duration_s=3.0, turns=1,
            think_time_s=0.0, workers=2, executor="ray",
        )  # fmt: skip
        progress = ConsoleProgress(Console(file=sink), interval_s=0.25)
        rows, _ = await run_step(config, load_items(config), rate=config.rate, step=0, progress=progress)
    sent = [int(found) for found in re.findall(r"requests (\d+) ", sink.getvalue())]
    assert sent and max(sent) > 0 and sent == sorted(sent), sink.getvalue()
    assert max(sent) <= len(rows)


def test_a_load_test_without_ray_exits_2_saying_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    argv = ["loadtest", "--target", "http://127.0.0.1:9/v1", "--model", "m", "--rate", "1", "--executor", "ray"]
    assert main([*argv, "--workers", "2", "--out", str(tmp_path / "runs")]) == 2
    assert "pip install 'simrun[ray]'" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "runs").exists()
