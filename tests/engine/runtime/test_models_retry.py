"""A study whose one tutor's endpoint was dead: `--resume --retry-errors` once it is back plays that tutor's error
records and its unplayed episodes again, and leaves every tutor with every unit once (real HTTP, loopback)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import engine
from engine.runtime._rundir import RunDir
from engine.scenario._budget import Budget
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import make_scenario

KEY_ENV = "SIMRUN_MODELS_RETRY_TEST_KEY"


def _at(server: LoopbackServer, name: str, label: str | None = None) -> dict[str, Any]:
    spec = {"model": f"openai/{name}", "base_url": server.base_url, "api_key_env": KEY_ENV}
    return spec if label is None else {**spec, "label": label}


async def test_retry_errors_completes_a_study_once_the_dead_tutor_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.001 * (attempt + 1))
    monkeypatch.setenv(KEY_ENV, "sk-models-retry-not-a-real-key")
    async with LoopbackServer(ServeOptions()) as good:
        async with LoopbackServer(ServeOptions(quota_rate=1.0)) as dead:
            models = {
                "tutor": [_at(good, "sim-tutor", "alive"), _at(dead, "sim-tutor", "back")],
                "student": _at(good, "sim-student"),
                "judge": [_at(good, "sim-judge")],
            }
            scenario = make_scenario(tmp_path, models=models, concurrency=4)
            first = await engine.run(scenario, out=tmp_path / "runs", probe=False)
            port = dead.port
        assert first.status == "interrupted" and first.errors > 0
        async with LoopbackServer(ServeOptions(), port=port):  # the same endpoint, serving again
            again = await engine.run(scenario, resume=first.run_dir, retry_errors=True, probe=False)
    planned = engine.Runner(scenario).episodes
    latest = {r.id: r for r in RunDir(again.run_dir).iter_records()}
    assert again.status == "finished" and again.errors == 0
    assert set(latest) == {e.id for e in planned} and all(r.status == "ok" for r in latest.values())
    assert Counter(r.tutor for r in latest.values()) == {"alive": len(planned) // 2, "back": len(planned) // 2}


def test_max_cost_stops_a_study_with_every_tutor_within_one_unit(tmp_path: Path) -> None:
    """`--max-cost` is the run's one budget over every tutor's spend: it stops admitting, and the interleaved plan
    leaves the tutors balanced."""
    tutors = [
        {"label": "calm", "model": "sim/tutor"},
        {"label": "rash", "model": "sim/tutor", "params": {"leak_base": 0.6}},
    ]
    prices = {"sim/tutor": {"input": 1000.0, "output": 1000.0}}
    scenario = make_scenario(
        tmp_path,
        models={"tutor": tutors, "student": "sim/student", "judge": ["sim/judge"]},
        prices=prices,
        concurrency=1,
    )
    result = engine.run_sync(scenario, out=tmp_path / "runs", budget=Budget(max_cost=0.5))
    records = list(RunDir(result.run_dir).iter_records())
    assert result.status == "interrupted" and "cost budget reached" in (result.reason or "")
    counts = Counter(r.tutor for r in records)
    assert 0 < len(records) < len(engine.Runner(scenario).episodes)
    assert abs(counts["calm"] - counts["rash"]) <= 1
