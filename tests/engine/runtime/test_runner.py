"""The runtime: records appended once each, failures isolated, interruption and resume, streaming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine import EpisodeContext, EpisodeRecord, Runner, ScenarioError, Turn, Utterance
from engine.runtime._rundir import RunDir
from engine.scenario._plan import load_items, plan_episodes
from tests.helpers import make_scenario


def _summary_without_run(run_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    summary.pop("run")
    return summary


def _records(run_dir: Path) -> list[EpisodeRecord]:
    return list(RunDir(run_dir).iter_records())


async def test_run_writes_the_run_directory(tmp_path: Path) -> None:
    """A finished run holds one record per planned episode, a manifest, a summary and a report."""
    result = await engine.run(make_scenario(tmp_path), out=tmp_path / "runs")
    assert result.status == "finished" and result.exit_code == 0 and result.ok == result.planned == 12
    records = _records(result.run_dir)
    scenario = make_scenario(tmp_path)
    assert sorted(r.id for r in records) == sorted(e.id for e in plan_episodes(scenario, load_items(scenario)))
    manifest = orjson.loads((result.run_dir / "manifest.json").read_bytes())
    assert manifest["status"] == "finished" and manifest["counts"]["ok"] == 12
    assert manifest["models"]["tutor"] == "sim/tutor" and manifest["providers"] == ["sim"]
    assert manifest["calls"]["requests"] > 0 and manifest["scenario_hash"] == make_scenario(tmp_path).content_hash()
    assert (result.run_dir / "report.md").read_text().startswith("# simrun report: small")
    events = [orjson.loads(line)["event"] for line in (result.run_dir / "events.jsonl").read_bytes().splitlines()]
    assert events[0] == "run.started" and events[-1] == "run.finished", "library runs keep their own event log"
    assert events.count("episode.finished") == 12
    assert all(r.usage.total == sum(t.usage.total for t in r.turns) for r in records)


async def test_same_seed_same_records(tmp_path: Path) -> None:
    """Two runs of one scenario produce the same transcripts and judgments, whatever the scheduling."""
    first = await engine.run(make_scenario(tmp_path, concurrency=1), out=tmp_path / "a")
    second = await engine.run(make_scenario(tmp_path, concurrency=12), out=tmp_path / "b")

    def content(run_dir: Path) -> dict[str, Any]:
        return {r.id: ([t.text for t in r.turns], [j.model_dump() for j in r.judgments]) for r in _records(run_dir)}

    assert content(first.run_dir) == content(second.run_dir)
    assert _summary_without_run(first.run_dir) == _summary_without_run(second.run_dir)


class FlakyTutor:
    """Fails on one item, answers on the others: a failing episode must not stop the rest."""

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        if ctx.episode.item.id == "t-speed":
            raise RuntimeError("tutor crashed on purpose")
        return Utterance("What do you think the first step is?", model="test/tutor")


async def test_failed_episode_is_an_error_record(tmp_path: Path) -> None:
    """An exception in one episode becomes its error record; the others finish; exit code 3."""
    result = await engine.run(make_scenario(tmp_path), out=tmp_path / "runs", tutor=FlakyTutor())
    records = _records(result.run_dir)
    failed = [r for r in records if r.status == "error"]
    assert len(records) == 12 and len(failed) == 4 and result.exit_code == 3
    assert {r.item_id for r in failed} == {"t-speed"}
    assert all(r.error is not None and r.error.type == "RuntimeError" for r in failed)
    assert all(r.turns and r.turns[0].role == "student" for r in failed), "partial transcripts are kept"


async def test_interrupt_then_resume_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    """Stopping admission mid-run flushes what finished; resume runs only the rest and matches a clean run."""
    scenario = make_scenario(tmp_path, concurrency=2)
    runner = Runner(scenario, out=tmp_path / "stopped", report=engine.write_report)

    async def stop_after_three(record: EpisodeRecord) -> None:
        if runner.ok + runner.errors >= 3:
            runner.interrupt()

    runner.on_episode = stop_after_three
    stopped = await runner.run()
    assert stopped.status == "interrupted" and stopped.exit_code == 130
    done = {r.id for r in _records(stopped.run_dir)}
    assert 3 <= len(done) < 12
    before = (stopped.run_dir / "episodes.jsonl").read_bytes()

    resumer = Runner(scenario, resume=stopped.run_dir, report=engine.write_report)
    await resumer.open()  # the constructor does no I/O: the run directory is read here
    assert {e.id for e in resumer.pending} == {e.id for e in resumer.episodes} - done
    resumed = await resumer.run()
    assert resumed.status == "finished" and resumed.exit_code == 0
    after = (stopped.run_dir / "episodes.jsonl").read_bytes()
    assert after.startswith(before), "records are appended, never rewritten"
    ids = [r.id for r in _records(stopped.run_dir)]
    assert len(ids) == len(set(ids)) == 12

    clean = await engine.run(scenario, out=tmp_path / "clean")
    assert _summary_without_run(stopped.run_dir) == _summary_without_run(clean.run_dir)
    manifest = orjson.loads((stopped.run_dir / "manifest.json").read_bytes())
    assert manifest["status"] == "finished" and manifest["counts"]["resumed_with"] == len(done)


async def test_torn_last_line_is_repaired_on_resume(tmp_path: Path) -> None:
    """A half-written record left by a crash is cut off and its episode is run again, once."""
    scenario = make_scenario(tmp_path, limit=4)
    first = await engine.run(scenario, out=tmp_path / "runs")
    path = first.run_dir / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + lines[2][:40])
    assert len(_records(first.run_dir)) == 2
    await engine.run(scenario, resume=first.run_dir)
    ids = [r.id for r in _records(first.run_dir)]
    assert len(ids) == len(set(ids)) == 4
    assert all(line.endswith(b"\n") for line in path.read_bytes().splitlines(keepends=True))


async def test_resume_refuses_a_changed_scenario(tmp_path: Path) -> None:
    """Resume with a different scenario is refused, naming the keys that changed."""
    first = await engine.run(make_scenario(tmp_path, limit=2), out=tmp_path / "runs")
    with pytest.raises(ScenarioError, match=r"changed: judge_votes, seed"):
        await Runner(
            make_scenario(tmp_path, limit=2, seed=99, judge_votes=5), resume=first.run_dir, report=engine.write_report
        ).open()
    resumed = Runner(
        make_scenario(tmp_path, limit=2, concurrency=3), resume=first.run_dir, report=engine.write_report
    )  # concurrency may change
    await resumed.open()
    resumed.run_dir.release()


async def test_open_run_streams_records_and_turns(tmp_path: Path) -> None:
    """Records arrive through the async iterator as episodes finish; turn callbacks see every turn in order."""
    seen_turns: dict[str, list[int]] = {}

    async def on_turn(episode: engine.Episode, turn: Turn) -> None:
        seen_turns.setdefault(episode.id, []).append(turn.index)

    streamed: list[str] = []
    async with engine.open_run(make_scenario(tmp_path), out=tmp_path / "runs", on_turn=on_turn) as handle:
        async for record in handle.records:
            streamed.append(record.id)
            assert seen_turns[record.id] == [t.index for t in record.turns]
    assert handle.result is not None and len(streamed) == handle.result.planned == 12


async def test_leaving_open_run_early_cancels_the_rest(tmp_path: Path) -> None:
    """Breaking out of the stream cancels episodes in flight; what was written stays valid."""
    scenario = make_scenario(tmp_path, concurrency=1)
    async with engine.open_run(scenario, out=tmp_path / "runs") as handle:
        async for _ in handle.records:
            break
    assert handle.result is None
    assert 1 <= len(_records(handle.runner.run_dir.path)) < 12


def test_run_sync_from_plain_code(tmp_path: Path) -> None:
    """The synchronous entry point runs a scenario in its own event loop."""
    result = engine.run_sync(make_scenario(tmp_path, limit=2), out=tmp_path / "runs")
    assert result.ok == 2 and result.summary["run"]["simulated"] is True


def test_template_with_a_missing_variable_fails_before_any_call(tmp_path: Path) -> None:
    """A tutor prompt naming a variable that no episode provides is a scenario error at planning time."""
    scenario = make_scenario(tmp_path, tutor={"system_prompt": "Tutor {{ item.domain }}. {{ cue }}"})
    with pytest.raises(ScenarioError, match=r"tutor: template refers to an unknown value: 'cue' is undefined"):
        Runner(scenario, out=tmp_path / "runs", report=engine.write_report).prepare()
    assert not (tmp_path / "runs").exists()
