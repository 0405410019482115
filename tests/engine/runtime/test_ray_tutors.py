"""`--executor ray` with a study of several tutors: a dead tutor's breaker stops only that tutor's episodes on
every worker, as in a local run (real HTTP against loopback servers, two workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine.runtime._rundir import RunDir
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import make_scenario

pytestmark = pytest.mark.ray
KEY_ENV = "SIMRUN_RAY_TUTORS_TEST_KEY"
REMATH = Path(__file__).resolve().parents[3] / "scenarios" / "remath.yaml"


def _at(server: LoopbackServer, label: str) -> dict[str, Any]:
    return {"model": "openai/sim-tutor", "base_url": server.base_url, "api_key_env": KEY_ENV, "label": label}


def _study(tmp_path: Path, *tutors: dict[str, Any]) -> engine.Scenario:
    models = {"tutor": list(tutors), "student": "sim/student", "judge": ["sim/judge"]}
    return make_scenario(tmp_path, models=models, executor={"name": "ray", "workers": 2}, concurrency=4)


async def test_a_dead_tutor_on_ray_stops_only_its_own_episodes(
    tmp_path: Path, ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One tutor's endpoint refuses every call for good: its episodes stop on both workers (those unplayed are
    left for a resume), the other tutor plays its whole share, and the run ends interrupted naming the tutor."""
    monkeypatch.setenv(KEY_ENV, "sk-ray-tutors-not-a-real-key")
    async with LoopbackServer(ServeOptions()) as good, LoopbackServer(ServeOptions(quota_rate=1.0)) as dead:
        scenario = _study(tmp_path, _at(good, "alive"), _at(dead, "gone"))
        result = await engine.run(scenario, out=tmp_path / "runs", probe=False)
    records = list(RunDir(result.run_dir).iter_records())
    planned = engine.Runner(scenario).episodes
    alive = [r for r in records if r.tutor == "alive"]
    assert len(alive) == len(planned) // 2 and all(r.status == "ok" for r in alive)
    gone = [r for r in records if r.tutor == "gone"]
    assert all(r.status == "error" for r in gone) and len(gone) < len(planned) // 2
    assert result.status == "interrupted" and result.reason is not None
    assert "tutor gone" in result.reason and "quota" in result.reason
    events = [orjson.loads(line) for line in (result.run_dir / "events.jsonl").read_bytes().splitlines()]
    stopped = [e for e in events if e["event"] == "tutor.stopped" and "worker" not in e]
    assert [e["tutors"] for e in stopped] == [["gone"]], "the driver stops the tutor once"
    assert not [e for e in events if e["event"] == "run.stopping"], "the run itself was never stopped"
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["models"]["balance"]["gone"]["ok"] == 0


async def test_when_every_tutor_is_dead_the_ray_run_stops(
    tmp_path: Path, ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both tutors share one dead endpoint: no tutor is left to play, so the whole run stops as a one-tutor run
    would, with the breaker's reason."""
    monkeypatch.setenv(KEY_ENV, "sk-ray-tutors-not-a-real-key")
    async with LoopbackServer(ServeOptions(quota_rate=1.0)) as dead:
        scenario = _study(tmp_path, _at(dead, "one"), _at(dead, "two"))
        result = await engine.run(scenario, out=tmp_path / "runs", probe=False)
    assert result.status == "interrupted" and result.reason is not None
    assert result.reason.startswith("circuit breaker opened:") and "quota" in result.reason
    assert result.ok == 0 and result.errors < len(engine.Runner(scenario).episodes)


async def test_a_study_on_ray_equals_the_same_study_run_locally(tmp_path: Path, ray_cluster: Any) -> None:
    """Two sim tutors on two workers: the same records, per-tutor tables and comparison as in one process."""
    tutors = [
        {"label": "calm", "model": "sim/tutor"},
        {"label": "rash", "model": "sim/tutor", "params": {"leak_base": 0.6}},
    ]
    models = {"tutor": tutors, "student": "sim/student", "judge": ["sim/judge"]}
    local = await engine.run(make_scenario(tmp_path, models=models), out=tmp_path / "local")
    on_ray = await engine.run(
        make_scenario(tmp_path, models=models, executor={"name": "ray", "workers": 2}), out=tmp_path / "ray"
    )
    summaries = [orjson.loads((r.run_dir / "summary.json").read_bytes()) for r in (local, on_ray)]
    assert summaries[0]["models"] == summaries[1]["models"] and summaries[0]["models"]["labels"] == ["calm", "rash"]
    texts = [{r.id: [t.text for t in r.turns] for r in RunDir(x.run_dir).iter_records()} for x in (local, on_ray)]
    assert texts[0] == texts[1]


async def test_a_remath_study_on_ray_plays_the_human_condition_once(tmp_path: Path, ray_cluster: Any) -> None:
    """ReMath's tutor-free `given: human` on two workers: played once, unlabelled, and the same study as locally."""
    tutors = ["tutor={label: calm, model: sim/tutor}", "tutor={label: rash, model: sim/tutor}"]
    runs = []
    for executor in ("local", "ray"):
        overrides = ["limit=12", *(["executor={name: ray, workers: 2}"] if executor == "ray" else [])]
        scenario = engine.load_scenario(REMATH, overrides=overrides, models=tutors)
        runs.append(await engine.run(scenario, out=tmp_path / executor))
    summaries = [orjson.loads((r.run_dir / "summary.json").read_bytes()) for r in runs]
    assert summaries[0]["models"] == summaries[1]["models"] and "shared" in summaries[1]["models"]
    records = [{r.id: r for r in RunDir(x.run_dir).iter_records()} for x in runs]
    assert records[0].keys() == records[1].keys()
    free = [r for r in records[1].values() if r.condition.get("given") == "human"]
    assert free and all(r.tutor is None and "tutor=" not in r.id for r in free)
