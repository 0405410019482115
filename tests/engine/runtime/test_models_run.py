"""A study of several tutors, run: labelled records, per-tutor tables and the comparison, resume, and a breaker
that stops only the tutor whose endpoint died (real HTTP against loopback servers)."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

import engine
from engine.core._format import fit_to_width
from engine.report._models import view_for
from engine.runtime._plugins import SUMMARIZERS
from engine.runtime._rundir import RunDir
from engine.scenario._budget import Budget
from engine.tools.serve._server import LoopbackServer, ServeOptions
from tests.helpers import make_scenario, scenario_data

TWO = [
    {"label": "calm", "model": "sim/tutor", "params": {"leak_base": 0.05, "leak_per_turn": 0.02}},
    {"label": "rash", "model": "sim/tutor", "params": {"leak_base": 0.6, "leak_per_turn": 0.2}},
]
KEY_ENV = "SIMRUN_MODELS_TEST_KEY"


def _study(tmp_path: Path, tutor: Any = TWO, **extra: Any) -> engine.Scenario:
    return make_scenario(tmp_path, models={**scenario_data()["models"], "tutor": tutor}, **extra)


def _records(run_dir: Path) -> list[engine.EpisodeRecord]:
    return list(RunDir(run_dir).iter_records())


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[engine.Scenario, engine.RunResult]:
    base = tmp_path_factory.mktemp("study")
    scenario = _study(base)
    return scenario, engine.run_sync(scenario, out=base / "runs")


def test_every_unit_is_played_by_every_tutor_with_its_label(study: tuple[engine.Scenario, engine.RunResult]) -> None:
    scenario, result = study
    records = _records(result.run_dir)
    planned = engine.Runner(scenario).episodes
    assert sorted(r.id for r in records) == sorted(e.id for e in planned)
    assert Counter(r.tutor for r in records) == {"calm": len(planned) // 2, "rash": len(planned) // 2}
    lines = (result.run_dir / "episodes.jsonl").read_bytes().splitlines()
    assert all(orjson.loads(line)["tutor"] in ("calm", "rash") for line in lines)


def test_two_tutors_meet_the_same_student(study: tuple[engine.Scenario, engine.RunResult]) -> None:
    """The student's randomness is keyed by the unit, not the tutor: each unit's first student turn is the same."""
    records = _records(study[1].run_dir)
    first: dict[tuple[str, str], set[str]] = {}
    for record in records:
        student = next(t.text for t in record.turns if t.role == "student")
        first.setdefault((record.item_id, str(sorted(record.condition.items()))), set()).add(student)
    assert first and all(len(texts) == 1 for texts in first.values())


def test_the_summary_holds_each_tutors_tables_and_the_comparison(
    study: tuple[engine.Scenario, engine.RunResult], tmp_path: Path
) -> None:
    scenario, result = study
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    models = summary["models"]
    assert models["labels"] == ["calm", "rash"]
    one = engine.run_sync(_study(tmp_path, TWO[0]), out=tmp_path / "one")
    alone = set(one.summary) - {"run", "judge_agreement", "judging", "provenance", "sequential"}
    assert all(set(models["by_model"][label]) == alone for label in ("calm", "rash"))
    comparison = models["comparison"]
    assert comparison["complete_units"] == len(engine.Runner(scenario).episodes) // 2
    board = comparison["leaderboard"]
    assert [row["model"] for row in board] == ["calm", "rash"]  # lower unsafe_reply_share ranks first
    assert all(1 <= row["rank_low"] <= row["rank_high"] <= 2 for row in board)
    assert {row["metric"] for row in comparison["pairs"]} == {row["metric"] for row in comparison["omnibus"]}
    markdown = (result.run_dir / "report.md").read_text()
    html = (result.run_dir / "report.html").read_text()
    for text in (markdown, html):
        assert "Leaderboard" in text and "Tutor calm" in text and "Tutor rash" in text


def test_a_resumed_study_plays_only_what_is_missing(tmp_path: Path) -> None:
    """A crash after some records: the resume plays the missing episodes of both tutors, nothing twice."""
    scenario = _study(tmp_path)
    first = engine.run_sync(scenario, out=tmp_path / "runs")
    path = first.run_dir / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    kept = lines[: len(lines) // 3]
    path.write_bytes(b"".join(kept))
    resumed = engine.run_sync(scenario, resume=first.run_dir)
    records = _records(resumed.run_dir)
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids)) == len(lines)
    assert [orjson.loads(line) for line in kept] == [orjson.loads(line) for line in path.read_bytes().splitlines()][
        : len(kept)
    ]
    assert Counter(r.tutor for r in records) == {"calm": len(lines) // 2, "rash": len(lines) // 2}


@pytest.fixture
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.001 * (attempt + 1))
    monkeypatch.setenv(KEY_ENV, "sk-models-test-not-a-real-key")


@pytest.mark.usefixtures("_fast_backoff")
async def test_a_dead_tutor_stops_only_its_own_episodes(tmp_path: Path) -> None:
    """One tutor's endpoint refuses for good: its breaker opens, its episodes stop (those unplayed are left for a
    resume), and the other tutor, the student and the judge carry on to the end of the plan."""
    async with LoopbackServer(ServeOptions()) as good, LoopbackServer(ServeOptions(quota_rate=1.0)) as dead:

        def at(server: LoopbackServer, name: str, label: str | None = None) -> dict[str, Any]:
            spec = {"model": f"openai/{name}", "base_url": server.base_url, "api_key_env": KEY_ENV}
            return spec if label is None else {**spec, "label": label}

        models = {
            "tutor": [at(good, "sim-tutor", "alive"), at(dead, "sim-tutor", "gone")],
            "student": at(good, "sim-student"),
            "judge": [at(good, "sim-judge")],
        }
        scenario = make_scenario(tmp_path, models=models, concurrency=4)
        result = await engine.run(scenario, out=tmp_path / "runs", probe=False)
        dead_calls = dead.stats.requests
    records = _records(result.run_dir)
    planned = engine.Runner(scenario).episodes
    alive = [r for r in records if r.tutor == "alive"]
    assert len(alive) == len(planned) // 2 and all(r.status == "ok" for r in alive)
    gone = [r for r in records if r.tutor == "gone"]
    assert all(r.status == "error" for r in gone) and len(gone) < len(planned) // 2
    assert dead_calls <= scenario.concurrency
    assert result.status == "interrupted" and result.reason is not None
    assert "tutor gone" in result.reason and "quota" in result.reason
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["models"]["balance"]["gone"]["ok"] == 0


def test_a_study_stopped_by_its_budget_stays_balanced(tmp_path: Path) -> None:
    """Admission follows the interleaved plan: a token budget spent early leaves every tutor within one episode
    of the others, and the report says how many each has."""
    scenario = _study(tmp_path, [*TWO, {**TWO[0], "label": "third"}], concurrency=2)
    result = engine.run_sync(scenario, out=tmp_path / "runs", budget=Budget(max_tokens=60_000))
    records = _records(result.run_dir)
    planned = len(engine.Runner(scenario).episodes)
    assert result.status == "interrupted" and 0 < len(records) < planned
    counts = Counter(r.tutor for r in records)
    assert max(counts.values()) - min(counts.get(label, 0) for label in ("calm", "rash", "third")) <= 1
    balance = orjson.loads((result.run_dir / "summary.json").read_bytes())["models"]["balance"]
    assert {label: row["ok"] + row["error"] for label, row in balance.items()} == {
        label: counts.get(label, 0) for label in ("calm", "rash", "third")
    }
    assert all(row["planned"] == planned // 3 for row in balance.values())


def test_the_terminal_leaderboard_fits_80_columns(study: tuple[engine.Scenario, engine.RunResult]) -> None:
    summary = orjson.loads((study[1].run_dir / "summary.json").read_bytes())
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(fit_to_width(view_for(summary, SUMMARIZERS.get("crescendo")).render_console(summary), 80))
    text = console.export_text()
    lines = text.splitlines()
    assert lines[0].startswith("protocol:") and any(line.startswith("Tutors compared") for line in lines[:3])
    assert any(line.strip().startswith("Leaderboard: unsafe_reply_share (lower is better)") for line in lines[:8])
    assert "95% CI" in text and max(len(line) for line in text.splitlines()) <= 80
    assert "Harm by subject × dimension × tutor" in text, "the kind's study tables fit too"


def test_a_cached_study_replays_every_tutor_from_the_cache(tmp_path: Path) -> None:
    """Cache keys hold each tutor's seed and params: a second run answers every call from the cache and gives
    each tutor the same dialogues, with no tutor answered by another's replies."""
    scenario = _study(tmp_path, limit=3)
    cache = tmp_path / "cache.sqlite"
    first = engine.run_sync(scenario, out=tmp_path / "a", cache=cache)
    second = engine.run_sync(scenario, out=tmp_path / "b", cache=cache)
    texts = [{r.id: [t.text for t in r.turns] for r in _records(run.run_dir)} for run in (first, second)]
    assert texts[0] == texts[1] and len(texts[0]) == 6
    manifest = orjson.loads((second.run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["cache_hits"] > 0 and manifest["calls"]["requests"] == 0
    replies: dict[tuple[str, str], dict[str | None, tuple[str, ...]]] = {}
    for record in _records(second.run_dir):
        unit = (record.item_id, str(sorted(record.condition.items())))
        replies.setdefault(unit, {})[record.tutor] = tuple(t.text for t in record.turns if t.role == "tutor")
    assert any(len(set(by_tutor.values())) == 2 for by_tutor in replies.values())


def test_a_tutor_free_unit_resumes_and_replays_from_the_cache_once(tmp_path: Path) -> None:
    """ReMath's `given: human` is played once per study: a resume after a crash plays each missing episode once (the
    tutor-free ones too), and a second run answers every call from the cache with the same records."""
    remath = Path(__file__).resolve().parents[3] / "scenarios" / "remath.yaml"
    tutors = [f"tutor={{label: {t['label']}, model: sim/tutor}}" for t in TWO]
    scenario = engine.load_scenario(remath, overrides=["limit=12"], models=tutors)
    cache = tmp_path / "cache.sqlite"
    first = engine.run_sync(scenario, out=tmp_path / "a", cache=cache)
    full = {r.id: (r.tutor, [t.text for t in r.turns], r.judgments) for r in _records(first.run_dir)}
    path = first.run_dir / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: len(lines) // 3]))
    resumed = engine.run_sync(scenario, resume=first.run_dir)
    again = engine.run_sync(scenario, out=tmp_path / "b", cache=cache)
    free = [key for key, (tutor, _, _) in full.items() if tutor is None]
    assert free and all("tutor=" not in key and "given=human" in key for key in free)
    assert len(full) == len(lines) == 2 * 12 - len(free)
    for run in (resumed, again):
        records = _records(run.run_dir)
        assert len({r.id for r in records}) == len(records) == len(full)
        assert {r.id: (r.tutor, [t.text for t in r.turns], r.judgments) for r in records} == full
    manifest = orjson.loads((again.run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["requests"] == 0 and manifest["counts"]["tutor_free"] == len(free)
