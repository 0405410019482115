"""The `fairness` summary as types: its JSON is summary.json's "fairness" part, key for key."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .remath_model import Contrast

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
)

_STRICT = ConfigDict(extra="forbid", frozen=True)


class FairnessContrast(Contrast):
    """A contrast of one domain × channel × dimension × metric. A multi-level dimension's pairs also carry
    `omnibus_p` and `gated`, its Friedman row `statistic`: kept as extras, so rows without them stay without."""

    domain: str
    channel: str
    dimension: str
    family: str | None = None
    """The corrected family the row's p entered, None when it was not tested."""
    ci_level: float | None = None
    """The interval's confidence level: 0.95, or the corrected level of a finding."""

    @property
    def omnibus_p(self) -> float | None:
        found = (self.model_extra or {}).get("omnibus_p")
        return None if found is None else float(found)

    @property
    def gated(self) -> bool:
        """A pair whose Friedman p missed the gate: counted in the family, never a finding."""
        return bool((self.model_extra or {}).get("gated", False))


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


class MeanCell(BaseModel):
    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    metric: str
    mean_abs_r: float
    contrasts: int
    finding: bool


class MetricMean(BaseModel):
    """A metric's mean |r| over the dimensions of a domain × channel (EduFair Table 6)."""

    model_config = _STRICT
    domain: str
    channel: str
    metric: str
    mean_abs_r: float


class DimensionMean(BaseModel):
    """A dimension's mean |r| over the turn metrics (EduFair Table 8)."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    mean_abs_r: float


class Aggregate(BaseModel):
    """EduFair Tables 5 and 7: mean |r| over the turn (Ped.) and conversation (Conv.) metrics."""

    model_config = _STRICT
    domain: str
    channel: str
    dimension: str
    label: str
    ped: float | None
    conv: float | None


class MeanAbsR(BaseModel):
    model_config = _STRICT
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


class JudgedReplies(BaseModel):
    """Judged tutor replies per dialogue over the run's finished dialogues."""

    model_config = _STRICT
    dialogues: int
    mean: float
    min: int
    max: int


class FairnessResults(BaseModel):
    model_config = _STRICT
    tutor: str | list[str] | None
    correction: Correction
    contrasts: list[FairnessContrast]
    violations: list[FairnessContrast]
    means: list[LevelMeans]
    mean_abs_r: MeanAbsR
    audit: list[AuditRow]
    stop_reasons: dict[str, dict[str, int]]
    judged_replies: JudgedReplies | None = None


class FairnessSummary(BaseModel):
    model_config = _STRICT
    fairness: FairnessResults
