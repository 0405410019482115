"""Structured judge output over real HTTP: each rubric sends its own strict JSON schema, `json_object` where the
endpoint has no schemas, and a verdict that stays wrong-shaped or truncated leaves the reply unjudged, never an
error record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

import engine
from engine.runtime._rundir import RunDir
from judges.harm import HarmVerdict
from judges.pedagogy import MultiTurnQuality, SingleTurnQuality
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import scenario_data, write_bank

VALID = {
    "harm": {"unsafe": False, "sub_risk": None, "refused": False, "rationale": "keeps the student thinking"},
    "pedagogy_single": {"gives_away_answer": False, "challenges_learner": True, "on_topic": True, "clarity": 4},
    "pedagogy_multi": {"misconception_reduced": True, "learns_more": True, "motivation_improved": False},
}
SCHEMAS: dict[str, type[BaseModel]] = {
    "harm": HarmVerdict,
    "pedagogy_single": SingleTurnQuality,
    "pedagogy_multi": MultiTurnQuality,
}
WRONG_SHAPE = '{"verdict": "safe", "score": 5}'
TRUNCATED = '{"unsafe": false, "sub_risk": null, "rationale": "The tutor keeps asking the stu'


def _rubric(body: dict[str, Any]) -> str:
    """Which rubric a judge call asks for: the schema's name, else the system prompt's wording."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return str(response_format["json_schema"]["name"])
    system = str(body["messages"][0]["content"])
    if "pedagogical safety" in system:
        return "harm"
    return "pedagogy_single" if "gives_away_answer" in system else "pedagogy_multi"


async def _run(tmp_path: Path, script: Any, **judge: Any) -> tuple[engine.RunResult, FakeOpenAI]:
    async with FakeOpenAI(script) as fake:
        data = scenario_data(limit=4, concurrency=2, judge_votes=1)
        data["models"]["judge"] = [{"model": "openai/judge", "base_url": fake.base_url, **judge}]
        write_bank(tmp_path / "bank.yaml")
        scenario = engine.build_scenario(data, base_dir=tmp_path)
        runner = engine.Runner(scenario, out=tmp_path / "runs", report=engine.write_report, probe=False)
        return await runner.run(), fake


def _records(result: engine.RunResult) -> list[engine.EpisodeRecord]:
    return list(RunDir(result.run_dir).iter_records())


async def test_each_rubric_sends_its_own_strict_schema_and_bad_verdicts_are_unjudged(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """One judge role serves harm and pedagogy: each call names its rubric's schema; harm answers wrong-shaped or
    truncated JSON every time, pedagogy answers well, so harm leaves replies unjudged and pedagogy judges them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    calls: list[str] = []

    def script(body: dict[str, Any]) -> Reply:
        rubric = _rubric(body)
        calls.append(rubric)
        if rubric == "harm":
            return Reply(content=WRONG_SHAPE if len(calls) % 2 else TRUNCATED)
        return Reply(content=orjson.dumps(VALID[rubric]).decode())

    result, fake = await _run(tmp_path, script)
    assert (result.ok, result.errors, result.exit_code) == (4, 0, 0)
    for seen in fake.seen:
        response_format = seen.body["response_format"]
        assert response_format["type"] == "json_schema" and response_format["json_schema"]["strict"] is True
        schema = response_format["json_schema"]["schema"]
        rubric = response_format["json_schema"]["name"]
        assert set(schema["properties"]) == set(SCHEMAS[rubric].model_fields)
        assert schema["required"] == list(schema["properties"]) and schema["additionalProperties"] is False
    assert {"harm", "pedagogy_single", "pedagogy_multi"} >= set(calls) >= {"harm"}
    records = _records(result)
    tutor_replies = sum(1 for r in records for t in r.turns if t.role == "tutor")
    unjudged = [j for r in records for j in r.judgments if j.metric == "unjudged"]
    assert len(unjudged) == tutor_replies and {j.judge for j in unjudged} == {"harm"}
    assert all("invalid output 3 times" in (j.rationale or "") for j in unjudged)
    assert sum(1 for r in records for j in r.judgments if j.judge == "pedagogy" and j.metric != "unjudged") > 0
    judging = result.summary["judging"]
    assert judging["judges"]["harm"]["unjudged"] == tutor_replies and judging["judges"]["harm"]["judged"] == 0
    assert judging["judges"]["pedagogy"]["unjudged"] == 0 and judging["judges"]["pedagogy"]["judged"] == len(records)
    rates = {row["rubric"]: row for row in judging["parse_failures"]}
    assert rates["harm"]["rate"] == 1.0 and rates["harm"]["answers"] == 3 * tutor_replies
    assert all(row["rate"] == 0.0 for rubric, row in rates.items() if rubric != "harm")
    assert result.summary["run"]["played_by"]["judge"] == [
        {"model": "openai/judge", "provider": "openai", "simulator": False}
    ]


async def test_json_object_fallback_validates_the_reply(tmp_path: Path, monkeypatch: Any) -> None:
    """An endpoint with `structured_output: json_object` gets no schema; a valid verdict in prose is judged."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def script(body: dict[str, Any]) -> Reply:
        return Reply(content="Here is my verdict: " + orjson.dumps(VALID[_rubric(body)]).decode())

    result, fake = await _run(tmp_path, script, structured_output="json_object")
    assert (result.ok, result.errors) == (4, 0)
    assert {str(seen.body["response_format"]) for seen in fake.seen} == {"{'type': 'json_object'}"}
    records = _records(result)
    assert not [j for r in records for j in r.judgments if j.metric == "unjudged"]
    assert all(row["rate"] == 0.0 for row in result.summary["judging"]["parse_failures"])
