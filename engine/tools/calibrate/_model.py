"""`simrun calibrate`'s result as types: its JSON is calibration.json (`CalibrationResult.as_dict`), key for
key. Fields a hand-built result may leave out (a test's, an older file's) have defaults; every written file
has them all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from engine.report._rates import SUMMARY_CONFIG
from engine.stats._agreement import Agreement, JudgeAgreement, MetricAgreement

__all__ = (
    "AgreementStats",
    "CalibrationReport",
    "DimensionRow",
    "GroupRow",
    "JudgeAgreementSummary",
    "JudgeResult",
    "MetricAgreement",
    "calibration_report",
)


AgreementStats = Agreement
"""A dimension's agreement with the human labels and each statistic's interval: `engine.stats` `Agreement`."""


class LabelMapDescription(BaseModel):
    """`LabelMap.describe()`: the judge metric read and how its values become the dataset's labels."""

    model_config = SUMMARY_CONFIG
    metric: str
    values: str | list[list[Any]]
    proxy: str | None


class GroupRow(BaseModel):
    """One response author's units: accuracy, and the humans' label shares beside the judge's."""

    model_config = SUMMARY_CONFIG
    group: str
    n: int
    accuracy: float
    human: dict[str, float]
    judge: dict[str, float]


class DimensionRow(BaseModel):
    model_config = SUMMARY_CONFIG
    dimension: str
    ordinal: bool
    no_verdict: int
    map: LabelMapDescription | None = None
    proxy: str | None = None
    exact: AgreementStats
    lenient: AgreementStats | None
    by_group: list[GroupRow] = []

    @property
    def shown(self) -> str:
        return f"{self.dimension} (proxy)" if self.proxy else self.dimension


JudgeAgreementSummary = JudgeAgreement
"""Coders' agreement per metric (judge models, or human annotators): `engine.stats` `JudgeAgreement`."""


class ErrorKind(BaseModel):
    model_config = SUMMARY_CONFIG
    count: int
    first: str


class JudgeResult(BaseModel):
    model_config = SUMMARY_CONFIG
    judgments: int | None = None
    errors: int
    errors_by_kind: dict[str, ErrorKind] = {}
    error_examples: list[str]
    deterministic: bool
    models: list[str]
    dimensions: list[DimensionRow]
    judge_agreement: JudgeAgreementSummary | None = None


class HumanShares(BaseModel):
    model_config = SUMMARY_CONFIG
    n: int
    shares: dict[str, float]


class CalibrationReport(BaseModel):
    model_config = SUMMARY_CONFIG
    label_set: str
    examples: int
    judges: dict[str, JudgeResult]
    duration_s: float
    calls: dict[str, int]
    human_rates: dict[str, dict[str, HumanShares]] = {}
    """Dimension → group (all groups pooled under "all") → the human labels' shares."""
    annotator_agreement: JudgeAgreementSummary | None = None


def calibration_report(result: Mapping[str, Any] | CalibrationReport) -> CalibrationReport:
    """The typed report of a result dict (calibration.json as read back, or `CalibrationResult.as_dict()`)."""
    return result if isinstance(result, CalibrationReport) else CalibrationReport.model_validate(result)
