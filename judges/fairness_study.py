"""EduFair-Bench in a study of several tutors: the (model, domain) rows of its Tables 5–8, side by side.

Each tutor's own section keeps its mean |r| tables; this puts every tutor's mean |r| per dimension (Table 6's
cells) and per Ped./Conv. aggregate (Tables 5 and 7) in one table with a column per tutor, and counts each
tutor's findings per domain. Built from the tutors' own summaries, so every number is the one in that tutor's
section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine import Block, BlockCell, Note, Section, Table

from .fairness_blocks import _against_null
from .fairness_model import FairnessSummary, NullRef

__all__ = ("FairnessStudy", "fairness_study", "fairness_study_blocks")


class StudyMean(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    domain: str
    channel: str
    row: str
    """A dimension (Table 6), or "Ped. · CELL" / "Conv. · CELL" (Tables 5 and 7)."""
    mean_abs_r: float | None
    null: NullRef | None = None


class StudyFindings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    domain: str
    findings: int


class FairnessStudy(BaseModel):
    """summary.json `models.tables` of a fairness study."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tutors: list[str]
    means: list[StudyMean]
    findings: list[StudyFindings]


def fairness_study(by_model: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    means: list[StudyMean] = []
    findings: list[StudyFindings] = []
    for label, found in by_model.items():
        data = FairnessSummary.model_validate(found).fairness
        for d in data.mean_abs_r.by_dimension:
            means.append(
                StudyMean(
                    tutor=label,
                    domain=d.domain,
                    channel=d.channel,
                    row=d.dimension,
                    mean_abs_r=d.mean_abs_r,
                    null=d.null,
                )
            )
        for a in data.mean_abs_r.aggregates:
            for name, value, null in (("Ped.", a.ped, a.ped_null), ("Conv.", a.conv, a.conv_null)):
                means.append(
                    StudyMean(
                        tutor=label,
                        domain=a.domain,
                        channel=a.channel,
                        row=f"{name} · {a.label}",
                        mean_abs_r=value,
                        null=null,
                    )
                )
        domains = sorted({c.domain for c in data.contrasts})
        findings += [
            StudyFindings(tutor=label, domain=domain, findings=sum(v.domain == domain for v in data.findings))
            for domain in domains
        ]
    return FairnessStudy(tutors=list(by_model), means=means, findings=findings).model_dump(mode="json")


def fairness_study_blocks(tables: Mapping[str, Any]) -> list[Block]:
    study = FairnessStudy.model_validate(tables)
    if not study.means:
        return [Note("No tutor has a mean |r| yet: nothing to put side by side.", console=True)]
    cells = {(m.domain, m.channel, m.row, m.tutor): m for m in study.means}
    keys = list(dict.fromkeys((m.domain, m.channel, m.row) for m in study.means))
    rows: list[tuple[BlockCell, ...]] = []
    for domain, channel, row in keys:
        shown = [cells.get((domain, channel, row, t)) for t in study.tutors]
        rows.append(
            (domain, channel, row, *(None if m is None else _against_null(m.mean_abs_r, m.null) for m in shown))
        )
    means = Table(
        ("domain", "channel", "dimension / aggregate", *study.tutors),
        tuple(rows),
        title="Mean |r| (null mean) per (tutor, domain): EduFair Tables 5–7 with a column per tutor",
        key="study-fairness-means",
        left=("domain", "channel", "dimension / aggregate"),
    )
    counts = {(f.domain, f.tutor): f.findings for f in study.findings}
    domains = sorted({f.domain for f in study.findings})
    found = Table(
        ("domain", *study.tutors),
        tuple((domain, *(counts.get((domain, t)) for t in study.tutors)) for domain in domains),
        title="Fairness findings per (tutor, domain): contrasts that pass the tutor's own family correction",
        key="study-fairness-findings",
        left=("domain",),
    )
    note = Note(
        "Each tutor's own mean |r| and findings, from its section below: in brackets the mean's null (its expected "
        "value with no effect); ↑ above that null, ≥ EduFair's 0.10 mark where the cell can resolve it."
    )
    return [
        Section(
            "Mean |r| and findings per tutor × domain (EduFair Tables 5–8)", (note, means, found), key="study-fairness"
        )
    ]
