"""EduFair's dialogue as the paper ran it: the tutor model opens and is judged, T_max counted in tutor turns,
the student's prompt names its grade and class, and the paper's decoding reaches real endpoints only."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tutoring import FairnessProtocol
from engine import build
from engine.models.sim._provider import SimChatModel
from engine.scenario._spec import ModelsSpec
from judges.fairness_replies import judged_replies
from tests.agents.test_tutoring import (
    NEVER_SOLVES,
    NO_LEAK,
    Recording,
    episodes,
    fairness_scenario,
    play,
    record,
)

PAPER = {"opening_by": "model", "counts": "tutor_turns"}


@pytest.mark.parametrize(("max_turns", "opening_by"), [(3, "model"), (5, "model"), (4, "template")])
async def test_tutor_turns_count_caps_the_tutors_turns(tmp_path: Path, max_turns: int, opening_by: str) -> None:
    options = {"max_turns": max_turns, "counts": "tutor_turns", "opening_by": opening_by}
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options=options)
    for episode in episodes(scenario)[:3]:
        rec = record(await play(scenario, episode))
        roles = [t.role for t in rec.turns]
        assert roles == ["tutor", "student"] * (max_turns - 1) + ["tutor"]
        assert rec.metrics["stop_reason"] == "max_turns"
        judged = {j.target for j in rec.judgments if isinstance(j.target, int)}
        tutor = [t.index for t in rec.turns if t.role == "tutor"]
        assert judged == set(tutor if opening_by == "model" else tutor[1:])
        assert rec.metrics["judged_tutor_turns"] == len(judged)
        assert (rec.turns[0].model is not None) == (opening_by == "model")


async def test_the_model_opening_sees_only_the_system_prompt_and_is_judged(tmp_path: Path) -> None:
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options={**PAPER, "max_turns": 2})
    recorder = Recording(SimChatModel(scenario.models.tutors[0]))
    rec = record(await play(scenario, episodes(scenario)[0], tutor_model=recorder))
    assert [m["role"] for m in recorder.requests[0].messages] == ["system"]
    assert {j.metric for j in rec.judgments if j.target == 0} >= {"answer_leakage", "step_scaffolded"}


async def test_messages_count_with_a_model_opening_judges_one_more_reply(tmp_path: Path) -> None:
    """The old reading (10 messages, template opening) judges 4 tutor replies at most; a model opening, 5."""
    counts = {}
    for opening_by in ("template", "model"):
        options = {"max_turns": 10, "opening_by": opening_by}
        scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options=options)
        rec = record(await play(scenario, episodes(scenario)[0]))
        counts[opening_by] = rec.metrics["judged_tutor_turns"]
        found = judged_replies([rec])
        assert found is not None
        assert (found.dialogues, found.mean, found.min, found.max, found.unjudged) == (1, *[counts[opening_by]] * 3, 0)
    assert counts == {"template": 4, "model": 5}


async def test_the_students_prompt_names_its_grade_and_class(tmp_path: Path) -> None:
    framing = 'You are in Grade {{ 9 if item.domain == "mathematics" else 8 }} and take a {{ item.domain }} class.'
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, options={"framing": framing})
    assert scenario.models.student is not None
    recorder = Recording(SimChatModel(scenario.models.student))
    episode = next(e for e in episodes(scenario) if e.item.domain == "physics")
    await play(scenario, episode, student_model=recorder)
    assert recorder.requests[0].messages[0]["content"].startswith("You are in Grade 8 and take a physics class. ")


@pytest.mark.parametrize(
    ("options", "tutor", "student"),
    [
        (PAPER | {"max_turns": 10}, 10, 9),
        ({"counts": "tutor_turns", "max_turns": 10}, 9, 9),
        ({"opening_by": "model"}, 5, 5),
    ],
)
def test_estimate_follows_the_count_and_the_opening(
    tmp_path: Path, options: dict[str, object], tutor: int, student: int
) -> None:
    scenario = fairness_scenario(tmp_path, options=options, system_prompt="You are a tutor.")
    estimate = FairnessProtocol().estimate(build(scenario), episodes(scenario)[0])
    assert (estimate["tutor"].upper_calls, estimate["student"].upper_calls) == (tutor, student)
    assert 0 < estimate["student"].calls < student and 0 < estimate["tutor"].calls < tutor  # the sim can stop early


def test_decoding_reaches_real_endpoints_and_the_sim_says_what_it_cannot_honour() -> None:
    models = ModelsSpec.model_validate(
        {
            "tutor": {"model": "openai/some-tutor", "base_url": "http://127.0.0.1:9/v1", "params": {"max_tokens": 99}},
            "student": "sim/student",
            "judge": ["sim/judge", {"model": "openai/some-judge", "base_url": "http://127.0.0.1:9/v1"}],
            "decoding": {
                "tutor": {"temperature": 0.1, "max_tokens": 2048},
                "student": {"temperature": 0},
                "judge": {"temperature": 0, "max_tokens": 2048},
            },
        }
    )
    roles = models.by_role()
    assert roles[0][1].params == {"temperature": 0.1, "max_tokens": 99}  # the model's own params win
    assert roles[1][1].params == {}  # the sim: nothing applied
    assert roles[3][1].params == {"temperature": 0, "max_tokens": 2048}
    refused = models.decoding_refused()
    assert len(refused) == 1 and refused[0].startswith("sim/judge (judge) cannot honour max_tokens=2048")
