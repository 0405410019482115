"""The `cases` summary as types: its JSON is summary.json's "cases" part, key for key and in the same order
(a row's grouping keys first, then its statistics)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine import SUMMARY_CONFIG, ClusteredRateSummary, ContrastRow

__all__ = (
    "CasesResults",
    "CasesSummary",
    "CriteriaRow",
    "DeescalationRow",
    "DiversityRow",
    "GainRow",
    "McqRow",
    "RecoveryRow",
    "SuccessRow",
)


class _Group(BaseModel):
    challenge_type: str
    response: str
    reference: str


class SuccessRow(ClusteredRateSummary, _Group):
    """Open responses with at least one checklist criterion held; `response` "overall" pools both types."""

    model_config = SUMMARY_CONFIG
    unjudged: int = 0
    """Responses whose checklist judge gave no valid verdict after retries: left out of n."""


class CriteriaRow(_Group):
    """The mean per-response satisfaction rate and the pooled share of criteria held, resampling cases."""

    model_config = SUMMARY_CONFIG
    responses: int
    mean_rate: float | None
    criteria_held: int
    criteria: int
    pooled_low: float | None
    pooled_high: float | None
    unjudged: int = 0
    """Responses whose checklist judge gave no valid verdict after retries: none of their criteria counted."""

    @property
    def pooled(self) -> float | None:
        return self.criteria_held / self.criteria if self.criteria else None


class _McqKeys(BaseModel):
    variant: str
    response: str
    challenge_type: str
    chance: float | None
    invalid: int
    p_vs_chance: float | None


class McqRow(ClusteredRateSummary, _McqKeys):
    """Accuracy against chance (1 / options); p: per-case accuracies against chance, one-sample t."""

    model_config = SUMMARY_CONFIG


class GainRow(ContrastRow):
    """Retrieved strategies minus none, paired per case (`engine.stats`), BH-corrected over every gain."""

    metric: str
    response: str
    mean_retrieved: float | None
    mean_none: float | None
    gain: float | None
    unjudged: int = 0
    """Responses of the row's response types whose checklist judge gave no valid verdict: out of every pair."""


class _DeescalationKeys(BaseModel):
    by: str
    group: str


class DeescalationRow(ClusteredRateSummary, _DeescalationKeys):
    model_config = SUMMARY_CONFIG
    unjudged: int = 0
    """Dialogues whose de-escalation judge gave no valid verdict after retries: left out of n."""


class RecoveryRow(BaseModel):
    """TutorCaseBench's case-recovery rate of one response type, with its Wilson interval and chance rate."""

    model_config = SUMMARY_CONFIG
    response: str
    chance: float
    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None


class DiversityRow(BaseModel):
    model_config = SUMMARY_CONFIG
    response: str
    reference: str
    responses: int
    distinct_1: float | None
    distinct_2: float | None
    distinct_3: float | None
    distinct_4: float | None
    distinct_5: float | None = None
    top_4gram: str | None
    top_4gram_share: float | None

    def distinct(self, n: int) -> float | None:
        found = getattr(self, f"distinct_{n}")
        assert found is None or isinstance(found, float)
        return found


class CasesResults(BaseModel):
    model_config = SUMMARY_CONFIG
    tutor: str | list[str] | None
    challenge_types: list[str]
    success: list[SuccessRow]
    criteria: list[CriteriaRow]
    mcq: list[McqRow]
    reference_gain: list[GainRow]
    deescalation: list[DeescalationRow]
    diversity: list[DiversityRow]
    case_recovery: list[RecoveryRow] = Field(default_factory=list)
    mcq_construction: dict[str, int] = Field(default_factory=dict)
    """MCQs shown, by who built their options (`judges.cases_origin.mcq_builders`)."""
    skipped: dict[str, int]
    """Episodes per task whose case lacks the task's material."""


class CasesSummary(BaseModel):
    model_config = SUMMARY_CONFIG
    cases: CasesResults
