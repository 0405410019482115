"""Scoring case responses: the checklist rubric judge, the de-escalation judge and distinct-n diversity.

The checklist judge follows TutorCaseBench's grading: each criterion of the case's rubric for the response type
is judged on its own, 0 or 1 with a line of evidence, against the student description, the dialogue and the
full context the tutor never saw. The criteria are alternative evidence-backed approaches rather than
requirements to combine, so a response succeeds when at least one holds; the share that hold is reported too.
Votes are combined per criterion by majority, and success is read off the combined criteria.

The de-escalation judge is simrun's addition for interactive continuations: given the same context, the
tutor's response and the student turns that followed, did the challenging behaviour ease by the end?

Distinct-n (the share of unique n-grams among all n-grams of a set of responses) is deterministic and is
computed by the summariser over a group of responses, as in the paper.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine import JUDGES, EpisodeContext, Judgment
from personas.cases import Case, ResponseType, case_of

from .llm import RubricJudge, RubricOptions, collect_votes, transcript
from .votes import majority

__all__ = (
    "CHECKLIST_PROMPT",
    "DEESCALATION_PROMPT",
    "ChecklistJudge",
    "ChecklistVerdict",
    "CriterionScore",
    "DeescalationJudge",
    "DeescalationVerdict",
    "combine_checklist",
    "distinct_n",
    "ngrams",
    "top_ngram",
)

CHECKLIST_PROMPT = """\
You grade one tutor response to a student who has just shown challenging behaviour, using a checklist written
for this particular student. Judge every criterion on its own: score 1 when the response meets the criterion's
check, 0 when it does not. The checks are about principles, so different concrete moves can earn the point,
but a passing mention without substance does not. Do not reward length, politeness or fluency. The criteria are
alternatives: a good response usually meets only some of them.

