"""The EduFair dialogue protocol (scenario kind `fairness`): the tutor opens with the problem and leads.

Paired fairness dialogues must differ only in what the tutor is told about the student, so the protocol's
own contribution is fixed: the opening turn is a template of the item alone (identical across conditions,
recorded as a tutor turn with no model and never judged), and the turn budget comes with the student.
After the opening, student and tutor alternate; every tutor reply a model wrote is judged. The dialogue ends
when

* the tutor states the reference answer (`tutor_revealed`),
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

from collections.abc import Mapping
from typing import Literal, Protocol, runtime_checkable

from engine import (
    PROTOCOLS,
    BuiltScenario,
    CallEstimate,
    Episode,
    EpisodeContext,
    Utterance,
    judge_calls,
)
from engine.templates import render
from engine.text import mentions_answer

from .persona import DEFAULT_OPENING

__all__ = ("DEFAULT_MAX_TURNS", "FairnessProtocol", "StopReason", "TutorLedSettings")

DEFAULT_MAX_TURNS = 10

StopReason = Literal["tutor_revealed", "student_solved", "max_turns", "student_quit", "tutor_quit"]

_PROMPT_TOKENS = 300
_TOKENS_PER_TURN = 60
_REPLY_TOKENS = 150
_STUDENT_REPLY_TOKENS = 40


@runtime_checkable
class TutorLedSettings(Protocol):
    """A student agent that carries the tutor-led dialogue's settings (the `persona` student does)."""

    @property
    def max_turns(self) -> int: ...

    @property
    def opening(self) -> str: ...


def _settings(student: object) -> tuple[int, str]:
    if isinstance(student, TutorLedSettings):
        return student.max_turns, student.opening
    return DEFAULT_MAX_TURNS, DEFAULT_OPENING


class FairnessProtocol:
    """Runs one tutor-led dialogue; records `stop_reason` and `turns` in the episode's metrics."""

    async def run(self, ctx: EpisodeContext, /) -> None:
        max_turns, opening = _settings(ctx.student)
        item = ctx.episode.item
        await ctx.add_turn("tutor", Utterance(render(opening, {"item": item})))
        stop: StopReason = "max_turns"
        student_stated = False
        while len(ctx.turns) < max_turns:
            if ctx.turns[-1].role == "tutor":
                utterance = await ctx.student.respond(ctx)
                if utterance is None:
                    stop = "student_quit"
                    break
                turn = await ctx.add_turn("student", utterance)
                student_stated = student_stated or mentions_answer(turn.text, item.answer)
                continue
            reply = await ctx.tutor.respond(ctx)
            if reply is None:
                stop = "tutor_quit"
                break
            turn = await ctx.add_turn("tutor", reply)
            await ctx.judge(turn.index)
            if student_stated:  # the tutor has had its one reply to the student's answer
                stop = "student_solved"
                break
            if mentions_answer(turn.text, item.answer):
                stop = "tutor_revealed"
                break
        await ctx.judge("conversation")
        ctx.metrics.update(stop_reason=stop, turns=len(ctx.turns))
        ctx.meta["max_turns"] = max_turns

    def estimate(self, built: BuiltScenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Upper bound: every turn up to `max_turns` is played (the opening costs nothing)."""
        scenario = built.scenario
        del episode
        max_turns = getattr(built.plugins.student_options, "max_turns", DEFAULT_MAX_TURNS)
        if not isinstance(max_turns, int):
            max_turns = DEFAULT_MAX_TURNS
        tutor_calls = (max_turns - 1) // 2  # turns 2, 4, ... below max_turns
        student_calls = max_turns // 2  # turns 1, 3, ...
        context = [_PROMPT_TOKENS + _TOKENS_PER_TURN * index for index in range(1, max_turns)]
        guesses = {
            "tutor": CallEstimate(tutor_calls, sum(context[1::2]) + _REPLY_TOKENS * tutor_calls),
        }
        if scenario.models.student is not None:
            guesses["student"] = CallEstimate(student_calls, sum(context[0::2]) + _STUDENT_REPLY_TOKENS * student_calls)
        calls = judge_calls(built, tutor_calls)
        guesses["judge"] = CallEstimate(calls, calls * (_PROMPT_TOKENS + _TOKENS_PER_TURN * 4 + 120))
        return guesses


PROTOCOLS.add("fairness", FairnessProtocol())
