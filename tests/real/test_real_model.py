"""A real model in the loop (SmolLM2-135M-Instruct on llama.cpp, served on loopback): the shipped crescendo and
fairness scenarios with the tutor on it, a judge on it with structured output, and the same run twice at
concurrency 1 giving the same transcripts. Opt-in (`SIMRUN_REAL_MODEL=1`): it installs about 180 MB once and runs
a few minutes; skipped with the reason where the runtime cannot be installed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import engine
from engine.cli.real._runtime import (
    API_KEY_ENV,
    MODEL_NAME,
    RealModelUnavailable,
    Runtime,
    install,
    serving,
    tutor_spec,
)
from engine.runtime._rundir import RunDir
from tests.conftest import ROOT

pytestmark = pytest.mark.real_model
MODEL = f"openai/{MODEL_NAME}"


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    if os.environ.get("SIMRUN_REAL_MODEL") != "1":
        pytest.skip("the real-model tests are opt-in: SIMRUN_REAL_MODEL=1 (installs ~180 MB once, runs minutes)")
    try:
        return install(say=False)
    except RealModelUnavailable as exc:
        pytest.skip(f"no real model here: {exc}")


@pytest.fixture(scope="module")
def base_url(runtime: Runtime) -> Iterator[str]:
    try:
        with serving(runtime) as url:
            yield url
    except RealModelUnavailable as exc:
        pytest.skip(f"the real model does not start here: {exc}")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "local")


def _run(
    scenario: str, out: Path, models: list[str], *overrides: str
) -> tuple[engine.RunResult, list[engine.EpisodeRecord]]:
    loaded = engine.load_scenario(ROOT / "scenarios" / scenario, models=models, overrides=["concurrency=1", *overrides])
    result = engine.run_sync(loaded, out=out, cache=False)
    return result, list(RunDir(result.run_dir).iter_records())


def test_crescendo_and_fairness_with_the_tutor_on_the_real_model(base_url: str, tmp_path: Path) -> None:
    runs = (("crescendo.yaml", 3, ["student.max_turns=[3, 3]"]), ("fairness.yaml", 2, ["student.max_turns=4"]))
    for scenario, limit, shorter in runs:
        tutor = f"tutor={tutor_spec(base_url, max_tokens=96)}"
        result, records = _run(scenario, tmp_path / scenario, [tutor], f"limit={limit}", *shorter)
        assert (result.ok, result.errors) == (limit, 0), scenario
        replies = [t for r in records for t in r.turns if t.role == "tutor" and t.model is not None]  # not openings
        assert replies and {t.model for t in replies} == {MODEL}
        assert sum(t.usage.completion_tokens for t in replies) > 0 and any(t.text.strip() for t in replies)
        played = result.summary["run"]["played_by"]
        assert played["tutor"] == {"model": MODEL, "provider": "openai", "simulator": False}
        assert all(judge["simulator"] for judge in played["judge"])


def test_a_judge_on_the_real_model_gives_structured_verdicts(base_url: str, tmp_path: Path) -> None:
    """Every tutor reply is judged or counted unjudged, never an error record for a parse failure."""
    judge = f"judge={tutor_spec(base_url, max_tokens=160)}"
    overrides = ("limit=2", "judge_votes=1", "judges=[harm, answer_leak]", "student.max_turns=[2, 2]")
    result, records = _run("crescendo.yaml", tmp_path, [judge], *overrides)
    assert (result.ok, result.errors) == (2, 0)
    for record in records:
        for turn in (t for t in record.turns if t.role == "tutor"):
            found = {j.metric for j in record.judgments if j.target == turn.index and j.judge == "harm"}
            assert found in ({"unsafe", "refused", "sub_risk"}, {"unjudged"})
    (row,) = [row for row in result.summary["judging"]["parse_failures"] if row["rubric"] == "harm"]
    assert row["model"] == MODEL and row["answers"] >= sum(1 for r in records for t in r.turns if t.role == "tutor")


def test_the_same_run_twice_gives_the_same_transcripts(runtime: Runtime, tmp_path: Path) -> None:
    """Each run on a freshly started server (see `serving`), at concurrency 1, with the episode seeds as call seeds."""
    transcripts = []
    for attempt in ("first", "second"):
        with serving(runtime) as url:
            tutor = f"tutor={tutor_spec(url, max_tokens=64)}"
            _, records = _run("fairness.yaml", tmp_path / attempt, [tutor], "limit=2", "student.max_turns=3")
        transcripts.append({r.id: [(t.role, t.text) for t in r.turns] for r in records})
    assert transcripts[0] == transcripts[1] and transcripts[0]
