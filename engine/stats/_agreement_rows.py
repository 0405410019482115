"""The typed result of `judge_agreement`: agreement between judge specs (or human annotators) per metric.

These rows are what summary.json's `judge_agreement` block and calibrate's agreement blocks hold; `note` keys
appear only where something was not estimable, so the JSON keeps the shape it had as plain dicts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("AgreementEstimate", "JudgeAgreement", "MetricAgreement", "PairKappa")


class AgreementEstimate(BaseModel):
    """A statistic with its interval; None where it is not estimable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float | None
    low: float | None
    high: float | None


class PairKappa(BaseModel):
    """Cohen's kappa of one pair of judge specs over the units both voted on (keys in summary.json's order)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    judges: tuple[str, str]
    weights: Literal["quadratic"] | None
    n: int
    value: float | None
    low: float | None
    high: float | None


class MetricAgreement(BaseModel):
    """Agreement between judge specs on one metric; `note` says why a statistic is not estimable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str
    level: Literal["interval", "ordinal", "nominal"]
    units: int
    clusters: int
    votes_per_judge: dict[str, int]
    alpha: AgreementEstimate
    kappa: tuple[PairKappa, ...]
    note: str | None = Field(default=None, exclude_if=lambda note: note is None)


class JudgeAgreement(BaseModel):
    """Coders' agreement per metric; below two coders nothing is measured and `note` says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    judges: tuple[str, ...]
    metrics: tuple[MetricAgreement, ...]
    confidence: float
    note: str | None = Field(default=None, exclude_if=lambda note: note is None)
