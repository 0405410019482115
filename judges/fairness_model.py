"""The `fairness` summary as types: its JSON is summary.json's "fairness" part, key for key."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from engine import ContrastRow, NullReference

__all__ = (
    "Aggregate",
    "AuditRow",
    "Correction",
    "DimensionMean",
    "FairnessContrast",
    "FairnessResults",
    "FairnessSummary",
    "JudgedReplies",
    "LevelMeans",
    "MeanAbsR",
    "MeanCell",
    "MetricMean",
    "NullRef",
)

_STRICT = ConfigDict(extra="forbid", frozen=True)


class FairnessContrast(ContrastRow):
    """A contrast of one domain × channel × dimension × metric. `family` is the corrected family its p entered
    (None when it was not tested); `p_within` of a multi-level dimension's pair is Bonferroni within Friedman,
    shown beside the family's `p_family`, which decides."""

    domain: str
    channel: str
    dimension: str
    metric: str
    omnibus_p: float | None = None
    """A multi-level dimension's pair: the Friedman p that gates it."""
    resolves_meaningful: bool | None = None
    """The permutation null's 95th percentile of |r| lies below 0.10, so `meaningful` can be read; None: no null."""


class Correction(BaseModel):
    """The declared family and what its correction found."""

    model_config = _STRICT
    method: str
    q: float
    family: str
    family_size: int
    families: dict[str, int]
    findings: int
    tested: int
    insufficient: int
    omnibus_alpha: float
    min_pairs: int


class LevelMeans(BaseModel):
    """Per level, the mean over items of one metric's per-item means (None: no item had a score)."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    metric: str
    levels: dict[str, float | None]


class NullRef(NullReference):
    """A mean |r| beside its value with no effect (`judges.fairness_null`: within-item label permutations), with
    what the report reads off it."""

    model_config = _STRICT
    resolves_meaningful: bool
    """The null's 95% range lies below 0.10: this mean could show EduFair's |r| ≥ 0.10 mark."""
    meaningful: bool
    """At or above 0.10 where that can be resolved; never elsewhere."""
    p_family: float | None
    """`p_larger` adjusted (Benjamini–Hochberg) over the run's headline means (per metric, per dimension,
    Ped./Conv.); None for a cell, which is never marked (its contrasts have their own corrected verdicts)."""
    exceeds_null: bool


class MeanCell(BaseModel):
    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    metric: str
    mean_abs_r: float
    contrasts: int
    finding: bool
    null: NullRef | None = None


class MetricMean(BaseModel):
    """A metric's mean |r| over the dimensions of a domain × channel (EduFair Table 6)."""

    model_config = _STRICT
    domain: str
    channel: str
    metric: str
    mean_abs_r: float
    null: NullRef | None = None


class DimensionMean(BaseModel):
    """A dimension's mean |r| over the turn metrics (EduFair Table 8)."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    mean_abs_r: float
    null: NullRef | None = None


class Aggregate(BaseModel):
    """EduFair Tables 5 and 7: mean |r| over the turn (Ped.) and conversation (Conv.) metrics."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    label: str
    ped: float | None
    conv: float | None
    ped_null: NullRef | None = None
    conv_null: NullRef | None = None


class MeanAbsR(BaseModel):
    model_config = _STRICT
    null_method: str = "within-item permutation of the condition labels"
    cells: list[MeanCell]
    by_metric: list[MetricMean]
    by_dimension: list[DimensionMean]
    aggregates: list[Aggregate]


class AuditRow(BaseModel):
    """Per condition, the share of dialogues each student-audit detector flagged (None: never judged)."""

    model_config = _STRICT
    channel: str
    dimension: str
    level: str
    dialogues: int
    audit_cue_leakage: float | None
    audit_role_flip: float | None
    audit_self_solved: float | None
    audit_persona_drift: float | None

    def share(self, flag: str) -> float | None:
        found = getattr(self, flag)
        assert found is None or isinstance(found, float)
        return found


class MechanismFinding(BaseModel):
    model_config = _STRICT
    metric: str
    r: float | None
    p_family: float | None


class Mechanism(BaseModel):
    """The findings of one dimension and contrast (`judges.fairness_mechanism`): one headline, its metrics."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    contrast: str
    findings: list[MechanismFinding]
    signals: list[list[str]]
    """The metrics as signals: metrics whose turn labels agree on ≥ 95% of turns are one signal."""
    cause: str | None
    """A dialogue-ending metric among the findings (an answer leak ends the dialogue), else None."""
    follows_cause: list[str]
    """The conversation metrics among the findings that the dialogue-ending effect drives."""


class MetricPair(BaseModel):
    model_config = _STRICT
    a: str
    b: str
    turns: int
    agreement: float
    same_signal: bool


class JudgedReplies(BaseModel):
    """Judged tutor replies per dialogue over the run's finished dialogues."""

    model_config = _STRICT
    dialogues: int
    mean: float
    min: int
    max: int
    unjudged: int = 0
    """Tutor replies left unjudged (a judge's verdict stayed invalid after retries), out of every per-turn rate."""


class FairnessResults(BaseModel):
    model_config = _STRICT
    tutor: str | list[str] | None
    correction: Correction
    contrasts: list[FairnessContrast]
    findings: list[FairnessContrast]
    mechanisms: list[Mechanism] = []
    metric_agreement: list[MetricPair] = []
    means: list[LevelMeans]
    mean_abs_r: MeanAbsR
    audit: list[AuditRow]
    stop_reasons: dict[str, dict[str, int]]
    judged_replies: JudgedReplies | None = None


class FairnessSummary(BaseModel):
    model_config = _STRICT
    fairness: FairnessResults
