"""The `crescendo` (SafeTutors) summary as types: its JSON is summary.json's crescendo part, key for key
and in the same order (a cell's grouping keys come first, its format last)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine import SUMMARY_CONFIG, ClusteredRateSummary, DeltaInterval, DiscreteHazard, RateSummary, SurvivalRow

__all__ = (
    "Amplification",
    "AnswerLeak",
    "BacktrackDetail",
    "BacktrackRow",
    "Backtracked",
    "Backtracks",
    "CrescendoNullCheck",
    "CrescendoSummary",
    "DimensionCell",
    "DomainCell",
    "FormatCell",
    "Hazard",
    "HighHarm",
    "Interval",
    "Pedagogy",
    "SubjectCell",
    "SubjectPedagogy",
    "Unanimity",
)


class Backtracked(BaseModel):
    """Replies taken back (hidden from the tutor): in every per-reply rate (they were generated), counted here too."""

    model_config = SUMMARY_CONFIG
    replies: int
    unsafe: int


class FormatCell(BaseModel):
    """Harm in one format of a group: per generated reply (SafeTutors' denominator, backtracked replies included,
    clustered on the dialogue), per visible reply (secondary view) and per dialogue (Wilson)."""

    model_config = SUMMARY_CONFIG
    episodes: int
    per_response: ClusteredRateSummary
    per_visible_reply: ClusteredRateSummary
    """Over the replies the tutor's history kept only: a view selected by the attacker's backtracks, not the paper's."""
    per_conversation: RateSummary
    exposure: float | None
    """Mean judged generated replies per dialogue."""
    unjudged: int = 0
    """Generated replies the harm judge left unjudged (no valid verdict after retries); every rate here leaves them
    out of its n."""
    backtracked: Backtracked
    format: str


class _Dimension(BaseModel):
    dimension: str


class _Subject(BaseModel):
    subject: str


class DimensionCell(FormatCell, _Dimension):
    model_config = SUMMARY_CONFIG


class _Domain(BaseModel):
    domain: str


class DomainCell(FormatCell, _Domain):
    model_config = SUMMARY_CONFIG


class SubjectCell(FormatCell, _Dimension, _Subject):
    model_config = SUMMARY_CONFIG


class HighHarm(BaseModel):
    """The dimensions at or above SafeTutors' 60% threshold, per format and subject (None: pooled)."""

    model_config = SUMMARY_CONFIG
    subject: str | None
    format: str
    count: int
    of: int
    dimensions: list[str]


class Interval(BaseModel):
    model_config = SUMMARY_CONFIG
    low: float | None
    high: float | None
    method: str
    confidence: float


class Amplification(BaseModel):
    """Multi- minus single-turn harm per generated reply; None dimension or subject: pooled over them."""

    model_config = SUMMARY_CONFIG
    dimension: str | None
    subject: str | None
    single_rate: float | None
    multi_rate: float | None
    delta: float | None
    ci: Interval
    single_replies: int
    multi_replies: int
    multi_dialogues: int
    visible_only: DeltaInterval
    """The same difference over visible replies only (secondary: backtracks select safe replies out of it)."""


class Hazard(DiscreteHazard):
    """`engine.stats.discrete_hazard`: per exchange, and the first exchange against the later ones pooled."""

    model_config = SUMMARY_CONFIG
    unjudged: int = 0
    """Generated replies of these dialogues the harm judge left unjudged: left out of every step (the judged
    replies keep their order)."""


class Backtracks(BaseModel):
    model_config = SUMMARY_CONFIG
    total: int
    conversations_with_backtrack: int
    multi_conversations: int
    backtracked_replies: int
    backtracked_unsafe: int
    visible_replies: int


class BacktrackRow(BaseModel):
    model_config = SUMMARY_CONFIG
    dimension: str
    conversations: int
    total: int
    with_backtrack: RateSummary


class BacktrackDetail(BaseModel):
    model_config = SUMMARY_CONFIG
    by_dimension: list[BacktrackRow]
    per_conversation: dict[str, int]
    """Multi-turn dialogues by their number of backtracks (keys are the counts, as text)."""


class Unanimity(BaseModel):
    model_config = SUMMARY_CONFIG
    judgments: int
    unanimous: int
    share: float | None


class AnswerLeak(BaseModel):
    model_config = SUMMARY_CONFIG
    single: ClusteredRateSummary
    multi: ClusteredRateSummary
    unjudged: dict[str, int] = Field(default_factory=dict)
    """Per format, generated replies the answer-leak judge left without a verdict (out of the rate's n)."""


class Pedagogy(BaseModel):
    model_config = SUMMARY_CONFIG
    single: dict[str, RateSummary]
    single_clarity_mean: float | None
    multi: dict[str, RateSummary]
    unjudged: dict[str, int] = Field(default_factory=dict)
    """Per format, dialogues the pedagogy judge left unjudged (no valid verdict after retries): out of every n."""


class SubjectPedagogy(BaseModel):
    """One pedagogy metric of one format in one subject (SafeTutors Figs. 3–4 break them down by subject)."""

    model_config = SUMMARY_CONFIG
    subject: str
    format: str
    metric: str
    rate: RateSummary | None = None
    mean: float | None = None
    """Clarity only: the mean on the judge's 1–5 scale."""
    unjudged: int = 0
    """Dialogues of this subject and format the pedagogy judge left unjudged."""


class CrescendoSummary(BaseModel):
    model_config = SUMMARY_CONFIG
    harm: list[DimensionCell]
    harm_by_domain: list[DomainCell]
    by_subject_dimension: list[SubjectCell]
    high_harm_dimensions: list[HighHarm]
    overall: list[FormatCell]
    amplification: list[Amplification]
    hazard: dict[str, Hazard]
    """"all" (every multi-turn dialogue), then one per risk dimension."""
    survival: dict[str, list[SurvivalRow]]
    survival_unjudged: dict[str, int] = Field(default_factory=dict)
    """Per key of `survival`, generated replies the harm judge left unjudged (out of the curve)."""
    backtracks: Backtracks
    backtrack_detail: BacktrackDetail
    unanimity: Unanimity
    answer_leak: AnswerLeak
    pedagogy: Pedagogy
    pedagogy_by_subject: list[SubjectPedagogy] = Field(default_factory=list)


class CrescendoNullCheck(BaseModel):
    """The rows bench/crescendo_null.py reads per seed: the per-dimension and pooled amplification and the pooled
    hazard, exactly as `CrescendoSummary` gives them."""

    model_config = SUMMARY_CONFIG
    amplification: list[Amplification]
    hazard: Hazard
