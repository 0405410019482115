"""Crescendo in a study of several tutors: SafeTutors' harm tables as one subject × dimension × model table.

Each tutor's own section keeps its subject × dimension tables; this joins them so a reader compares models in
the same cell, as the paper's harm tables (model × subject × dimension, with the dimensions ≥ 60% count per
model) and its text ("in how many of the 33 cells is the 72B model worse") do. Built from the tutors' own
summaries, so every number is the one in that tutor's section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine import Block, BlockCell, Brief, ClusteredRateSummary, Note, Section, Table, format_rate, pct_or_none

from .crescendo_blocks import _PAPER_SCALE, _contrast, _paper_cell
from .crescendo_model import CrescendoSummary, Hazard, SubjectPedagogy

__all__ = ("CrescendoStudy", "crescendo_study", "crescendo_study_blocks")

ALL = "all subjects"


class StudyCell(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    subject: str
    """A subject, or "all subjects" (the tutor's pooled row)."""
    format: str
    dimension: str
    per_response: ClusteredRateSummary
    unjudged: int = 0


class StudyHigh(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    subject: str
    format: str
    count: int
    of: int


class StudyAmplification(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    dimension: str
    delta: float | None
    low: float | None
    high: float | None


class StudyHazard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutor: str
    hazard: Hazard
    """Over every multi-turn dialogue of the tutor ("all" of its own hazard table)."""


class StudyPedagogy(SubjectPedagogy):
    tutor: str


class CrescendoStudy(BaseModel):
    """summary.json `models.tables` of a crescendo study."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tutors: list[str]
    dimensions: list[str]
    subjects: list[str]
    formats: list[str]
    harm: list[StudyCell]
    high_harm: list[StudyHigh]
    amplification: list[StudyAmplification]
    hazard: list[StudyHazard] = []
    pedagogy: list[StudyPedagogy] = []


def crescendo_study(by_model: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    tutors = {label: CrescendoSummary.model_validate(found) for label, found in by_model.items()}
    cells: list[StudyCell] = []
    high: list[StudyHigh] = []
    amplification: list[StudyAmplification] = []
    dimensions: dict[str, None] = {}
    subjects: set[str] = set()
    formats: dict[str, None] = {}
    for label, s in tutors.items():
        for c in s.by_subject_dimension:
            cells.append(
                StudyCell(
                    tutor=label,
                    subject=c.subject,
                    format=c.format,
                    dimension=c.dimension,
                    per_response=c.per_response,
                    unjudged=c.unjudged,
                )
            )
            subjects.add(c.subject)
        for d in s.harm:
            dimensions.setdefault(d.dimension)
            formats.setdefault(d.format)
            cells.append(
                StudyCell(
                    tutor=label,
                    subject=ALL,
                    format=d.format,
                    dimension=d.dimension,
                    per_response=d.per_response,
                    unjudged=d.unjudged,
                )
            )
        high += [
            StudyHigh(tutor=label, subject=h.subject or ALL, format=h.format, count=h.count, of=h.of)
            for h in s.high_harm_dimensions
        ]
        amplification += [
            StudyAmplification(tutor=label, dimension=a.dimension, delta=a.delta, low=a.ci.low, high=a.ci.high)
            for a in s.amplification
            if a.subject is None and a.dimension is not None
        ]
    hazard = [StudyHazard(tutor=label, hazard=s.hazard["all"]) for label, s in tutors.items() if "all" in s.hazard]
    pedagogy = [
        StudyPedagogy(tutor=label, **row.model_dump()) for label, s in tutors.items() for row in s.pedagogy_by_subject
    ]
    study = CrescendoStudy(
        hazard=hazard,
        pedagogy=pedagogy,
        tutors=list(tutors),
        dimensions=list(dimensions),
        subjects=sorted(subjects),
        formats=list(formats),
        harm=cells,
        high_harm=high,
        amplification=amplification,
    )
    return study.model_dump(mode="json")


def _rate(cell: StudyCell | None) -> Brief | None:
    """The rate with its interval; the terminal shows the percentage only, to fit the tutors' rows."""
    if cell is None or cell.per_response.rate is None:
        return None
    unjudged = f", {cell.unjudged} unjudged" if cell.unjudged else ""
    return Brief(
        format_rate(cell.per_response.model_dump(), "compact") + unjudged, pct_or_none(cell.per_response.rate) or "–"
    )


def _harm_table(study: CrescendoStudy, fmt: str, names: Mapping[str, str]) -> Table:
    """Rows subject × dimension, a column per tutor: the terminal fits four tutors in 80 columns."""
    cells = {(c.tutor, c.subject, c.dimension): c for c in study.harm if c.format == fmt}
    high = {(h.tutor, h.subject): h for h in study.high_harm if h.format == fmt}
    rows: list[tuple[BlockCell, ...]] = []
    classes: list[str] = []
    for subject in [*study.subjects, ALL]:
        for d in study.dimensions:
            rows.append((subject, names.get(d, d), *(_rate(cells.get((t, subject, d))) for t in study.tutors)))
            classes.append("")
        counts = (high.get((t, subject)) for t in study.tutors)
        rows.append((subject, "dimensions ≥ 60%", *(None if h is None else f"{h.count} of {h.of}" for h in counts)))
        classes.append("total")
    return Table(
        ("subject", "dimension", *study.tutors),
        tuple(rows),
        title=f"{fmt.capitalize()}-turn harm per reply by subject × dimension × tutor",
        caption="% of generated replies judged unsafe, 95% cluster-bootstrap interval over dialogues (the terminal "
        "shows the rate alone); dimensions ≥ 60%: SafeTutors' high-harm count per tutor.",
        key=f"study-harm-{fmt}",
        row_classes=tuple(classes),
        left=("subject", "dimension"),
    )


def _points(value: float | None) -> str | None:
    return None if value is None else f"{value * 100:+.1f} pp"


def _amplification_table(study: CrescendoStudy, names: Mapping[str, str]) -> Table:
    found = {(a.tutor, a.dimension): a for a in study.amplification}
    rows = []
    for d in study.dimensions:
        shown = [found.get((t, d)) for t in study.tutors]
        rows.append(
            (
                names.get(d, d),
                *(
                    None
                    if a is None
                    else Brief(f"{_points(a.delta)} [{_points(a.low)}, {_points(a.high)}]", _points(a.delta) or "–")
                    for a in shown
                ),
            )
        )
    return Table(
        ("dimension", *study.tutors),
        tuple(rows),
        title="Amplification per tutor: multi- minus single-turn harm per reply, pp [95% interval]",
        key="study-amplification",
        left=("dimension",),
    )


def _hazard_table(study: CrescendoStudy) -> Table:
    return Table(
        ("tutor", "first reply", "later replies (pooled)", "later − first [95% CI]"),
        tuple((h.tutor, *_contrast(h.hazard)) for h in study.hazard),
        title="Hazard per tutor: first unsafe reply at the first exchange against the later ones, every dimension",
        key="study-hazard",
        left=("tutor",),
    )


def _pedagogy_tables(study: CrescendoStudy) -> list[Table]:
    """One table per format, so four tutors' columns fit the terminal."""
    cells = {(p.metric, p.format, p.subject, p.tutor): p for p in study.pedagogy}
    tables = []
    for fmt in dict.fromkeys(p.format for p in study.pedagogy):
        keys = list(dict.fromkeys((p.metric, p.subject) for p in study.pedagogy if p.format == fmt))
        tables.append(
            Table(
                ("metric", "subject", "scale", *study.tutors),
                tuple(
                    (
                        m,
                        subject,
                        _PAPER_SCALE.get(m, "%"),
                        *(_paper_cell(cells.get((m, fmt, subject, t))) for t in study.tutors),
                    )
                    for m, subject in keys
                ),
                title=f"{fmt.capitalize()}-turn pedagogy per tutor × subject, the paper's scale (SafeTutors Figs. 3–4)",
                key=f"study-pedagogy-{fmt}",
                left=("metric", "subject", "scale"),
                console_columns=("metric", "subject", *study.tutors),
            )
        )
    return tables


def crescendo_study_blocks(tables: Mapping[str, Any], names: Mapping[str, str]) -> list[Block]:
    study = CrescendoStudy.model_validate(tables)
    if not study.harm:
        return [Note("No tutor has a harm rate yet: nothing to put side by side.", console=True)]
    harm = tuple(_harm_table(study, fmt, names) for fmt in study.formats)
    note = Note(
        "Every tutor's harm per reply in the same subject × dimension cell, from its own section's tables "
        "(SafeTutors' model × subject × dimension harm tables)."
    )
    return [
        Section(
            "Harm by subject × dimension × tutor (SafeTutors Tables 1–2)",
            (note, *harm),
            key="study-harm",
            provenance="SafeTutors Tables 1–2, a column per model",
        ),
        Section(
            "Amplification per tutor",
            (_amplification_table(study, names),),
            key="study-amplification",
            provenance="SafeTutors multi- vs single-turn harm per model",
        ),
        *([Section("Hazard per tutor", (_hazard_table(study),), key="study-hazard")] if study.hazard else []),
        *(
            [Section("Pedagogy per tutor × subject", tuple(_pedagogy_tables(study)), key="study-pedagogy")]
            if study.pedagogy
            else []
        ),
    ]
