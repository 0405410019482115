"""The checklist judge, the de-escalation judge and distinct-n."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError

from engine import load_scenario, run_sync
from engine.runtime._rundir import RunDir
from judges.checklist import (
    ChecklistVerdict,
    CriterionScore,
    _verdict_for,
    combine_checklist,
    distinct_n,
    top_ngram,
)
from personas.cases import builtin_cases

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "casebench.yaml"


def test_distinct_n_and_top_ngram() -> None:
    assert distinct_n(["a b c", "a b c"], 1) == 0.5
    assert distinct_n(["a b c d", "e f g h"], 2) == 1.0
    assert distinct_n(["one"], 2) is None and distinct_n([], 1) is None
    assert top_ngram(["take a deep breath now", "please take a deep breath", "no"], 4) == ("take a deep breath", 2 / 3)
    assert top_ngram([], 4) is None


def test_a_vote_must_score_every_criterion_once() -> None:
    schema = _verdict_for((1, 2))
    schema.model_validate({"criteria_scores": [{"criterion_id": 2, "score": True}, {"criterion_id": 1, "score": 0}]})
    for scores in (
        [{"criterion_id": 1, "score": 1}],
        [{"criterion_id": 1, "score": 1}] * 2 + [{"criterion_id": 2, "score": 0}],
    ):
        with pytest.raises(ValidationError, match="one score for each criterion"):
            schema.model_validate({"criteria_scores": scores})
    with pytest.raises(ValidationError):
        schema.model_validate({"criteria_scores": [{"criterion_id": 1, "score": 2}, {"criterion_id": 2, "score": 0}]})


def _vote(*scores: Literal[0, 1]) -> ChecklistVerdict:
    return ChecklistVerdict(
        criteria_scores=[CriterionScore(criterion_id=i + 1, score=s, evidence=f"e{i}") for i, s in enumerate(scores)]
    )


def test_combination_is_majority_per_criterion_then_any() -> None:
    """Success is read off the combined criteria, not off any single vote."""
    case = builtin_cases()[0]
    judged = combine_checklist([_vote(1, 0), _vote(0, 1), _vote(0, 0)], case, "immediate", judge="j", target=6)
    values = {j.metric: j.value for j in judged}
    assert values == {"criterion_1": 0, "criterion_2": 0, "case_success": 0, "criteria_rate": 0.0}
    judged = combine_checklist([_vote(1, 0), _vote(1, 1), _vote(0, 0)], case, "immediate", judge="j", target=6)
    values = {j.metric: j.value for j in judged}
    assert values == {"criterion_1": 1, "criterion_2": 0, "case_success": 1, "criteria_rate": 0.5}
    assert next(j for j in judged if j.metric == "criterion_1").votes == [1, 1, 0]


def _run(tmp_path: Path, *overrides: str) -> RunDir:
    scenario = load_scenario(SCENARIO, overrides=["replicates=1", *overrides])
    return RunDir(run_sync(scenario, out=tmp_path).run_dir)


def test_checklist_follows_what_the_response_applies(tmp_path: Path) -> None:
    """A noiseless judge: a tutor that always applies an effective strategy always succeeds; a tutor that never
    does never succeeds — the judged rubric is the one of the episode's response type."""
    always = _run(
        tmp_path / "a",
        "design.tasks=[open]",
        "models.judge.0.params.error_rate=0",
        "models.tutor.params.case_effective=1",
        "models.tutor.params.case_long_term_effective=1",
    )
    never = _run(
        tmp_path / "b",
        "design.tasks=[open]",
        "models.judge.0.params.error_rate=0",
        "models.tutor.params.case_effective=0",
        "models.tutor.params.case_long_term_effective=0",
        "models.tutor.params.case_reference_boost=0",
    )
    cases = {c.id: c for c in builtin_cases()}
    for run, expected in ((always, 1), (never, 0)):
        records = list(run.iter_records())
        assert len(records) == 60
        for record in records:
            turn = record.metrics["response_turn"]
            assert isinstance(turn, int)
            assert record.judgment("case_success", turn).value == expected  # type: ignore[union-attr]
            rubric = cases[record.item_id].rubric(record.condition["response"])  # type: ignore[arg-type]
            assert {j.metric for j in record.judgments if j.metric.startswith("criterion_")} == {
                f"criterion_{c.id}" for c in rubric
            }


def test_invalid_judge_output_leaves_the_reply_unjudged(tmp_path: Path) -> None:
    """A judge that never returns JSON is retried, then the reply is unjudged (with the reason) — never a 0."""
    run = _run(tmp_path, "design.tasks=[open]", "items.0.limit=1", "models.judge.0.params.invalid_rate=1")
    records = list(run.iter_records())
    assert records and all(r.status == "ok" for r in records)
    judged = [j for r in records for j in r.judgments if j.judge == "case_checklist"]
    assert judged and all(
        j.metric == "unjudged" and j.value is None and "invalid output" in (j.rationale or "") for j in judged
    )


def test_deescalation_follows_the_student(tmp_path: Path) -> None:
    """A student that always calms after an effective move, and a tutor that always makes one: all de-escalate;
    a student that never calms: none do."""
    calm = _run(
        tmp_path / "a",
        "design.tasks=[interactive]",
        "models.judge.0.params.error_rate=0",
        "models.tutor.params.case_effective=1",
        "models.student.params.deescalate_effective=1",
    )
    stuck = _run(
        tmp_path / "b",
        "design.tasks=[interactive]",
        "models.judge.0.params.error_rate=0",
        "models.student.params.deescalate_effective=0",
        "models.student.params.deescalate_other=0",
    )
    assert {r.judgment("deescalated", "conversation").value for r in calm.iter_records()} == {1}  # type: ignore[union-attr]
    assert {r.judgment("deescalated", "conversation").value for r in stuck.iter_records()} == {0}  # type: ignore[union-attr]
