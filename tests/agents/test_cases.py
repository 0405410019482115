"""The case protocol: the design's conditions, what the tutor is shown, MCQ construction and parsing, a run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.cases import CaseDesign, build_mcq, parse_choice, reference_strategies, task_prompt
from engine import ITEM_SOURCES, Item, load_scenario, run_sync
from engine.runtime._rundir import RunDir
from engine.scenario._plan import load_items, plan_episodes
from personas.cases import case_of

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "casebench.yaml"


def _items() -> list[Item]:
    return ITEM_SOURCES.get("cases")(ROOT / "personas" / "cases.yaml", {})


def test_design_conditions_and_pairing() -> None:
    """Open tasks get both reference levels; interactive is immediate only; a case's conditions share a seed."""
    conditions = CaseDesign(CaseDesign.Options()).conditions()
    assert len(conditions) == 4 + 2 * 2 * 3 + 1  # open × reference, mcq4/binary × response × strategy, interactive
    assert {c["strategy"] for c in conditions if c["task"] == "mcq4"} == {"1", "2", "3"}
    assert {c["strategy"] for c in conditions if c["task"] in ("open", "interactive")} == {"-"}
    assert {c["reference"] for c in conditions if c["task"] == "open"} == {"none", "retrieved"}
    assert {(c["response"], c["reference"]) for c in conditions if c["task"] == "interactive"} == {
        ("immediate", "none")
    }
    scenario = load_scenario(SCENARIO, overrides=["replicates=1"])
    episodes = plan_episodes(scenario, load_items(scenario))
    assert len(episodes) == 15 * 13  # the scenario asks 2 MCQs per case and response type
    seeds: dict[str, set[int]] = {}
    for episode in episodes:
        seeds.setdefault(episode.item.id, set()).add(episode.seed)
    assert all(len(s) == 1 for s in seeds.values()) and len({next(iter(s)) for s in seeds.values()}) == 15


def test_the_tutor_never_sees_the_hidden_strategies() -> None:
    """The prompt holds the minimal context and the dialogue; references come only from other cases."""
    for item in _items():
        case = case_of(item)
        own = [*case.strategies.immediate_effective, *case.strategies.long_term_effective, *case.strategies.ineffective]
        for response in ("immediate", "long_term"):
            references = reference_strategies(item, response)
            prompt = task_prompt(case, response, references)
            assert case.minimal_context in prompt and case.dialogue[-1].text in prompt
            assert case.full_context.trigger not in prompt
            assert not any(strategy in prompt for strategy in own)
            assert len(references) == 2 and all(ref.case_id != case.id for ref in references)
            assert all(s in prompt for ref in references for s in (*ref.worked, *ref.failed))
            assert "Worked:" in prompt and "Did not work:" in prompt


def test_mcq_options_come_from_the_right_places_and_are_shuffled() -> None:
    """4 options: this case's effective strategy and three from similar cases; binary: effective vs ineffective;
    the correct letter moves with the seed."""
    item = _items()[0]
    case = case_of(item)
    positions = set()
    for seed in range(40):
        mcq = build_mcq(item, case, "immediate", "mcq4", random.Random(seed))
        assert mcq is not None and len(set(mcq.options)) == 4
        assert mcq.options[mcq.correct] in case.strategies.immediate_effective
        others = [o for i, o in enumerate(mcq.options) if i != mcq.correct]
        assert not set(others) & set(case.strategies.immediate_effective)
        positions.add(mcq.correct)
        binary = build_mcq(item, case, "long_term", "binary", random.Random(seed))
        assert binary is not None and binary.options[binary.correct] in case.strategies.long_term_effective
        assert binary.options[1 - binary.correct] in case.strategies.ineffective
    assert positions == {0, 1, 2, 3}
    bare = case.model_copy(update={"strategies": case.strategies.model_copy(update={"ineffective": []})})
    assert build_mcq(item, bare, "immediate", "binary", random.Random(0)) is None


