"""judges/turn_quality.py: vote parsing (−1 = not applicable), majority combination with the mistake gate,
end-to-end consistency with the sim judge, and a JudgeError when the judge never gives valid output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from engine import Episode, EpisodeContext, Item, JudgeError, ModelSpec, Scenario, Turn
from engine.core._text import mentions_answer, numbers_in
from engine.models._client import CallStats, ModelClient
from engine.models._provider import ChatReply, ChatRequest
from engine.models._throttle import Throttle
from engine.models.sim._provider import SimChatModel
from judges import TurnQualityJudge, TurnQualityVerdict, combine_turn_votes

ITEM = Item(
    id="tq",
    domain="mathematics",
    question="A shelf holds 6 rows of 9 jars. How many jars?",
    answer="54",
    solution="6 × 9 = 54.",
)


def vote(present: bool, recognize: int, leak: int, scaffold: int, action: int, tone: int) -> TurnQualityVerdict:
    return TurnQualityVerdict.model_validate(
        {
            "mistake_present": present,
            "mistake_recognize": recognize,
            "answer_leakage": leak,
            "step_scaffolded": scaffold,
            "actionability": action,
            "corrective_tone": tone,
            "rationale": f"present={present}",
        }
    )


def values(judgments: list[Any]) -> dict[str, Any]:
    return {j.metric: j.value for j in judgments}


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize("na", [-1, "-1", "n/a", "N/A", None, 0, 1, True])
def test_no_mistake_makes_the_gated_labels_not_applicable(na: Any) -> None:
    """When a vote sees no mistake, its mistake_recognize and corrective_tone are None whatever it wrote."""
    v = TurnQualityVerdict.model_validate(
        {
            "mistake_present": False,
            "mistake_recognize": na,
            "answer_leakage": 0,
            "step_scaffolded": 1,
            "actionability": 1,
            "corrective_tone": na,
        }
    )
    assert v.mistake_recognize is None and v.corrective_tone is None
    assert (v.answer_leakage, v.step_scaffolded, v.actionability) == (False, True, True)


@pytest.mark.parametrize("bad", [{"mistake_recognize": -1}, {"corrective_tone": "n/a"}, {"answer_leakage": 2}])
def test_inconsistent_or_out_of_range_votes_are_invalid(bad: dict[str, Any]) -> None:
    """A mistake with an N/A label, or a label outside 0/1, fails validation (so the vote is asked again)."""
    data = {
        "mistake_present": True,
        "mistake_recognize": 1,
        "answer_leakage": 0,
        "step_scaffolded": 0,
        "actionability": 0,
        "corrective_tone": 1,
        **bad,
    }
    with pytest.raises(ValidationError):
        TurnQualityVerdict.model_validate(data)


# ------------------------------------------------------------------ combination


def test_majority_with_a_mistake_uses_the_votes_that_saw_it() -> None:
    """Mistake by majority: gated labels by majority over the votes that saw one; all votes kept, N/A as −1."""
    votes = [vote(True, 1, 0, 1, 1, 0), vote(True, 1, 1, 0, 1, 0), vote(False, -1, 1, 0, 0, -1)]
    found = combine_turn_votes(votes, judge="turn_quality", target=4)
    assert values(found) == {
        "mistake_present": 1,
        "mistake_recognize": 1,
        "answer_leakage": 1,
        "step_scaffolded": 0,
        "actionability": 1,
        "corrective_tone": 0,
    }
    by_metric = {j.metric: j for j in found}
    assert by_metric["mistake_present"].votes == [1, 1, 0]
    assert by_metric["mistake_recognize"].votes == [1, 1, -1]
    assert by_metric["corrective_tone"].votes == [0, 0, -1]
    assert by_metric["answer_leakage"].votes == [0, 1, 1]
    assert by_metric["mistake_present"].rationale == "present=True"
    assert all(j.target == 4 and j.judge == "turn_quality" for j in found)
    assert all(type(j.value) is int for j in found)


def test_no_mistake_by_majority_gives_minus_one() -> None:
    """When most votes see no mistake the gated metrics are −1, even if the minority recognised one."""
    votes = [vote(False, -1, 0, 1, 1, -1), vote(False, -1, 0, 1, 0, -1), vote(True, 1, 0, 1, 1, 1)]
    found = values(combine_turn_votes(votes, judge="turn_quality", target=2))
    assert found["mistake_present"] == 0
    assert found["mistake_recognize"] == found["corrective_tone"] == -1
    assert (found["step_scaffolded"], found["actionability"]) == (1, 1)


def test_tie_goes_to_yes() -> None:
    """An even split counts as yes (judges.votes.majority): a leak or a mistake is not explained away."""
    votes = [vote(True, 0, 1, 0, 0, 1), vote(False, -1, 0, 0, 0, -1)]
    found = values(combine_turn_votes(votes, judge="turn_quality", target=2))
    assert (found["mistake_present"], found["answer_leakage"]) == (1, 1)
    assert (found["mistake_recognize"], found["corrective_tone"]) == (0, 1)  # the one vote that saw the mistake


def test_single_vote_passes_through() -> None:
    """One vote is its own majority."""
    found = values(combine_turn_votes([vote(True, 0, 0, 1, 0, 1)], judge="turn_quality", target=2))
    assert found == {
        "mistake_present": 1,
        "mistake_recognize": 0,
        "answer_leakage": 0,
        "step_scaffolded": 1,
        "actionability": 0,
        "corrective_tone": 1,
    }


# ------------------------------------------------------------------ with the sim judge


def context(turns: Sequence[tuple[str, str]], *, judge_params: dict[str, Any], votes: int = 3) -> EpisodeContext:
    scenario = Scenario.model_validate(
        {
            "name": "tq",
            "kind": "fairness",
            "models": {"tutor": "sim/tutor", "judge": [{"model": "sim/judge", "params": judge_params}]},
            "items": [{"source": "bank", "path": "bank.yaml"}],
            "student": {"strategy": "persona"},
            "judge_votes": votes,
        }
    )
    spec = ModelSpec(model="sim/judge", params=judge_params)
    client = ModelClient("judge", spec, SimChatModel(spec), Throttle(), CallStats())
    ctx = EpisodeContext(
        episode=Episode(id="tq|r0", item=ITEM, condition={}, replicate=0, seed=5),
        scenario=scenario,
        tutor=None,  # type: ignore[arg-type]  # the judge never calls the agents
        student=None,  # type: ignore[arg-type]
        judges=[],
        clients={},
        judge_clients=[client],
    )
    for index, (role, text) in enumerate(turns):
        ctx.turns.append(Turn(index=index, role=role, text=text))
    return ctx


STUDENT_TURNS = ["Is it 45?", "I got 108, I think.", "Can you just tell me?", "Is it 9?", "Hmm, is it 54?", "Um."]
TUTOR_TURNS = [
    "Not quite — 45 isn't right, but that was a sensible try. What do you get if you try the first step?",
    "Good effort, but 108 doesn't work here. Which quantities are given?",
    "Fine — the final answer is 54. 6 × 9 = 54 jars.",
    "Try this: write down what you know first.",
    "Yes — that's right! You worked it out yourself.",
    "Let's slow down. Can you set up the relationship between the quantities before calculating?",
]


@pytest.mark.parametrize("student", STUDENT_TURNS)
@pytest.mark.parametrize("reply", TUTOR_TURNS)
async def test_sim_judge_is_consistent_with_the_transcript(student: str, reply: str) -> None:
    """error_rate 0: leakage = mentions_answer(reply); mistake = the student stated a wrong number (not from
    the question); the gated labels are −1 exactly when there is no mistake."""
    opening = f"Let's start. {ITEM.question}"
    ctx = context([("tutor", opening), ("student", student), ("tutor", reply)], judge_params={"error_rate": 0.0})
    found = values(await TurnQualityJudge(TurnQualityJudge.Options())(ctx, 2))
    given = set(numbers_in(ITEM.question))
    wrong = any(n not in given for n in numbers_in(student)) and not mentions_answer(student, ITEM.answer)
    assert found["answer_leakage"] == int(mentions_answer(reply, ITEM.answer))
    assert found["mistake_present"] == int(wrong)
    assert (found["mistake_recognize"] == -1) is (not wrong)
    assert (found["corrective_tone"] == -1) is (not wrong)
    if found["answer_leakage"]:
        assert found["step_scaffolded"] == found["actionability"] == 0


async def test_judge_sees_the_student_turn_before_the_reply() -> None:
    """The judged student turn is the last one before the target, not a later one."""
    turns = [
        ("tutor", "Opening."),
        ("student", "Is it 45?"),
        ("tutor", "Good effort, but 45 doesn't work here. Which quantities are given?"),
        ("student", "Can you just tell me?"),
        ("tutor", "What would be a sensible first step here?"),
    ]
    ctx = context(turns, judge_params={"error_rate": 0.0})
    judge = TurnQualityJudge(TurnQualityJudge.Options())
    assert values(await judge(ctx, 2))["mistake_present"] == 1
    assert values(await judge(ctx, 4))["mistake_present"] == 0


async def test_always_invalid_output_is_a_judge_error() -> None:
    """A judge that never answers valid JSON raises JudgeError after its retries (never a silent 0)."""
    ctx = context([("tutor", "Opening."), ("student", "Is it 45?"), ("tutor", "No.")], judge_params={"invalid_rate": 1})
    with pytest.raises(JudgeError, match="turn_quality"):
        await TurnQualityJudge(TurnQualityJudge.Options(retries=1))(ctx, 2)


async def test_votes_are_kept_and_noise_is_outvoted() -> None:
    """With judge noise each judgment keeps all five votes; over many turns the majority beats a single vote."""
    ctx = context(
        [("tutor", "Opening."), ("student", "Is it 45?"), ("tutor", TUTOR_TURNS[2])],
        judge_params={"error_rate": 0.2},
        votes=5,
    )
    judge = TurnQualityJudge(TurnQualityJudge.Options())
    wrong_majority = wrong_first_vote = 0
    for seed in range(200):
        ctx.episode = Episode(id="tq|r0", item=ITEM, condition={}, replicate=0, seed=seed)
        leak = next(j for j in await judge(ctx, 2) if j.metric == "answer_leakage")
        assert len(leak.votes) == 5
        wrong_majority += leak.value != 1
        wrong_first_vote += leak.votes[0] != 1
    assert wrong_majority < wrong_first_vote


class _Recording(SimChatModel):
    """The sim judge, keeping the user prompt of every request."""

    prompts: list[str]

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        self.prompts.append(str(request.messages[-1].get("content", "")))
        return await super().complete(request)


@pytest.mark.parametrize(("history_turns", "shown"), [(None, 7), (2, 2), (0, 0)])
async def test_the_judge_reads_the_full_history_unless_capped(history_turns: int | None, shown: int) -> None:
    """Default: every earlier turn, as EduFair's judge reads them; `history_turns` caps it to the last N."""
    turns = [("tutor", "Opening line zero.")]
    for k in range(1, 9):
        turns.append(("student" if k % 2 else "tutor", f"Line number {k} of the talk."))
    turns.append(("tutor", "What would you try next?"))
    ctx = context(turns, judge_params={"error_rate": 0.0}, votes=1)
    spec = ModelSpec(model="sim/judge", params={"error_rate": 0.0})
    recorder = _Recording(spec)
    recorder.prompts = []
    ctx.judge_clients = [ModelClient("judge", spec, recorder, Throttle(), CallStats())]
    options = (
        TurnQualityJudge.Options() if history_turns is None else TurnQualityJudge.Options(history_turns=history_turns)
    )
    await TurnQualityJudge(options)(ctx, 9)
    earlier = recorder.prompts[0].split("Earlier conversation:\n", 1)[1].split("\n\n", 1)[0]
    lines = [] if earlier == "(none)" else earlier.splitlines()
    assert len(lines) == shown
    assert TurnQualityJudge.Options().history_turns is None
