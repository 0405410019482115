"""ReMath in a study of several tutors: Table 3 and Table 8 with a row per tutor and one Human row.

The Human row (and Table 8's "original", the novice reply) is no tutor's reply. The design declares `given: human`
tutor-free, so a study plays it once and its rows come from the summary of those episodes (`with_shared`). Runs
made separately and joined have one copy per tutor: the row is then taken from the first tutor that has it, and the
table says so when the copies differ (a judge sampling at temperature). The teachers' agreement with each other
(Tasks A/B) depends on no tutor either: it is shown once, beside the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine import Block, Note, Section, Table

from .remath_blocks import SCORES, _interval, _num, _row_name, remath_blocks
from .remath_metrics import AUTOMATED_METRICS
from .remath_model import AutomatedRow, Condition, HumanAgreement, RemathResults, RemathSummary

__all__ = ("RemathStudy", "remath_study", "remath_study_blocks", "remath_tutor_blocks", "remath_with_shared")

SHARED = frozenset({"human", "original"})
"""Rows that replay the same reply for every tutor (the expert's, the novice's)."""
_WHOSE = {"human": "expert", "original": "novice"}


class TutorCondition(Condition):
    tutor: str


class TutorAutomated(AutomatedRow):
    tutor: str


class TeachersAgreement(HumanAgreement):
    label: str


class RemathStudy(BaseModel):
    """summary.json `models.tables` of a ReMath study; `human_from` None with a `human` row: played once."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    human: Condition | None
    human_from: str | None
    human_differs: bool
    conditions: list[TutorCondition]
    shared_automated: list[AutomatedRow]
    automated: list[TutorAutomated]
    teachers: list[TeachersAgreement] = []


def remath_study(by_model: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each tutor's Task C rows and Table 8 rows, and the shared rows once."""
    tutors = {label: RemathSummary.model_validate(found).remath for label, found in by_model.items()}
    humans = [(label, c) for label, data in tutors.items() for c in data.conditions if c.given in SHARED]
    shared: dict[str, AutomatedRow] = {}
    for data in tutors.values():
        for row in data.automated:
            if row.given in SHARED:
                shared.setdefault(row.given, row)
    study = RemathStudy(
        human=humans[0][1] if humans else None,
        human_from=humans[0][0] if humans else None,
        human_differs=any(c != humans[0][1] for _, c in humans[1:]),
        conditions=[
            TutorCondition(tutor=label, **c.model_dump())
            for label, data in tutors.items()
            for c in data.conditions
            if c.given not in SHARED
        ],
        shared_automated=list(shared.values()),
        teachers=_teachers(tutors.values()),
        automated=[
            TutorAutomated(tutor=label, **r.model_dump())
            for label, data in tutors.items()
            for r in data.automated
            if r.given not in SHARED
        ],
    )
    return study.model_dump(mode="json")


def _teachers(tutors: Iterable[RemathResults]) -> list[TeachersAgreement]:
    """Per label, the two teachers against each other, from the first tutor whose snippets have two."""
    found: dict[str, TeachersAgreement] = {}
    for data in tutors:
        for row in data.agreement:
            if row.human is not None and row.label not in found:
                found[row.label] = TeachersAgreement(label=row.label, **row.human.model_dump())
    return list(found.values())


def remath_with_shared(tables: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """The study's tables with the Human rows read once, from the episodes no tutor played."""
    data = RemathSummary.model_validate(shared).remath
    humans = [c for c in data.conditions if c.given in SHARED]
    own = [r for r in data.automated if r.given in SHARED]
    study = RemathStudy.model_validate(tables)
    study = study.model_copy(
        update={
            "human": humans[0] if humans else study.human,
            "human_from": None if humans else study.human_from,
            "human_differs": False if humans else study.human_differs,
            "shared_automated": _expert_and_novice(own, study.shared_automated),
        }
    )
    return study.model_dump(mode="json")


def _expert_and_novice(shared: list[AutomatedRow], first: list[AutomatedRow]) -> list[AutomatedRow]:
    """Table 8's shared rows: the expert's reply from the episodes no tutor played, the novice's ("original", over
    the items of every Task C condition) from the first tutor's summary when it has one."""
    rows = {r.given: r for r in shared} | {r.given: r for r in first if r.given != "human"}
    return [rows[given] for given in ("original", "human") if given in rows]


def remath_study_blocks(tables: Mapping[str, Any]) -> list[Block]:
    study = RemathStudy.model_validate(tables)
    blocks: list[Block] = []
    if study.conditions or study.human:
        rows = (
            [("expert", _row_name(study.human.given), study.human.against, study.human.replies)] if study.human else []
        )
        scores = [study.human] if study.human else []
        rows += [(c.tutor, _row_name(c.given), c.against, c.replies) for c in study.conditions]
        scores += study.conditions
        table = Table(
            ("tutor", "given", "against", "replies", *SCORES),
            tuple((*row, *(_interval(c.score(m)) for m in SCORES)) for row, c in zip(rows, scores, strict=True)),
            title="ReMath Task C (Table 3) per tutor: −2..2 against the baseline, 95% CI over items",
            key="study-remath-conditions",
            console_columns=("tutor", "given", "usefulness", "care", "overall"),
            left=("tutor", "given"),
        )
        said = "The Human row is the expert's reply, the same for every tutor, shown once"
        said += f" (from tutor {study.human_from}'s episodes" if study.human_from else " (played once for the study)."
        said += (
            "; the tutors' copies of it were judged differently, so it varies by tutor)."
            if study.human_differs
            else "; every tutor's copy of it was judged alike)."
            if study.human_from
            else ""
        )
        blocks.append(Section("Task C per tutor (the paper's Table 3)", (Note(said), table), key="study-remath-t3"))
    if study.automated:
        shared = [(_WHOSE.get(r.given, "–"), _row_name(r.given), r) for r in study.shared_automated]
        rows8 = shared + [(r.tutor, _row_name(r.given), r) for r in study.automated]
        table8 = Table(
            ("tutor", "given", "n", *AUTOMATED_METRICS),
            tuple((tutor, given, r.n, *(_num(r.metric(m)) for m in AUTOMATED_METRICS)) for tutor, given, r in rows8),
            title="ReMath Task C (Table 8) per tutor: automated metrics vs the expert reply",
            key="study-remath-automated",
            left=("tutor", "given"),
            console_columns=("tutor", "given", "n", "rouge1", "rougeL", "bleu", "length"),
        )
        blocks.append(Section("Automated metrics per tutor (the paper's Table 8)", (table8,), key="study-remath-t8"))
    if study.teachers:
        teachers = Table(
            ("label", "n", "match", "kappa", "entropy"),
            tuple((t.label, t.n, _num(t.match, pct=True), _num(t.kappa), _num(t.entropy)) for t in study.teachers),
            title="ReMath Tasks A/B: the two teachers against each other (no tutor's, shown once)",
            key="study-remath-teachers",
            left=("label",),
        )
        blocks.append(Section("Human–human agreement (Tables 1–2)", (teachers,), key="study-remath-teachers"))
    return blocks


def remath_tutor_blocks(summary: RemathSummary) -> list[Block]:
    """One tutor's own ReMath tables in a study, without the shared rows the study's tables show once."""
    data: RemathResults = summary.remath
    own = data.model_copy(
        update={
            "agreement": [r.model_copy(update={"human": None}) for r in data.agreement],
            "conditions": [c for c in data.conditions if c.given not in SHARED],
            "automated": [r for r in data.automated if r.given not in SHARED],
        }
    )
    return remath_blocks(own, teachers_apart=True)