@given(letter=st.sampled_from("ABCD"), form=st.sampled_from(["json", "option", "prose", "bare", "fenced"]))
def test_parse_choice_reads_common_reply_forms(letter: str, form: str) -> None:
    text = {
        "json": f'{{"answer": "{letter}", "reasoning": "fits"}}',
        "option": f'{{"answer": "Option {letter})", "reasoning": "fits"}}',
        "prose": f"After thinking it over, my answer: {letter}, because it fits.",
        "bare": f"  {letter}.  ",
        "fenced": f'```json\n{{"answer": "({letter})"}}\n```',
    }[form]
    assert parse_choice(text, "ABCD") == letter
    assert parse_choice(text, "AB") == (letter if letter in "AB" else None)


def test_parse_choice_rejects_non_answers() -> None:
    for text in ('{"answer": "E"}', '{"answer": ""}', "I am not sure.", '{"reasoning": "no answer"}'):
        assert parse_choice(text, "ABCD") is None


def test_a_limited_run_records_every_task(tmp_path: Path) -> None:
    """One case per challenge type under every condition: prefix turns carry no model, open responses are
    judged, MCQs scored, the interactive episode ends on a student turn and carries a de-escalation judgment."""
    scenario = load_scenario(SCENARIO, overrides=["replicates=1", "items.0.limit=1"])
    result = run_sync(scenario, out=tmp_path)
    assert result.exit_code == 0 and result.ok == 5 * 13
    records = list(RunDir(result.run_dir).iter_records())
    assert len(records) == 5 * 13
    for record in records:
        assert all(t.model is None for t in record.turns[:6])
        task = record.condition["task"]
        if task in ("mcq4", "binary"):
            assert record.metrics["mcq_valid"] is True
            assert record.metrics["mcq_options"] == (4 if task == "mcq4" else 2)
            assert record.metrics["mcq_correct"] == (
                record.metrics["mcq_answer"] == record.metrics["mcq_correct_letter"]
            )
            assert not record.judgments
        else:
            turn = record.metrics["response_turn"]
            assert isinstance(turn, int) and turn == 6 and record.turns[turn].model == "sim/tutor"
            assert record.judgment("case_success", turn) is not None
        if task == "interactive":
            assert record.turns[-1].role == "student" and len(record.turns) == 6 + 1 + 3
            assert record.judgment("deescalated", "conversation") is not None
        else:
            assert record.judgment("deescalated", "conversation") is None


def test_a_case_without_material_is_skipped_not_scored(tmp_path: Path) -> None:
    """A lone case has no similar cases to draw 4-option distractors from: recorded as skipped, no score."""
    overrides = [
        "replicates=1",
        "items.0.limit=1",
        "items.0.challenge_types=[academic_struggle]",
        "design.tasks=[mcq4]",
    ]
    result = run_sync(load_scenario(SCENARIO, overrides=overrides), out=tmp_path)
    records = list(RunDir(result.run_dir).iter_records())
    assert result.exit_code == 0 and len(records) == 4
    assert all(
        r.metrics["skipped"] == f"no material for mcq4 item {r.condition['strategy']}"
        and "mcq_correct" not in r.metrics
        for r in records
    )
    assert result.summary["cases"]["skipped"] == {"mcq4": 4} and result.summary["cases"]["mcq"] == []


@pytest.mark.parametrize("task", ["open", "mcq4", "interactive"])
def test_dry_run_estimates_each_task(task: str) -> None:
    from engine import PROTOCOLS, build

    built = build(load_scenario(SCENARIO, overrides=[f"design.tasks=[{task}]"]))
    guess = PROTOCOLS.get("cases").estimate(built, built.episodes[0])
    assert guess["tutor"].calls >= 1
    assert ("judge" in guess) == (task != "mcq4")
    assert ("student" in guess) == (task == "interactive")
