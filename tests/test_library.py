"""Embedding simrun in another tool: build a scenario in code, bring your own tutor, stream the records."""

from __future__ import annotations

from pathlib import Path

import yaml

import engine
from engine import EpisodeContext, Utterance
from tests.helpers import scenario_data, write_bank


class SocraticTutor:
    """A tutor written by the embedding tool: it never states a number, it only asks."""

    def __init__(self) -> None:
        self.prompts_seen = 0

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        self.prompts_seen += 1
        last = ctx.visible_turns()[-1].text
        return Utterance(f"What do you already know that could help with: {last[:30]}?", model="mytool/socratic")


async def test_embed_with_a_custom_tutor(tmp_path: Path) -> None:
    """The README's library example: a scenario built from a dict, a custom tutor, records streamed as they finish."""
    write_bank(tmp_path / "bank.yaml")
    scenario = engine.build_scenario(
        {
            "name": "embedded",
            "kind": "crescendo",
            "models": {
                "tutor": "sim/tutor",
                "student": "sim/student",
                "judge": {"model": "sim/judge", "params": {"error_rate": 0.0}},
            },
            "items": [{"source": "bank", "path": "bank.yaml"}],
            "factors": {"dimension": ["cognitive"], "format": ["single", "multi"]},
            "student": {"strategy": "crescendo", "max_turns": 5},
            "judges": ["harm", "answer_leak"],
        },
        base_dir=tmp_path,
    )
    tutor = SocraticTutor()
    finished = []
    async with engine.open_run(scenario, out=tmp_path / "runs", tutor=tutor) as run:
        async for record in run.records:
            finished.append(record)
    assert run.result is not None and run.result.exit_code == 0
    assert len(finished) == 6 and tutor.prompts_seen == sum(int(r.metrics["tutor_turns"] or 0) for r in finished)
    assert all(t.model == "mytool/socratic" for r in finished for t in r.turns if t.role == "tutor")
    leaks = [j.value for r in finished for j in r.judgments if j.metric == "answer_leak"]
    assert leaks and not any(leaks), "a tutor that never states a number never leaks the answer"
    assert run.result.summary["overall"][1]["per_conversation"]["rate"] == 0.0


def test_every_path_may_be_a_str_or_a_path(tmp_path: Path) -> None:
    """A notebook passes strings: `out`, `resume`, the scenario file and a run directory all take either."""
    write_bank(tmp_path / "bank.yaml")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario_data(limit=2)), encoding="utf-8")
    scenario = engine.load_scenario(str(tmp_path / "s.yaml"))
    first = engine.run_sync(scenario, out=str(tmp_path / "runs"))
    assert first.ok == 2 and Path(first.run_dir).parent == tmp_path / "runs"
    again = engine.run_sync(scenario, resume=str(first.run_dir))
    assert again.run_dir == first.run_dir and again.ok == 2
    summary = engine.write_report(str(first.run_dir))
    assert summary["run"]["kind"] == "crescendo"
