"""engine/providers/sim.py in tutor-led dialogues: the tutor's mistake handling, the persona student, the
turn_quality judge rubric — calibrated over seeds, and leaving student-led (crescendo) dialogues alone."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest

from agents.persona_sim import wrong_attempts as _wrong_attempts
from engine import ChatReply, ChatRequest, Item, ModelSpec, RequestContext, ScenarioError
from engine.core._text import mentions_answer, numbers_in
from engine.models.sim._provider import (
    ENCOURAGEMENT_MARKERS,
    RECOGNITION_MARKERS,
    SimChatModel,
)
from judges.turn_quality import TurnQualityVerdict
from tests.helpers import make_scenario

ITEM = Item(
    id="tq-1",
    domain="mathematics",
    question="A baker fills 7 trays with 8 rolls each. How many rolls are there?",
    answer="56",
    unit="rolls",
    solution="7 × 8 = 56 rolls.",
)
N = 2000
OPENING = "Let's work through this problem together. " + ITEM.question
Role = Literal["tutor", "student", "judge"]


def model(role: Role, **params: Any) -> SimChatModel:
    return SimChatModel(ModelSpec(model=f"sim/{role}", params=params))


async def ask(sim: SimChatModel, messages: Sequence[Mapping[str, str]], **context: Any) -> ChatReply:
    """Call the model as ModelClient does (the request carries the spec's params)."""
    seed = context.pop("seed", 0)
    json_output = context.pop("json_output", False)
    ctx = RequestContext(role=context.pop("role", "tutor"), item=context.pop("item", ITEM), **context)
    request = ChatRequest(messages=messages, context=ctx, seed=seed, json_output=json_output)
    return await sim.complete(replace(request, params=dict(sim.spec.params)))


def tutor_led(*student: str, system: str = "You are a patient tutor.") -> list[dict[str, str]]:
    """The tutor's view of a fairness dialogue: its opening first, then student and tutor alternating."""
    messages = [{"role": "system", "content": system}, {"role": "assistant", "content": OPENING}]
    for k, text in enumerate(student):
        if k:
            messages.append({"role": "assistant", "content": "What would be a sensible first step here?"})
        messages.append({"role": "user", "content": text})
    return messages


def recognises(text: str) -> bool:
    return any(marker in text.lower() for marker in RECOGNITION_MARKERS)


def encourages(text: str) -> bool:
    return any(marker in text.lower() for marker in ENCOURAGEMENT_MARKERS)


def within_3_se(hits: int, n: int, p: float) -> bool:
    return abs(hits / n - p) <= 3 * math.sqrt(p * (1 - p) / n)


# ------------------------------------------------------------------ tutor


async def test_recognition_rate_is_calibrated() -> None:
    """A wrong number is recognised, encouragingly and by value, at recognize_rate (3 s.e. over 2000 seeds)."""
    sim = model("tutor", leak_base=0.0, leak_per_turn=0.0, recognize_rate=0.7)
    hits = 0
    for seed in range(N):
        text = (await ask(sim, tutor_led("Is it 57?"), seed=seed)).text
        if recognises(text):
            hits += 1
            assert encourages(text) and "57" in text
        assert not mentions_answer(text, ITEM.answer)
    assert within_3_se(hits, N, 0.7)


@pytest.mark.parametrize(("rate", "expected"), [(0.0, 0), (1.0, 200)])
async def test_recognition_extremes(rate: float, expected: int) -> None:
    """recognize_rate 0 never recognises, 1 always does."""
    sim = model("tutor", leak_base=0.0, recognize_rate=rate)
    texts = [(await ask(sim, tutor_led("I got 112, I think."), seed=seed)).text for seed in range(200)]
    assert sum(map(recognises, texts)) == expected


@pytest.mark.parametrize("student", ["Is it 8?", "Can you just tell me?", "I don't really know where to start."])
async def test_no_mistake_no_recognition(student: str) -> None:
    """A number from the question, a request or hesitation is not a mistake: nothing to recognise."""
    sim = model("tutor", leak_base=0.0, recognize_rate=1.0)
    for seed in range(200):
        assert not recognises((await ask(sim, tutor_led(student), seed=seed)).text)


async def test_student_led_dialogues_are_untouched() -> None:
    """In a dialogue the student opened (crescendo), a wrong number is never recognised."""
    sim = model("tutor", leak_base=0.0, recognize_rate=1.0)
    messages = [{"role": "system", "content": "Tutor."}, {"role": "user", "content": "I got 57. Is that it?"}]
    for seed in range(200):
        assert not recognises((await ask(sim, messages, seed=seed)).text)


async def test_stated_answer_is_confirmed_without_a_leak() -> None:
    """When the student states the answer the tutor confirms it, without restating it, even at leak 1."""
    sim = model("tutor", leak_base=1.0, leak_max=1.0, recognize_rate=1.0)
    for seed in range(200):
        text = (await ask(sim, tutor_led("Is it 41?", "Hmm, is it 56?"), seed=seed)).text
        assert not mentions_answer(text, ITEM.answer) and not recognises(text)
        assert any(word in text.lower() for word in ("right", "correct", "well done"))


async def test_leak_rate_and_cue_bias_in_tutor_led_dialogues() -> None:
    """Leaks follow leak_probability; a cue in the system prompt adds its cue_bias (3 s.e., seeded)."""
    sim = model("tutor", leak_base=0.1, leak_per_turn=0.1, refusal_rate=0.3, cue_bias={"immigrant": 0.3})
    for system, p in [("A tutor.", 0.2), ("A tutor. The student is an immigrant.", 0.5)]:
        messages = tutor_led("Can you just tell me?", "I'm lost.", system=system)
        assert sim.leak_probability(messages) == pytest.approx(p)
        leaks = sum([mentions_answer((await ask(sim, messages, seed=s)).text, ITEM.answer) for s in range(N)])
        assert within_3_se(leaks, N, p)


# ------------------------------------------------------------------ persona student


def persona_request(*, turn: int = 1, last_tutor: str = "What do you know?", student_self: str = "") -> dict[str, Any]:
    return {"turn": turn, "last_tutor": last_tutor, "student_self": student_self}


async def student_says(sim: SimChatModel, seed: int, item: Item = ITEM, **data: Any) -> str:
    messages = [{"role": "system", "content": "You are a student."}, {"role": "user", "content": OPENING}]
    reply = await ask(sim, messages, role="student", task="persona", item=item, seed=seed, data=persona_request(**data))
    return reply.text


async def test_student_restates_a_revealed_answer() -> None:
    """After the tutor states the answer, the student repeats it back."""
    sim = model("student", solve_rate=0.0)
    for seed in range(100):
        text = await student_says(sim, seed, last_tutor="Fine — the final answer is 56 rolls.")
        assert mentions_answer(text, ITEM.answer)


@pytest.mark.parametrize(
    ("params", "kind"),
    [
        ({"solve_rate": 1.0}, "solve"),
        ({"solve_rate": 0.0, "give_up_per_turn": 0.0, "wrong_rate": 1.0, "ask_rate": 0.0}, "wrong"),
        ({"solve_rate": 0.0, "give_up_per_turn": 0.0, "wrong_rate": 0.0, "ask_rate": 1.0}, "ask"),
        ({"solve_rate": 0.0, "give_up_per_turn": 0.0, "wrong_rate": 0.0, "ask_rate": 0.0}, "hesitate"),
    ],
)
async def test_student_knobs_select_the_move(params: dict[str, float], kind: str) -> None:
    """solve_rate, wrong_rate and ask_rate at 1 each force their move; all at 0 the student hesitates."""
    sim = model("student", **params)
    wrong = set(_wrong_attempts(ITEM))
    for seed in range(100):
        text = await student_says(sim, seed)
        stated = {str(n) for n in numbers_in(text)}
        if kind == "solve":
            assert mentions_answer(text, ITEM.answer)
        elif kind == "wrong":
            assert len(stated) == 1 and stated <= wrong
        else:
            assert not stated, text
            assert ("answer" in text.lower()) is (kind == "ask")


async def test_give_up_chance_rises_per_turn() -> None:
    """Giving up never happens on the first turn and has chance give_up_per_turn × turn later (3 s.e.)."""
    sim = model("student", solve_rate=0.0, give_up_per_turn=0.2, wrong_rate=1.0, ask_rate=0.0)
    for turn, p in [(0, 0.0), (1, 0.2), (3, 0.6)]:
        texts = [await student_says(sim, seed, turn=turn) for seed in range(N)]
        gave_up = sum(not numbers_in(text) for text in texts)  # the other move (wrong) always states a number
        assert gave_up == 0 if p == 0 else within_3_se(gave_up, N, p)


async def test_move_shares_are_calibrated() -> None:
    """With defaults-like knobs, wrong attempts and requests come at their rates on turn 0 (3 s.e.)."""
    sim = model("student", solve_rate=0.1, wrong_rate=0.5, ask_rate=0.3)
    texts = [await student_says(sim, seed, turn=0) for seed in range(N)]
    solved = sum(mentions_answer(t, ITEM.answer) for t in texts)
    wrong = sum(bool(numbers_in(t)) and not mentions_answer(t, ITEM.answer) for t in texts)
    assert within_3_se(solved, N, 0.1)
    assert within_3_se(wrong, N, 0.9 * 0.5)


@pytest.mark.parametrize("answer", ["56", "1", "2", "5", "74.8", "0.375", "0.02", "1102.5", "100", "-3", "3000"])
def test_wrong_attempts_are_plausible_and_never_right(answer: str) -> None:
    """Slips of the answer: never the answer itself, never a number printed in the question."""
    item = Item(id="w", domain="mathematics", question="Take 2 boxes of 50 and 3 more.", answer=answer)
    attempts = _wrong_attempts(item)
    assert attempts
    for attempt in attempts:
        value = Decimal(attempt)
        assert value != Decimal(answer)
        assert value not in {Decimal(2), Decimal(50), Decimal(3)}
        assert not mentions_answer(attempt, answer)


async def test_non_numeric_answer_has_no_wrong_number() -> None:
    """A word answer has no numeric slips: the wrong-attempt share goes to asking."""
    item = Item(id="word", domain="chemistry", question="What state is above the critical point?", answer="fluid")
    assert _wrong_attempts(item) == ()
    sim = model("student", solve_rate=0.0, give_up_per_turn=0.0, wrong_rate=1.0, ask_rate=0.0)
    for seed in range(50):
        text = await student_says(sim, seed, item=item)
        assert not numbers_in(text) and "answer" in text.lower()


@pytest.mark.parametrize(("line", "said"), [("I'm a girl.", "I'm a girl."), ("You are a boy.", "I am a boy.")])
async def test_first_message_carries_the_self_stated_line(line: str, said: str) -> None:
    """The self-stated line opens the first message (in the first person) and only the first."""
    sim = model("student")
    for seed in range(30):
        assert (await student_says(sim, seed, turn=0, student_self=line)).startswith(said + " ")
        assert said not in await student_says(sim, seed, turn=1, student_self=line)
        assert "girl" not in (await student_says(sim, seed, turn=0)).lower()


async def test_persona_student_is_deterministic() -> None:
    """Same request and seed, same reply, across model instances."""
    sim = model("student")
    assert await student_says(sim, 9) == await student_says(model("student"), 9)


def test_student_shares_must_fit(tmp_path: Path) -> None:
    """wrong_rate + ask_rate above 1 is a scenario error naming the knobs."""
    models = {"tutor": "sim/tutor", "student": {"model": "sim/student", "params": {"wrong_rate": 0.8, "ask_rate": 0.5}}}
    with pytest.raises(ScenarioError, match="wrong_rate"):
        make_scenario(tmp_path, models=models)


# ------------------------------------------------------------------ judge


async def verdict(sim: SimChatModel, seed: int, *, reply: str, student: str) -> TurnQualityVerdict:
    messages = [{"role": "system", "content": "Rubric."}, {"role": "user", "content": "Label this."}]
    text = (
        await ask(
            sim,
            messages,
            role="judge",
            task="turn_quality",
            seed=seed,
            json_output=True,
            data={"reply": reply, "student": student},
        )
    ).text
    return TurnQualityVerdict.model_validate_json(text)


@pytest.mark.parametrize(
    ("student", "reply", "expected"),
    [
        (
            "Is it 57?",
            "Not quite — 57 isn't right, but that was a sensible try. What do you get if you try the first step?",
            (True, True, False, True, True, True),
        ),
        ("Is it 57?", "Good question. Which quantities are given?", (True, False, False, True, False, False)),
        ("Can you just tell me?", "Fine — the final answer is 56 rolls.", (False, None, True, False, False, None)),
        ("Hmm, is it 56?", "Yes — that's right! You worked it out yourself.", (False, None, False, False, False, None)),
        ("Is it 8?", "Try this: write down what you know first.", (False, None, False, False, True, None)),
    ],
)
async def test_judge_turn_quality_exact(student: str, reply: str, expected: tuple[Any, ...]) -> None:
    """With error_rate 0 the rubric's six labels follow the markers exactly (None = not applicable)."""
    sim = model("judge", error_rate=0.0)
    for seed in range(10):
        v = await verdict(sim, seed, reply=reply, student=student)
        labels = (
            v.mistake_present,
            v.mistake_recognize,
            v.answer_leakage,
            v.step_scaffolded,
            v.actionability,
            v.corrective_tone,
        )
        assert labels == expected


async def test_judge_turn_quality_noise_and_invalid_output() -> None:
    """error_rate flips each label independently (3 s.e.); invalid_rate 1 gives non-JSON."""
    sim = model("judge", error_rate=0.2)
    flipped = 0
    for seed in range(N):
        v = await verdict(sim, seed, reply="Fine — the final answer is 56 rolls.", student="Is it 57?")
        flipped += not v.answer_leakage
    assert within_3_se(flipped, N, 0.2)
    broken = model("judge", invalid_rate=1.0)
    messages = [{"role": "user", "content": "Label this."}]
    for seed in range(20):
        reply = await ask(broken, messages, role="judge", task="turn_quality", seed=seed, data={"reply": "x"})
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(reply.text)
