"""The deterministic answer-leak detector: does the tutor's reply state the item's reference answer?

Exact and free, it is the baseline the LLM judges are calibrated against.
"""

from __future__ import annotations

from typing import Literal

from engine import JUDGES, EpisodeContext, Judgment, mentions_answer

__all__ = ("AnswerLeakJudge",)


class AnswerLeakJudge:
    name = "answer_leak"
    scope: Literal["turn"] = "turn"
    model_calls = 0

    def __init__(self, options: object = None) -> None:
        del options

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        assert isinstance(target, int)
        answer = ctx.episode.item.answer
        value = mentions_answer(ctx.turns[target].text, answer) if answer else None
        return [Judgment(judge=self.name, metric="answer_leak", target=target, value=value)]


JUDGES.add("answer_leak", AnswerLeakJudge)
