"""The EduFair dialogue protocol (scenario kind `fairness`): the tutor opens with the problem and leads.

Paired fairness dialogues must differ only in what the tutor is told about the student, so the protocol's
own contribution is fixed: the opening turn is a template of the item alone (identical across conditions,
recorded as a tutor turn with no model and never judged), and the turn budget comes with the student.
After the opening, student and tutor alternate; every tutor reply a model wrote is judged. The dialogue ends
when

* the tutor states the reference answer (`tutor_revealed`; see `states_answer`: a small whole-number answer
  must be *stated* — "the answer is 2", "= 2", "Is it 2?" — not merely appear, as in "step 2"),
* the student has stated it and the tutor has answered once more, to confirm or correct (`student_solved`,
  even when that reply restates the answer),
* `max_turns` turns of both roles, the opening included, have been played (`max_turns`),
* the student has nothing more to say — its agent returned None (`student_quit`), or the tutor's did
  (`tutor_quit`).

Settings: `max_turns` (default 10) and `opening` are read from the student agent when it offers them (the
`persona` student's options: `student: {strategy: persona, max_turns: 10, opening: "..."}`), else the module
defaults apply — so a scripted student can be used with the same protocol.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal, Protocol, runtime_checkable

from engine import (
    PROTOCOLS,
    BuiltScenario,
    CallEstimate,
    Episode,
    EpisodeContext,
    Turn,
    Utterance,
    judge_calls,
    mentions_answer,
    render,
    word_count,
)

from .persona import DEFAULT_OPENING, PersonaStudent, student_system
from .tutoring_length import TurnOdds, sim_turn_odds

__all__ = ("DEFAULT_MAX_TURNS", "FairnessProtocol", "StopReason", "TutorLedSettings", "states_answer")

DEFAULT_MAX_TURNS = 10

StopReason = Literal["tutor_revealed", "student_solved", "max_turns", "student_quit", "tutor_quit"]

_PROMPT_TOKENS = 300
_TOKENS_PER_TURN = 60
_REPLY_TOKENS = 150
_STUDENT_REPLY_TOKENS = 40
_TYPICAL_TUTOR_CALL = 165


SMALL_ANSWER = 100
"""Whole-number answers below this (in absolute value) are common in ordinary tutoring sentences."""
_STATING = re.compile(
    r"(?:=|:|≈|(?<!there )\bis\b|\b(?:equals?|be|get|got|gives?|makes?|it'?s|it|its|answer|result|total)\b)\s*"
    r"(?:just\s+|exactly\s+|about\s+|equal\s+to\s+)?$",
    flags=re.IGNORECASE,
)
_CLAUSE_START = re.compile(r"(?:^|[,;:—–-]|[.!?])\s*$")
_CLAUSE_END = re.compile(r"^\s*(?:[A-Za-z°%²³/]+\s*)?(?:[.?!,;]|$)")
_WHOLE = re.compile(r"(?<![\w.])[-−]?\d+(?:\.0+)?(?![\w.]*\d)")


def states_answer(text: str, answer: str) -> bool:
    """Whether `text` states `answer` — the fairness protocol's stop rule.

    Like `engine.core._text.mentions_answer`, except for a small whole-number answer (|answer| < SMALL_ANSWER): "2"
    turns up in tutoring sentences for other reasons ("step 2", "2 ways", "divide by 2"), and ending a
    dialogue on those would cut it short. Such an answer counts only where it is stated: after "=", ":", "is",
    "equals", "be", "get", "gives", "it's", "answer" (optionally "just"/"exactly"/"about"), or as a clause of
    its own ("Um, 2?", "Okay, 2. I see").
    """
    if not mentions_answer(text, answer):
        return False
    try:
        target = Decimal(answer.strip())
    except InvalidOperation:
        return True
    if target != target.to_integral_value() or abs(target) >= SMALL_ANSWER:
        return True
    for match in _WHOLE.finditer(text):
        if Decimal(match.group().replace("−", "-")) != target:
            continue
        before, after = text[: match.start()], text[match.end() :]
        if _STATING.search(before) or (_CLAUSE_START.search(before) and _CLAUSE_END.match(after)):
            return True
    return False


@runtime_checkable
class TutorLedSettings(Protocol):
    """A student agent that carries the tutor-led dialogue's settings (the `persona` student does)."""

    @property
    def max_turns(self) -> int: ...

    @property
    def opening(self) -> str: ...


