"""ReMath scoring: agreement with the expert's labels (Tasks A/B) and a two-order pairwise judge (Task C).

Tasks A and B are scored against the gold labels the way the paper reports them: exact match, Cohen's kappa
and the entropy of the label distribution (a model that always says "guess" can match often and still be
useless; entropy shows it). The formulas are `engine.stats._agreement`'s.

Task C's `remath_pairwise` judge compares the tutor's reply with the novice tutor's original reply (`against:
novice`, the default and the paper's Table 3 baseline) or with the expert's reference (`against: reference`) on
usefulness, care, human-soundingness and overall preference, each −2..2 where
positive means the second response shown is better — the paper's scale. Judges favour a position, so every
vote is asked in both orders: with the reply second, its score is the judge's; with the reply first, it is the
judge's score with its sign flipped. The recorded value is the mean over both orders and all votes (positive:
the tutor's reply beats the reference); half the sum of the two raw scores is the judge's lean towards the
second slot, recorded as `pairwise_position_bias`.

`remath_strategy` labels which strategy and intention a reply uses (same lists as Task B): Task C adherence
to a given strategy, and, calibrated on Bridge's expert responses, a check of the labeller itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine import (
    JUDGES,
    EpisodeContext,
    EpisodeRecord,
    JudgeError,
    Judgment,
    Unjudged,
    agreement,
    label_entropy,
    label_shares,
)
from personas.remath import ERROR_TYPES, INTENTIONS, STRATEGIES

from .llm import RubricJudge, RubricOptions, collect_votes
from .remath_model import AnnotatorAgreement, HumanAgreement, LabelAgreement
from .votes import most_common

__all__ = (
    "LABELS",
    "PAIRWISE_DIMENSIONS",
    "PairwiseJudge",
    "PairwiseVerdict",
    "StrategyJudge",
    "StrategyVerdict",
    "annotator_agreement",
    "combine_orders",
    "human_agreement",
    "label_agreement",
)

PAIRWISE_DIMENSIONS = ("usefulness", "care", "human", "preference")
LABELS: dict[str, tuple[str, ...]] = {
    "error": tuple(ERROR_TYPES),
    "strategy": tuple(STRATEGIES),
    "intention": tuple(INTENTIONS),
}
"""The label order of each Task A/B label (the paper's)."""

_PAIRWISE_PROMPT = """\
You are an experienced elementary-school math teacher. Below is a chat between a tutor and a young student;
the student's last message contains a mistake. Two possible next messages from the tutor follow, Response A
and Response B. Compare them on four questions, each with one of these scores:
-2 = Response A is much more ..., -1 = A is somewhat more ..., 0 = equally ..., 1 = B is somewhat more ...,
2 = B is much more ...

- usefulness: which response is more useful for helping the student get past the mistake?
- care: which response is more caring towards the student?
- human: which response sounds more like a human tutor than a robot?
- preference: which response would you rather send if you were the tutor?

Reply with one JSON object and nothing else:
{"usefulness": <-2..2>, "care": <-2..2>, "human": <-2..2>, "preference": <-2..2>, "rationale": "<one sentence>"}"""

_STRATEGY_PROMPT = """\
You are an experienced elementary-school math teacher. Below is a chat between a tutor and a young student
whose last message contains a mistake, then the tutor's reply. Say which strategy the reply uses and with
which intention, choosing from these lists (names exactly as written).

Strategies: {strategies}
Intentions: {intentions}

Reply with one JSON object and nothing else:
{{"strategy": "<a strategy>", "intention": "<an intention>", "rationale": "<one sentence>"}}"""


def _history(ctx: EpisodeContext, before: int) -> str:
    turns = [t for t in ctx.turns if t.index < before and t.visible_to_tutor]
    return "\n".join(f"{'STUDENT' if t.role == 'student' else 'TUTOR'}: {t.text}" for t in turns)


class PairwiseVerdict(BaseModel):
    """One order's vote: scores for "B over A"."""

    model_config = ConfigDict(extra="ignore")
    usefulness: int = Field(ge=-2, le=2)
    care: int = Field(ge=-2, le=2)
    human: int = Field(ge=-2, le=2)
    preference: int = Field(ge=-2, le=2)
    rationale: str = Field(default="", max_length=4000)

    @field_validator("usefulness", "care", "human", "preference", mode="before")
    @classmethod
    def _integral(cls, value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value.strip())
        return value


def combine_orders(
    second: Sequence[PairwiseVerdict], first: Sequence[PairwiseVerdict], *, judge: str, target: int
) -> list[Judgment]:
    """Judgments from both orders: `second` showed the reply as B, `first` showed it as A (sign flipped)."""
    found: list[Judgment] = []
    for dimension in PAIRWISE_DIMENSIONS:
        as_b = [getattr(v, dimension) for v in second]
        as_a = [getattr(v, dimension) for v in first]
        scores = [*as_b, *(-s for s in as_a)]
        found.append(
            Judgment(
                judge=judge,
                metric=f"pairwise_{dimension}",
                target=target,
                value=sum(scores) / len(scores),
                votes=[{"reply_second": s} for s in as_b] + [{"reply_first": s} for s in as_a],
                rationale=next((v.rationale for v in second if v.rationale), None),
            )
        )
    pairs = list(zip(second, first, strict=False))
    bias = [(b.preference + a.preference) / 2 for b, a in pairs]
    found.append(
        Judgment(
            judge=judge,
            metric="pairwise_position_bias",
            target=target,
            value=sum(bias) / len(bias) if bias else None,
            votes=bias,
        )
    )
    return found


class PairwiseOptions(RubricOptions):
    against: Literal["novice", "reference"] = "novice"
    """Compare with the novice tutor's original reply (the paper's baseline), or with the expert's reference."""


class PairwiseJudge(RubricJudge):
    """Task C: the tutor's reply vs a reference response, both orders, `judge_votes` votes each."""

    name = "remath_pairwise"
    model_calls = 2
    Options = PairwiseOptions

    def __init__(self, options: PairwiseOptions) -> None:
        super().__init__(options)
        self.against = options.against

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        assert isinstance(target, int)
        reply = ctx.turns[target].text
        other = str(ctx.episode.item.data.get(self.against) or "")
        if not other:
            raise JudgeError(f"remath_pairwise: item {ctx.episode.item.id!r} has no {self.against} response")
        history = _history(ctx, target)
        topic = ctx.episode.item.data.get("topic", "")
        results: dict[str, list[PairwiseVerdict]] = {}
        unjudged: list[Unjudged] = []

        async def ask(order: str, a: str, b: str) -> None:
            user = f"Lesson topic: {topic}\n\nConversation:\n{history}\n\nResponse A:\n{a}\n\nResponse B:\n{b}"
            try:
                results[order] = await collect_votes(
                    ctx,
                    task="remath_pairwise",
                    target=f"{target}:{order}",
                    messages=[{"role": "system", "content": _PAIRWISE_PROMPT}, {"role": "user", "content": user}],
                    schema=PairwiseVerdict,
                    data={"a": a, "b": b, "order": order},
                    retries=self.options.retries,
                )
            except Unjudged as exc:  # raised here it would reach the episode wrapped in a group, as an error
                unjudged.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "reply_second", other, reply)
            group.start_soon(ask, "reply_first", reply, other)
        if unjudged:
            raise Unjudged("; ".join(sorted(str(exc) for exc in unjudged)))
        found = combine_orders(results["reply_second"], results["reply_first"], judge=self.name, target=target)
        return [*found, Judgment(judge=self.name, metric="pairwise_against", target=target, value=self.against)]


class StrategyVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")
    strategy: str
    intention: str
    rationale: str = Field(default="", max_length=4000)

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        return _label(value, STRATEGIES)

    @field_validator("intention")
    @classmethod
    def _intention(cls, value: str) -> str:
        return _label(value, INTENTIONS)


def _label(value: str, labels: dict[str, str]) -> str:
    folded = " ".join(value.strip().lower().replace("’", "'").split())
    for key, name in labels.items():
        if folded in (key, name.lower(), key.replace("_", " ")):
            return key
    raise ValueError(f"{value!r} is not one of: {', '.join(labels)}")


class StrategyJudge(RubricJudge):
    """Which strategy and intention a tutor reply uses (most common label over the votes)."""

    name = "remath_strategy"

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        assert isinstance(target, int)
        reply = ctx.turns[target].text
        system = _STRATEGY_PROMPT.format(
            strategies="; ".join(STRATEGIES.values()), intentions="; ".join(INTENTIONS.values())
        )
        user = f"Conversation:\n{_history(ctx, target)}\n\nTUTOR REPLY:\n{reply}"
        votes = await collect_votes(
            ctx,
            task="remath_strategy",
            target=target,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            schema=StrategyVerdict,
            data={"reply": reply},
            retries=self.options.retries,
        )
        return [
            Judgment(
                judge=self.name,
                metric=f"used_{label}",
                target=target,
                value=most_common([getattr(v, label) for v in votes]),
                votes=[getattr(v, label) for v in votes],
            )
            for label in ("strategy", "intention")
        ]


