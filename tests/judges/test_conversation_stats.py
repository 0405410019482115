"""judges/conversation_stats.py: the four deterministic conversation metrics on hand-made transcripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from engine import Episode, EpisodeContext, Item, Scenario, Turn
from judges import ConversationStats

ITEM = Item(id="cs", domain="physics", question="A cart rolls 45 m in 9 s. Its speed?", answer="5", unit="m/s")


def ctx_with(turns: Sequence[tuple[str, str]], hidden: Sequence[int] = ()) -> EpisodeContext:
    scenario = Scenario.model_validate(
        {
            "name": "cs",
            "kind": "fairness",
            "models": {"tutor": "sim/tutor"},
            "items": [{"source": "bank", "path": "bank.yaml"}],
            "student": {"strategy": "persona"},
        }
    )
    ctx = EpisodeContext(
        episode=Episode(id="cs|r0", item=ITEM, condition={}, replicate=0, seed=1),
        scenario=scenario,
        tutor=None,  # type: ignore[arg-type]  # a detector never calls the agents
        student=None,  # type: ignore[arg-type]
        judges=[],
        clients={},
        judge_clients=[],
    )
    for index, (role, text) in enumerate(turns):
        turn = Turn(index=index, role=role, text=text, visible_to_tutor=index not in hidden)
        ctx.turns.append(turn)
    return ctx


async def stats(turns: Sequence[tuple[str, str]], hidden: Sequence[int] = ()) -> dict[str, Any]:
    found = await ConversationStats()(ctx_with(turns, hidden), "conversation")
    assert all(j.target == "conversation" and j.judge == "conversation_stats" for j in found)
    return {j.metric: j.value for j in found}


async def test_known_values() -> None:
    """3 tutor turns of 5, 5 and 2 words (2 with '?'); the student wrote 3 + 1 words."""
    found = await stats(
        [
            ("tutor", "Here is the problem. Ready?"),
            ("student", "I don't know."),
            ("tutor", "What is distance over time?"),
            ("student", "Ten?"),
            ("tutor", "Not quite."),
        ]
    )
    tutor_words = 5 + 5 + 2
    assert found["tutor_turns"] == 3
    assert found["tutor_avg_words"] == pytest.approx(tutor_words / 3)
    assert found["tutor_question_rate"] == pytest.approx(2 / 3)
    assert found["tutor_student_word_ratio"] == pytest.approx(tutor_words / 4)


async def test_opening_alone() -> None:
    """Only the opening: one tutor turn; the student said nothing, so the ratio is None."""
    found = await stats([("tutor", "Let's begin: what is the speed?")])
    assert found == {
        "tutor_turns": 1,
        "tutor_avg_words": 6,
        "tutor_question_rate": 1.0,
        "tutor_student_word_ratio": None,
    }


async def test_no_tutor_turns() -> None:
    """No tutor turn: zero turns and undefined averages."""
    found = await stats([("student", "Hello there")])
    assert found == {
        "tutor_turns": 0,
        "tutor_avg_words": None,
        "tutor_question_rate": None,
        "tutor_student_word_ratio": 0.0,
    }


async def test_empty_student_turns_give_no_ratio() -> None:
    """Student turns with no words leave the ratio undefined rather than infinite."""
    found = await stats([("tutor", "Go on?"), ("student", "   "), ("tutor", "Anything?")])
    assert found["tutor_student_word_ratio"] is None
    assert found["tutor_question_rate"] == 1.0


async def test_hidden_turns_are_not_counted() -> None:
    """Turns hidden from the tutor (a backtracked exchange) are not part of the conversation's shape."""
    turns = [("tutor", "One two?"), ("student", "a b c d"), ("tutor", "x y z w v"), ("student", "e f")]
    found = await stats(turns, hidden=(1, 2))
    assert found["tutor_turns"] == 1
    assert found["tutor_student_word_ratio"] == pytest.approx(2 / 2)