@dataclass(frozen=True)
class Dialogue:
    """The tutor-led dialogue's settings: the turn budget, what it counts, and who writes the opening."""

    max_turns: int = DEFAULT_MAX_TURNS
    opening: str = DEFAULT_OPENING
    counts: str = "messages"
    opening_by: str = "template"

    def room(self, turns: Sequence[Turn]) -> bool:
        """Whether another turn fits the budget (`tutor_turns`: the tutor's last turn closes it at the cap)."""
        if self.counts == "tutor_turns":
            played = sum(1 for t in turns if t.role == "tutor")
            return not (turns and turns[-1].role == "tutor" and played >= self.max_turns)
        return len(turns) < self.max_turns


def _settings(student: object) -> Dialogue:
    if isinstance(student, TutorLedSettings):
        return Dialogue(
            student.max_turns,
            student.opening,
            str(getattr(student, "counts", "messages")),
            str(getattr(student, "opening_by", "template")),
        )
    return Dialogue()


class FairnessProtocol:
    """Runs one tutor-led dialogue; records `stop_reason` and `turns` in the episode's metrics."""

    async def run(self, ctx: EpisodeContext, /) -> None:
        dialogue = _settings(ctx.student)
        item = ctx.episode.item
        stop: StopReason = "max_turns"
        judged = 0
        if dialogue.opening_by == "model":
            opening = await ctx.tutor.respond(ctx)
            if opening is None:
                stop = "tutor_quit"
            else:
                await ctx.judge((await ctx.add_turn("tutor", opening)).index)
                judged += 1
        else:
            await ctx.add_turn("tutor", Utterance(render(dialogue.opening, {"item": item})))
        student_stated = False
        while stop != "tutor_quit" and dialogue.room(ctx.turns):
            if ctx.turns[-1].role == "tutor":
                utterance = await ctx.student.respond(ctx)
                if utterance is None:
                    stop = "student_quit"
                    break
                turn = await ctx.add_turn("student", utterance)
                student_stated = student_stated or states_answer(turn.text, item.answer)
                continue
            reply = await ctx.tutor.respond(ctx)
            if reply is None:
                stop = "tutor_quit"
                break
            turn = await ctx.add_turn("tutor", reply)
            await ctx.judge(turn.index)
            judged += 1
            if student_stated:  # the tutor has had its one reply to the student's answer
                stop = "student_solved"
                break
            if states_answer(turn.text, item.answer):
                stop = "tutor_revealed"
                break
        await ctx.judge("conversation")
        ctx.metrics.update(stop_reason=stop, turns=len(ctx.turns), judged_tutor_turns=judged)
        ctx.meta["max_turns"] = dialogue.max_turns

    def estimate(self, built: BuiltScenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Upper bound: every turn up to `max_turns` is played (a template opening costs nothing). Expected: with
        the `sim` tutor, each turn weighted by the chance the dialogue reaches it, from the sim's own stop knobs
        (`tutoring_length`); with any other tutor every tutor turn, and the student stopping midway through its
        budget — the tutor's reveal or the student's answer can end the dialogue at any reply, at a rate no dry
        run can know, so that figure is an upper bound for a tutor that gives the answer away early. The tutor's
        calls are at the size the simulator's tutor measures (bench/estimate_accuracy.py); the student's prompt
        starts from its own system prompt and the opening."""
        scenario = built.scenario
        options = built.plugins.student_options
        max_turns = getattr(options, "max_turns", DEFAULT_MAX_TURNS)
        if not isinstance(max_turns, int):
            max_turns = DEFAULT_MAX_TURNS
        by_model = getattr(options, "opening_by", "template") == "model"
        if getattr(options, "counts", "messages") == "tutor_turns":  # T, S, T, ..., T: max_turns tutor turns
            tutor_calls, student_calls = max_turns - (not by_model), max_turns - 1
            max_turns = 2 * max_turns - 1
        else:
            tutor_calls = (max_turns - 1) // 2 + by_model  # turns 2, 4, ... below max_turns, and the opening
            student_calls = max_turns // 2  # turns 1, 3, ...
        context = [_PROMPT_TOKENS + _TOKENS_PER_TURN * index for index in range(1, max_turns)]
        first = self._student_prompt(built, episode)
        odds = sim_turn_odds(
            built,
            episode,
            opening_by_model=by_model,
            student_calls=student_calls,
            tutor_replies=tutor_calls - by_model,
        )
        if odds is None:  # every tutor turn; the student midway through its budget
            half = (1 + student_calls) // 2
            odds = TurnOdds((1.0,) * half, (1.0,) * tutor_calls)
        tutor_expected = sum(odds.tutor)
        guesses = {
            "tutor": CallEstimate(
                round(tutor_expected),
                round(tutor_expected * _TYPICAL_TUTOR_CALL),
                tutor_calls,
                sum(context[1::2]) + _REPLY_TOKENS * tutor_calls,
            ),
        }
        if scenario.models.student is not None:
            growth = 2 * _TOKENS_PER_TURN
            expected_tokens = sum(
                chance * (first + growth * k + _STUDENT_REPLY_TOKENS) for k, chance in enumerate(odds.student)
            )
            guesses["student"] = CallEstimate(
                round(sum(odds.student)),
                round(expected_tokens),
                student_calls,
                self._student_tokens(first, student_calls, _REPLY_TOKENS + _STUDENT_REPLY_TOKENS),
            )
        guesses["judge"] = self._judge_guess(built, tutor_expected, tutor_calls)
        return guesses

    @staticmethod
    def _judge_guess(built: BuiltScenario, judged: float, most: int) -> CallEstimate:
        """The judges' calls for `judged` expected tutor turns (their calls grow linearly per judged turn), and
        for `most`."""
        per_turn = judge_calls(built, 1) - judge_calls(built, 0)
        calls, upper = judge_calls(built, 0) + per_turn * judged, judge_calls(built, most)
        size = _PROMPT_TOKENS + _TOKENS_PER_TURN * 4 + 120
        return CallEstimate(round(calls), round(calls * size), upper, upper * size)

    @staticmethod
    def _student_prompt(built: BuiltScenario, episode: Episode) -> int:
        """Tokens of the student's first prompt: the persona's own system prompt for this episode and the
        opening (a model-written opening at a tutor turn's size); other students at the generic size."""
        student = built.make_student()
        if not isinstance(student, PersonaStudent):
            return _PROMPT_TOKENS + _TOKENS_PER_TURN
        system = student_system(episode, student.profile(episode.extras))
        opening = render(student.opening, {"item": episode.item}) if student.opening_by == "template" else ""
        return _tokens(system) + (_tokens(opening) if opening else _TOKENS_PER_TURN)

    @staticmethod
    def _student_tokens(first: int, calls: int, growth: int) -> int:
        """`calls` student calls whose prompt starts at `first` tokens and gains `growth` per exchange (a
        student reply and the tutor's answer), each answered in a short reply."""
        return sum(first + growth * k for k in range(calls)) + _STUDENT_REPLY_TOKENS * calls


def _tokens(text: str) -> int:
    """Four tokens per three words, as `engine.models` sizes a call before sending it."""
    return word_count(text) * 4 // 3


PROTOCOLS.add("fairness", FairnessProtocol())