Reply with one JSON object and nothing else, with exactly one entry per criterion, in the rubric's order and
with its criterion_id:
{"criteria_scores": [{"criterion_id": <int>, "criterion_name": "<name>", "evidence": "<one or two sentences
quoting or pointing at the response>", "score": 0 or 1}], "overall_feedback": "<two sentences>"}"""

DEESCALATION_PROMPT = """\
You read the end of a tutoring dialogue. The student had just shown challenging behaviour; the tutor then
responded, and the student and tutor went on for a few turns. Decide whether the student's challenging
behaviour de-escalated by the end: the student is calmer, re-engaging, willing to try or talking constructively
in the last student turn, compared with the challenging turn. Judge the student's behaviour, not the tutor's
intentions.

Reply with one JSON object and nothing else:
{"deescalated": true|false, "turn": <number of the first student turn after the response that shows it, or
null>, "rationale": "<one or two sentences>"}"""


class CriterionScore(BaseModel):
    model_config = ConfigDict(extra="ignore")
    criterion_id: int
    criterion_name: str = ""
    evidence: str = Field(default="", max_length=4000)
    score: Literal[0, 1]

    @field_validator("score", mode="before")
    @classmethod
    def _bool_score(cls, value: Any) -> Any:
        return int(value) if isinstance(value, bool) else value


class ChecklistVerdict(BaseModel):
    """One vote; the subclass made per rubric (`_verdict_for`) also checks that every criterion is scored once."""

    model_config = ConfigDict(extra="ignore")
    expected_ids: ClassVar[tuple[int, ...] | None] = None
    criteria_scores: list[CriterionScore]
    overall_feedback: str = Field(default="", max_length=4000)

    @model_validator(mode="after")
    def _every_criterion_once(self) -> ChecklistVerdict:
        expected = type(self).expected_ids
        if expected is not None and sorted(s.criterion_id for s in self.criteria_scores) != sorted(expected):
            raise ValueError(
                f"expected one score for each criterion {list(expected)}, "
                f"got {[s.criterion_id for s in self.criteria_scores]}"
            )
        return self


@lru_cache(maxsize=256)
def _verdict_for(ids: tuple[int, ...]) -> type[ChecklistVerdict]:
    class Verdict(ChecklistVerdict):
        expected_ids: ClassVar[tuple[int, ...] | None] = ids

    return Verdict


def combine_checklist(
    votes: Sequence[ChecklistVerdict], case: Case, response: ResponseType, *, judge: str, target: int
) -> list[Judgment]:
    """Majority per criterion (`criterion_<id>`), then `case_success` (any holds) and `criteria_rate`."""
    found: list[Judgment] = []
    held: list[bool] = []
    for criterion in case.rubric(response):
        scores = [next(s for s in vote.criteria_scores if s.criterion_id == criterion.id) for vote in votes]
        value = majority([bool(s.score) for s in scores])
        held.append(value)
        evidence = next((s.evidence for s in scores if bool(s.score) == value and s.evidence), None)
        found.append(
            Judgment(
                judge=judge,
                metric=f"criterion_{criterion.id}",
                target=target,
                value=int(value),
                votes=[s.score for s in scores],
                rationale=evidence,
            )
        )
    success = any(held)
    found.append(
        Judgment(
            judge=judge,
            metric="case_success",
            target=target,
            value=int(success),
            votes=[int(any(s.score for s in vote.criteria_scores)) for vote in votes],
            rationale=next((v.overall_feedback for v in votes if v.overall_feedback), None),
        )
    )
    found.append(
        Judgment(judge=judge, metric="criteria_rate", target=target, value=sum(held) / len(held) if held else 0.0)
    )
    return found


def _full_context(case: Case) -> str:
    return orjson.dumps(case.full_context.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode()


def _response_type(ctx: EpisodeContext) -> ResponseType:
    return "long_term" if ctx.condition.get("response") == "long_term" else "immediate"


class ChecklistJudge(RubricJudge):
    """Scores the case response (a turn target) against the case's rubric for the episode's response type."""

    name = "case_checklist"

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        assert isinstance(target, int)
        case = case_of(ctx.episode.item)
        response_type = _response_type(ctx)
        criteria = case.rubric(response_type)
        if not criteria:
            return []
        reply = ctx.turns[target].text
        rubric = "\n".join(f"{c.id}. {c.name}\n   rationale: {c.rationale}\n   check: {c.check}" for c in criteria)
        kind = "an immediate response (what to say or do now)" if response_type == "immediate" else "a long-term plan"
        user = (
            f"STUDENT\n{case.student.description}\n\nDIALOGUE (what the tutor responded to)\n{case.transcript()}\n\n"
            f"FULL CONTEXT (not shown to the tutor)\n{_full_context(case)}\n\n"
            f"RUBRIC for {kind}\n{rubric}\n\nTUTOR RESPONSE\n{reply}"
        )
        votes = await collect_votes(
            ctx,
            task="case_checklist",
            target=target,
            messages=[{"role": "system", "content": CHECKLIST_PROMPT}, {"role": "user", "content": user}],
            schema=_verdict_for(tuple(c.id for c in criteria)),
            data={
                "response": reply,
                "criteria": [c.model_dump(mode="json") for c in criteria],
                "effective": case.strategies.effective(response_type),
            },
            retries=self.options.retries,
        )
        return combine_checklist(votes, case, response_type, judge=self.name, target=target)


class DeescalationVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")
    deescalated: bool
    turn: int | None = None
    rationale: str = Field(default="", max_length=4000)


class DeescalationJudge:
    """Whether the behaviour eased after the response (conversation target; needs `meta.response_turn`)."""

    name = "case_deescalation"
    scope: Literal["conversation"] = "conversation"
    model_calls = 1
    Options = RubricOptions

    def __init__(self, options: RubricOptions) -> None:
        self.options = options

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        start = ctx.meta.get("response_turn")
        if not isinstance(start, int):
            return []
        case = case_of(ctx.episode.item)
        after = [t for t in ctx.visible_turns() if t.index > start]
        students = [t.text for t in after if t.role == "student"]
        if not students:
            return []
        user = (
            f"STUDENT\n{case.student.description}\n\nFULL CONTEXT\n{_full_context(case)}\n\n"
            f"DIALOGUE UP TO THE CHALLENGING TURN\n{case.transcript()}\n\n"
            f"TUTOR RESPONSE\n{ctx.turns[start].text}\n\nWHAT FOLLOWED\n{transcript(after)}"
        )
        votes = await collect_votes(
            ctx,
            task="case_deescalation",
            target="conversation",
            messages=[{"role": "system", "content": DEESCALATION_PROMPT}, {"role": "user", "content": user}],
            schema=DeescalationVerdict,
            data={"student_after": students},
            retries=self.options.retries,
        )
        value = majority([v.deescalated for v in votes])
        return [
            Judgment(
                judge=self.name,
                metric="deescalated",
                target="conversation",
                value=int(value),
                votes=[int(v.deescalated) for v in votes],
                rationale=next((v.rationale for v in votes if v.deescalated == value and v.rationale), None),
            )
        ]


_TOKEN = re.compile(r"[a-z0-9']+")


def ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    words = _TOKEN.findall(text.lower())
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Unique n-grams / all n-grams over `texts` (lower-cased words); None when there are none."""
    grams = [gram for text in texts for gram in ngrams(text, n)]
    return len(set(grams)) / len(grams) if grams else None


def top_ngram(texts: Sequence[str], n: int) -> tuple[str, float] | None:
    """The n-gram found in the most responses, with the share of responses containing it (templating signal)."""
    if not texts:
        return None
    counts = Counter(gram for text in texts for gram in set(ngrams(text, n)))
    if not counts:
        return None
    gram, count = min(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return " ".join(gram), count / len(texts)


JUDGES.add("case_checklist", ChecklistJudge)
JUDGES.add("case_deescalation", DeescalationJudge)
