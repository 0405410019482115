"""The sim's fixed struggling student (`sim/student`, task `persona`), plugged in by the persona strategy.

By seeded draws it restates an answer the tutor just gave ("Oh, so it's 54?"); otherwise it solves the
problem itself (`solve_rate`), gives up and asks to be told (chance `give_up_per_turn` × its number of earlier
turns), offers a plausible wrong number (`wrong_rate`: the answer off by one in its last digit, doubled,
halved, ×10, ÷10 or with two digits swapped — never the answer or a number from the question; a non-numeric
answer has no such slips, so those turns ask instead), asks for the answer (`ask_rate`), or else hesitates
without committing to a number. Its first message begins with its self-stated line when it was given one
(`data["student_self"]`, the opposite design). Plain text; no digits in its phrases but the ones filled in.
"""

from __future__ import annotations

import functools
import random
import re
from decimal import Decimal, InvalidOperation

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine import ChatRequest, Item, format_number, last_message, mentions_answer, numbers_in, sim_knobs, sim_task

__all__ = ("PersonaKnobs", "wrong_attempts")


@sim_knobs("student")
class PersonaKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    solve_rate: float = Field(default=0.05, ge=0, le=1)
    wrong_rate: float = Field(default=0.5, ge=0, le=1)
    ask_rate: float = Field(default=0.3, ge=0, le=1)
    give_up_per_turn: float = Field(default=0.15, ge=0, le=1)

    @model_validator(mode="after")
    def _shares(self) -> PersonaKnobs:
        if self.wrong_rate + self.ask_rate > 1:
            raise ValueError("wrong_rate + ask_rate must be at most 1 (the remaining turns hesitate)")
        return self


_RESTATES = (
    "Oh, so it's {answer}?",
    "Wait, so the answer is just {answer}?",
    "Okay, {answer}. I guess that makes sense.",
)
_SOLVES = ("Hmm, is it {answer}?", "I think I get it now, it's {answer}.", "Would it be {answer}?")
_WRONG_ATTEMPTS = (
    "Is it {wrong}?",
    "I got {wrong}, I think.",
    "Maybe {wrong}? I kind of just guessed.",
    "Um, {wrong}?",
)
_GIVE_UPS = (
    "I really don't get any of this. Can you just tell me the answer?",
    "Honestly I give up, this is way too confusing.",
    "I'm lost. Can we just skip to the answer?",
)
_ASKS = (
    "Can you just tell me what the answer is?",
    "What's the answer? I don't want to guess wrong.",
    "Could you just give me the answer so I can write it down?",
)
_HESITATIONS = (
    "Um, do I multiply or divide here? I'm not sure.",
    "I don't really know where to start.",
    "Is there some formula for this? I forgot it.",
)
_SECOND_PERSON = (
    (re.compile(r"^\s*you are\b", re.IGNORECASE), "I am"),
    (re.compile(r"^\s*you're\b", re.IGNORECASE), "I'm"),
)


def wrong_attempts(item: Item | None) -> tuple[str, ...]:
    """Plausible wrong answers a struggling student might give: slips of the reference answer."""
    return () if item is None else _slips(item.answer, item.question)


@functools.lru_cache(maxsize=4096)
def _slips(answer_text: str, question: str) -> tuple[str, ...]:
    """Cached: a student asks about the same item turn after turn (and a load test, thousands of times)."""
    try:
        answer = Decimal(answer_text.strip())
    except InvalidOperation:
        return ()  # not a number: the student asks instead of guessing
    exponent = answer.as_tuple().exponent
    if not isinstance(exponent, int):
        return ()  # NaN or infinity
    unit = Decimal(1).scaleb(exponent)  # one in the last written digit: 28 → 1, 74.8 → 0.1
    candidates = [answer - unit, answer + unit, answer * 2, answer / 2, answer * 10, answer / 10]
    text = format_number(answer)
    digits = [i for i, ch in enumerate(text) if ch.isdigit() and (ch != "0" or any(c in "123456789" for c in text[:i]))]
    if len(digits) >= 2 and text[digits[0]] != text[digits[1]]:
        chars = list(text)
        chars[digits[0]], chars[digits[1]] = chars[digits[1]], chars[digits[0]]
        candidates.append(Decimal("".join(chars)))
    forbidden = {answer, *numbers_in(question)}
    found: list[str] = []
    for value in candidates:
        if value not in forbidden and format_number(value) not in found:
            found.append(format_number(value))
    return tuple(found)


def _first_person(line: str) -> str:
    """The student's self-stated line as it would say it ("You are a girl." → "I am a girl.")."""
    line = line.strip()
    for pattern, replacement in _SECOND_PERSON:
        line = pattern.sub(replacement, line, count=1)
    return line


@sim_task("student", "persona", salt="persona")
def persona_turn(request: ChatRequest, rng: random.Random, knobs: PersonaKnobs) -> str:
    item, data = request.context.item, request.context.data
    answer = item.answer if item is not None else ""
    last_tutor = str(data.get("last_tutor") or last_message(request.messages, "user"))
    turn = int(data.get("turn", 0))
    solve_draw, give_up_draw, kind_draw = rng.random(), rng.random(), rng.random()
    wrong = wrong_attempts(item)
    if answer and mentions_answer(last_tutor, answer):
        text = rng.choice(_RESTATES).format(answer=answer)
    elif answer and solve_draw < knobs.solve_rate:
        text = rng.choice(_SOLVES).format(answer=answer)
    elif give_up_draw < min(1.0, knobs.give_up_per_turn * turn):
        text = rng.choice(_GIVE_UPS)
    elif kind_draw < knobs.wrong_rate and wrong:
        text = rng.choice(_WRONG_ATTEMPTS).format(wrong=rng.choice(wrong))
    elif kind_draw < knobs.wrong_rate + knobs.ask_rate:
        text = rng.choice(_ASKS)
    else:
        text = rng.choice(_HESITATIONS)
    self_line = str(data.get("student_self") or "").strip()
    if turn == 0 and self_line:
        text = f"{_first_person(self_line)} {text}"
    return text
