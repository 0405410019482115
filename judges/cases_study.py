"""TutorCaseBench in a study of several tutors: the text statistics of §5 against success, across the tutors.

The paper's Fig. 7 correlates, over its 11 models, each model's distinct-4-gram ratio with its success rate
(Spearman ρ = 0.80, p < 0.01), and App. O–P do the same for 3- and 5-grams and the case-recovery rate. Here every
statistic a tutor's own section reports is correlated with that tutor's success, per response type and
reference, with ρ's exact permutation p and interval (`engine.spearman_across_models`). With few tutors no
correlation can be significant whatever the data: the smallest p those tutors can give is shown beside each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine import (
    Block,
    BlockCell,
    Brief,
    ClusteredRateSummary,
    Note,
    Section,
    Table,
    format_estimate,
    format_p,
    format_rate,
    pct_or_none,
    spearman_across_models,
)

from .cases_model import CasesSummary

__all__ = ("CasesStudy", "cases_study", "cases_study_blocks")

ALL = "all"
STATISTICS = ("distinct_3", "distinct_4", "distinct_5", "top_4gram_share", "case_recovery")
"""TutorCaseBench §5: distinct-n ratios (Fig. 7, App. O), the most frequent 4-gram's share, case recovery (App. P)."""


class TextCorrelation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    response: str
    reference: str
    statistic: str
    models: int
    rho: float | None
    p: float | None
    low: float | None
    high: float | None
    min_p: float | None
    readable: bool


class TutorRate(BaseModel):
    """One tutor's rate in one row of Table 1 (`table`: "success") or of the MCQ accuracy ("mcq")."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    table: str
    row: list[str]
    tutor: str
    rate: ClusteredRateSummary


class CasesStudy(BaseModel):
    """summary.json `models.tables` of a cases study."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tutors: int
    text_vs_success: list[TextCorrelation]
    labels: list[str] = []
    rates: list[TutorRate] = []


def _figures(summary: CasesSummary) -> dict[tuple[str, str], dict[str, float | None]]:
    """(response, reference) → success and each text statistic of one tutor."""
    data = summary.cases
    recovery = {r.response: r.rate for r in data.case_recovery}
    found: dict[tuple[str, str], dict[str, float | None]] = {}
    for row in data.diversity:
        stats = {name: row.distinct(int(name[-1])) for name in STATISTICS if name.startswith("distinct_")}
        stats |= {"top_4gram_share": row.top_4gram_share, "case_recovery": recovery.get(row.response)}
        found[(row.response, row.reference)] = stats
    for s in data.success:
        if s.challenge_type == ALL and (s.response, s.reference) in found:
            found[(s.response, s.reference)]["success"] = s.rate
    return found


def cases_study(by_model: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    tutors = [_figures(CasesSummary.model_validate(found)) for found in by_model.values()]
    groups = sorted({key for figures in tutors for key in figures})
    rows = []
    for response, reference in groups:
        per_tutor = [figures.get((response, reference), {}) for figures in tutors]
        success = [_nan(f.get("success")) for f in per_tutor]
        for name in STATISTICS:
            found = spearman_across_models([_nan(f.get(name)) for f in per_tutor], success)
            rows.append(
                TextCorrelation(
                    response=response,
                    reference=reference,
                    statistic=name,
                    models=found.models if found else sum(f.get(name) is not None for f in per_tutor),
                    rho=found.rho if found else None,
                    p=found.p if found else None,
                    low=found.low if found else None,
                    high=found.high if found else None,
                    min_p=found.min_p if found else None,
                    readable=bool(found and found.readable),
                )
            )
    rates = [
        TutorRate(table="success", row=[s.response, s.reference, s.challenge_type], tutor=label, rate=s)
        for label, found in by_model.items()
        for s in CasesSummary.model_validate(found).cases.success
    ] + [
        TutorRate(table="mcq", row=[m.variant, m.response, m.challenge_type], tutor=label, rate=m)
        for label, found in by_model.items()
        for m in CasesSummary.model_validate(found).cases.mcq
    ]
    study = CasesStudy(tutors=len(tutors), text_vs_success=rows, labels=list(by_model), rates=rates)
    return study.model_dump(mode="json")


def _rates_table(study: CasesStudy, table: str, keys: tuple[str, str, str], title: str) -> Table | None:
    cells = {(tuple(r.row), r.tutor): r.rate for r in study.rates if r.table == table}
    rows_of = list(dict.fromkeys(row for row, _ in cells))
    if not rows_of:
        return None
    body: list[tuple[BlockCell, ...]] = []
    for row in rows_of:
        shown = [cells.get((row, t)) for t in study.labels]
        body.append(
            (
                *row,
                *(
                    None if r is None else Brief(format_rate(r.model_dump(), "compact"), pct_or_none(r.rate) or "–")
                    for r in shown
                ),
            )
        )
    return Table((*keys, *study.labels), tuple(body), title=title, key=f"study-cases-{table}", left=keys)


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _rate_section(study: CasesStudy) -> list[Block]:
    rate_tables = [
        found
        for found in (
            _rates_table(
                study,
                "success",
                ("response", "reference", "challenge type"),
                "Open-response success per tutor (TutorCaseBench Table 1), % [95% case-bootstrap interval]",
            ),
            _rates_table(
                study,
                "mcq",
                ("variant", "response", "challenge type"),
                "MCQ accuracy per tutor, % [95% case-bootstrap interval]",
            ),
        )
        if found is not None
    ]
    return (
        [
            Section(
                "Table 1 and MCQ accuracy per tutor",
                tuple(rate_tables),
                key="study-cases-rates",
                provenance="TutorCaseBench Table 1 and the MCQ results, a column per model",
            )
        ]
        if rate_tables
        else []
    )


def cases_study_blocks(tables: Mapping[str, Any]) -> list[Block]:
    study = CasesStudy.model_validate(tables)
    rows = study.text_vs_success
    table = Table(
        ("response", "reference", "statistic", "tutors", "ρ [95% CI]", "p", "smallest p possible"),
        tuple(
            (
                r.response,
                r.reference,
                r.statistic,
                r.models,
                format_estimate(r.rho, r.low, r.high, signed=True),
                format_p(r.p),
                format_p(r.min_p),
            )
            for r in rows
        ),
        title="Text statistic vs success across tutors (TutorCaseBench Fig. 7, App. O–P): Spearman ρ",
        key="study-cases-text",
        console_columns=("response", "reference", "statistic", "ρ [95% CI]", "p"),
        left=("response", "reference", "statistic"),
    )
    unreadable = [r for r in rows if r.rho is not None and not r.readable]
    said = (
        "Spearman's ρ over the tutors' own figures, exact permutation p, Fisher-z 95% interval on the ranks (none "
        "below four tutors); – where fewer than three tutors have the statistic or one side has no spread."
    )
    if unreadable:
        few = max(r.models for r in unreadable)
        said += (
            f' With {few} tutors the smallest p any ranking can reach is above 0.05 (column "smallest p possible"),'
            " so those correlations cannot be significant whatever the data and cannot be read as evidence either "
            "way: without ties at least five tutors are needed; the paper had 11."
        )
    return [
        *_rate_section(study),
        Section(
            "Text statistics vs success across tutors",
            (Note(said, console=True), table),
            key="study-cases-text",
            provenance="TutorCaseBench Fig. 7 and App. O–P",
        ),
    ]