def label_agreement(
    records: Sequence[EpisodeRecord], label: str, annotated: Sequence[EpisodeRecord] | None = None
) -> LabelAgreement:
    """Exact match, Cohen's kappa and entropy of one Task A/B label over ok records (`<label>_pred/_gold`), and
    the teachers' agreement over `annotated` (default: `records`), where two labelled a snippet."""
    order = LABELS[label]
    pred: list[str] = []
    gold: list[str] = []
    for record in records:
        p, g = record.metrics.get(f"{label}_pred"), record.metrics.get(f"{label}_gold")
        if record.status == "ok" and isinstance(p, str) and isinstance(g, str):
            pred.append(p)
            gold.append(g)
    result = agreement(gold, pred, order)
    teachers = records if annotated is None else annotated
    return LabelAgreement(
        label=label,
        n=result.n,
        match=result.accuracy,
        kappa=result.kappa,
        entropy_pred=label_entropy(pred),
        entropy_gold=label_entropy(gold),
        shares_pred=label_shares(pred, order),
        shares_gold=label_shares(gold, order),
        confusion=[list(row) for row in result.confusion],
        labels=list(order),
        per_annotator=annotator_agreement(teachers, label),
        human=human_agreement(teachers, label),
    )


JUDGES.add("remath_pairwise", PairwiseJudge)
JUDGES.add("remath_strategy", StrategyJudge)


def _annotated(records: Sequence[EpisodeRecord], label: str) -> list[tuple[EpisodeRecord, str, str]]:
    found = []
    for record in records:
        a1, a2 = record.metrics.get(f"{label}_a1"), record.metrics.get(f"{label}_a2")
        if record.status == "ok" and isinstance(a1, str) and isinstance(a2, str):
            found.append((record, a1, a2))
    return found


def annotator_agreement(records: Sequence[EpisodeRecord], label: str) -> AnnotatorAgreement | None:
    """The tutor against each of a doubly-labelled snippet's two teachers, and the mean of the two.

    The paper computes match and kappa "separately for each annotator then averaged across annotators". Bridge
    does not name its teachers, so teacher 1 is a snippet's first labelling in split order and teacher 2 its
    second. None when no record is doubly labelled.
    """
    rows = [(r, a1, a2) for r, a1, a2 in _annotated(records, label) if isinstance(r.metrics.get(f"{label}_pred"), str)]
    if not rows:
        return None
    order = LABELS[label]
    pred = [str(r.metrics[f"{label}_pred"]) for r, _, _ in rows]
    match_1, kappa_1 = _against(order, [a1 for _, a1, _ in rows], pred)
    match_2, kappa_2 = _against(order, [a2 for _, _, a2 in rows], pred)
    return AnnotatorAgreement(
        n=len(rows),
        match_1=match_1,
        kappa_1=kappa_1,
        match_2=match_2,
        kappa_2=kappa_2,
        match=_mean_of_two(match_1, match_2),
        kappa=_mean_of_two(kappa_1, kappa_2),
    )


def _against(order: Sequence[str], gold: list[str], pred: list[str]) -> tuple[float | None, float | None]:
    result = agreement(gold, pred, order)
    return result.accuracy, result.kappa


def _mean_of_two(first: float | None, second: float | None) -> float | None:
    return None if first is None or second is None else sum((first, second)) / 2


def human_agreement(records: Sequence[EpisodeRecord], label: str) -> HumanAgreement | None:
    """The two teachers' agreement (match, Cohen's kappa) over the distinct doubly-labelled snippets in `records`.

    With two teachers, "per annotator, then averaged" is the one pair's kappa: the statistic is symmetric.
    """
    pairs: dict[str, tuple[str, str]] = {}
    for record, a1, a2 in _annotated(records, label):
        pairs.setdefault(str(record.metrics.get("snippet", record.item_id)), (a1, a2))
    if not pairs:
        return None
    result = agreement([a for a, _ in pairs.values()], [b for _, b in pairs.values()], LABELS[label])
    return HumanAgreement(
        n=result.n,
        match=result.accuracy,
        kappa=result.kappa,
        entropy=label_entropy([a for pair in pairs.values() for a in pair]),
    )
