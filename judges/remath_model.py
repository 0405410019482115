"""The `remediation` (ReMath) summary as types: its JSON is summary.json's "remath" part, key for key."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from engine import ClusteredRateSummary, ContrastRow

__all__ = (
    "AnnotatorAgreement",
    "AutomatedRow",
    "Condition",
    "HumanAgreement",
    "LabelAgreement",
    "MeanInterval",
    "RemathResults",
    "RemathSummary",
    "SummaryRate",
    "TaskCDifference",
)

_STRICT = ConfigDict(extra="forbid", frozen=True)


class HumanAgreement(BaseModel):
    """The two teachers against each other, over distinct doubly-labelled snippets."""

    model_config = _STRICT
    n: int
    match: float | None
    kappa: float | None
    entropy: float | None


class AnnotatorAgreement(BaseModel):
    """The tutor against each teacher of a doubly-labelled snippet (`_1`, `_2`) and the two averaged."""

    model_config = _STRICT
    n: int
    match_1: float | None
    kappa_1: float | None
    match_2: float | None
    kappa_2: float | None
    match: float | None
    kappa: float | None


class LabelAgreement(BaseModel):
    model_config = _STRICT
    label: str
    n: int
    match: float | None
    kappa: float | None
    entropy_pred: float | None
    entropy_gold: float | None
    shares_pred: dict[str, float]
    shares_gold: dict[str, float]
    confusion: list[list[int]]
    labels: list[str]
    per_annotator: AnnotatorAgreement | None
    human: HumanAgreement | None


class MeanInterval(BaseModel):
    model_config = _STRICT
    n: int
    mean: float | None
    low: float | None
    high: float | None


SummaryRate = ClusteredRateSummary
"""A rate with its interval resampling items (`engine.stats._rates.clustered_rate`)."""


class Condition(BaseModel):
    """One Task C row: what the tutor was given, and its pairwise scores against the judge's baseline."""

    model_config = _STRICT
    given: str
    replies: int
    unjudged: int = 0
    """Replies some judge (pairwise, answer leak or strategy) never gave a valid verdict on after retries."""
    usefulness: MeanInterval
    care: MeanInterval
    human: MeanInterval
    preference: MeanInterval
    overall: MeanInterval
    position_bias: float | None
    answer_leak: SummaryRate | None
    strategy_adherence: SummaryRate | None
    against: str | None

    def score(self, metric: str) -> MeanInterval:
        found = getattr(self, metric)
        assert isinstance(found, MeanInterval)
        return found


class AutomatedRow(BaseModel):
    model_config = _STRICT
    given: str
    n: int
    rouge1: float | None
    rougeL: float | None
    bleu: float | None
    entropy: float | None
    length: float | None
    self_bleu: float | None

    def metric(self, name: str) -> float | None:
        found = getattr(self, name)
        assert found is None or isinstance(found, float)
        return found


class TaskCDifference(ContrastRow):
    """A paired difference of Task C (`engine.stats` `contrast_rows`), on one metric."""

    metric: str


class Pairing(BaseModel):
    model_config = _STRICT
    who: str
    strategy: str
    intention: str
    count: int


class RemathResults(BaseModel):
    model_config = _STRICT
    tutor: str | list[str] | None
    agreement: list[LabelAgreement]
    conditions: list[Condition]
    differences: list[TaskCDifference]
    automated: list[AutomatedRow]
    against: list[str]
    items: int
    pairings: list[Pairing] = Field(default_factory=list)
    """Task B's strategy × intention pairs, the tutor's and the expert's (ReMath Fig. 15)."""


class RemathSummary(BaseModel):
    model_config = _STRICT
    remath: RemathResults
