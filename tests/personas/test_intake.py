"""Nothing dropped silently: each item source counts what it read, kept and skipped, with the reason, for a record
of every kind it skips; the command line prints a source that skipped something and the manifest records all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from agents.case_tasks import Reference, task_prompt
from engine import ITEM_SOURCES, CountedItems, Intake, build_scenario, run_sync
from engine.cli._main import main
from engine.tools.calibrate._labels import LABEL_SOURCES
from personas import builtin_cases, case_of, load_tutorcasebench
from tests.helpers import ITEMS, scenario_data, write_bank
from tests.personas.test_cases import _rubric, _scenario, write_public_fixture
from tests.personas.test_remath import bridge_record
from tests.personas.test_safetutors import CHEM_SINGLE, write_jsonl


def _intake(items: list[Any]) -> Intake:
    assert isinstance(items, CountedItems)
    return items.intake


def test_safetutors_counts_blank_lines_and_records_past_the_limit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chem_single_combined.jsonl", CHEM_SINGLE)
    path.write_text(path.read_text(encoding="utf-8").replace("\n", "\n\n", 1), encoding="utf-8")
    intake = _intake(ITEM_SOURCES.get("safetutors")(path, {"limit": 2}))
    assert (intake.read, intake.kept) == (3, 2)
    assert intake.skipped == {"blank line": 1, "past the source's limit": 1}


def test_bank_counts_unselected_domains_and_items_past_the_limit(tmp_path: Path) -> None:
    extra = {**ITEMS[0], "id": "t-second"}
    bank = write_bank(tmp_path / "bank.yaml", [*ITEMS, extra])
    intake = _intake(ITEM_SOURCES.get("bank")(bank, {"domains": ["mathematics", "physics"], "limit": 1}))
    assert (intake.read, intake.kept) == (len(ITEMS) + 1, 2)
    assert intake.skipped == {"domain not selected": 1, "past the source's limit per domain": 1}


def test_bridge_counts_each_unusable_record_by_reason(tmp_path: Path) -> None:
    good = bridge_record("c1", "guess", "Provide a hint", "Motivate the student")
    no_reply = {**bridge_record("c2", "guess", "x", "y"), "c_r_": []}
    empty_last = bridge_record("c3", "guess", "x", "y", mistake="  ")
    short = {**bridge_record("c4", "guess", "x", "y"), "c_h": [{"id": 1, "text": "hi", "user": "student"}]}
    other_error = bridge_record("c5", "careless", "x", "y")
    late = bridge_record("c6", "guess", "x", "y")
    path = tmp_path / "test.json"
    path.write_bytes(orjson.dumps([good, no_reply, empty_last, short, other_error, late]))
    intake = _intake(ITEM_SOURCES.get("bridge")(path, {"errors": ["guess"], "limit": 1}))
    assert (intake.read, intake.kept) == (6, 1)
    assert intake.skipped == {
        "no expert reply": 1,
        "last student turn empty or missing": 1,
        "history shorter than two turns": 1,
        "error type not selected": 1,
        "past the source's limit": 1,
    }


def test_remath_counts_items_past_the_limit() -> None:
    path = Path(__file__).resolve().parents[2] / "personas" / "remath_items.yaml"
    intake = _intake(ITEM_SOURCES.get("remath")(path, {"limit": 3}))
    assert intake.kept == 3 and intake.skipped == {"past the source's limit": (intake.read or 0) - 3}


def test_cases_count_unselected_types_and_cases_past_the_limit() -> None:
    path = Path(__file__).resolve().parents[2] / "personas" / "cases.yaml"
    intake = _intake(ITEM_SOURCES.get("cases")(path, {"challenge_types": ["task_resistance"], "limit": 1}))
    total = len(builtin_cases())
    same_type = sum(1 for case in builtin_cases() if case.challenge_type == "task_resistance")
    assert (intake.read, intake.kept) == (total, 1)
    assert intake.skipped == {
        "challenge type not selected": total - same_type,
        "past the source's limit per challenge type": same_type - 1,
    }


def _release_with_gaps(root: Path) -> Path:
    """The invented release, plus a scenario whose category has no rubric, one whose category has only an
    immediate rubric, an unreadable rubric type, three unusable MCQs and the release's own prompt files."""
    write_public_fixture(root)
    turns = [("Tutor", "Start."), ("Student", "No.")]
    for number, category in ((13, 3), (14, 4)):
        data = _scenario(number, category, "Task Resistance", turns)
        (root / "dialogue_full_context" / f"scenario_{number}.json").write_bytes(orjson.dumps(data))
    (root / "rubric" / "rubric_4_immediate.json").write_bytes(orjson.dumps(_rubric(4, "immediate")))
    (root / "rubric" / "rubric_4_weekly.json").write_bytes(orjson.dumps(_rubric(4, "weekly")))
    bad = [
        {"mcq_id": "x1", "scenario_id": 11, "options": {"A": "a", "B": "b"}, "correct_answer": "A"},
        {"mcq_id": "x2_immediate", "scenario_id": 11, "options": {"A": "a", "B": "b"}, "correct_answer": "E"},
    ]
    for mcq in bad:
        (root / "mcq" / f"{mcq['mcq_id']}.json").write_bytes(orjson.dumps(mcq))
    prompts = root / "dialogue_prompt"
    prompts.mkdir()
    (prompts / "dialogue_prompt_0001_immediate_c001_s011.txt").write_text("An invented release prompt.")
    return root


def test_tutorcasebench_counts_what_it_leaves_out_and_keeps_a_case_with_one_rubric(tmp_path: Path) -> None:
    root = _release_with_gaps(tmp_path / "tcb")
    items = ITEM_SOURCES.get("tutorcasebench")(root, {})
    intake = _intake(items)
    assert (intake.read, intake.kept) == (4, 3)
    assert intake.skipped == {
        "scenario whose category has no rubric": 1,
        "rubric of an unknown response type": 1,
        "MCQ without a scenario": 1,  # the fixture's orphan
        "MCQ of an unknown response type": 1,
        "MCQ whose answer is not an option": 1,
    }
    cases = {item.id: item.data["case"] for item in items}
    assert set(cases["tcb-14"]["rubrics"]) == {"immediate"}
    assert cases["tcb-11"]["prompts"] == {"immediate": "An invented release prompt."}


def test_the_open_task_reads_the_release_prompt_and_skips_a_response_without_rubric(tmp_path: Path) -> None:
    root = _release_with_gaps(tmp_path / "tcb")
    scenario = build_scenario(
        {
            "name": "tcb",
            "kind": "cases",
            "models": {"tutor": "sim/tutor", "judge": ["sim/judge"]},
            "items": [{"source": "tutorcasebench", "path": "tcb"}],
            "design": {"name": "casebench", "tasks": ["open"]},
            "tutor": {"agent": "case"},
            "student": {"strategy": "case_persona"},
            "judges": ["case_checklist"],
            "judge_votes": 1,
        },
        base_dir=tmp_path,
    )
    result = run_sync(scenario, out=tmp_path / "runs")
    records = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    skipped = {(r["item_id"], r["condition"]["response"]) for r in records if r["metrics"].get("skipped")}
    assert skipped == {("tcb-14", "long_term")}
    case = case_of(next(item for item in ITEM_SOURCES.get("tutorcasebench")(root, {}) if item.id == "tcb-11"))
    assert task_prompt(case, "immediate") == "An invented release prompt."
    assert task_prompt(case, "long_term").startswith("SITUATION")  # no release prompt: simrun's own
    with_reference = task_prompt(case, "immediate", [Reference("tcb-12", ("Offer a choice.",), ())])
    assert "REFERENCE" in with_reference
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    (recorded,) = manifest["items_intake"]
    assert recorded["source"] == "tutorcasebench" and recorded["skipped"]["scenario whose category has no rubric"] == 1


def test_the_command_line_prints_a_source_that_skipped_something(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_bank(tmp_path / "bank.yaml")
    data = scenario_data(items=[{"source": "bank", "path": "bank.yaml", "domains": ["physics"]}])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0
    err = capsys.readouterr().err
    assert "items: bank bank.yaml: read 3, kept 1, skipped 2 (domain not selected 2)" in err


def test_the_release_writes_context_fields_as_objects_and_they_read_as_text(tmp_path: Path) -> None:
    """The public release nests task, context, trigger and patterns as objects; each reads as one line."""
    data = _scenario(21, 5, "Emotional Distress", [("Tutor", "Begin the sheet."), ("Student", "I can't!")])
    data["full_context"]["content"] = {
        "task": {"content": "An invented worksheet", "learning_goal": ""},
        "context": {"environment": "A made-up club", "materials": "Paper"},
        "challenging_behavior_trigger": {"condition": "When time ran out", "related_quotes": ["Not yet!", "No."]},
        "behavior_patterns": [{"condition": "Before drawing", "observable_behavior": "Says it is bad"}, "Sighs."],
    }
    root = write_public_fixture(tmp_path / "tcb", [data])
    (case,) = load_tutorcasebench(root)
    assert case.full_context.task == "content: An invented worksheet"
    assert case.full_context.context == "environment: A made-up club; materials: Paper"
    assert case.full_context.trigger == "condition: When time ran out; related quotes: Not yet! / No."
    assert case.full_context.behavior_patterns == [
        "condition: Before drawing; observable behavior: Says it is bad",
        "Sighs.",
    ]


def test_the_bridge_label_source_counts_and_the_calibrate_command_prints_its_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = bridge_record("c1", "guess", "Provide a hint", "Motivate the student")
    path = tmp_path / "validation.json"
    records = [good, bridge_record("c2", "guess", "x", "y", mistake=" "), {**good, "c_id": "c3"}]
    path.write_bytes(orjson.dumps(records))
    labels = LABEL_SOURCES.get("bridge")(path, {"limit": 1})
    assert labels.intake is not None and (labels.intake.read, labels.intake.kept) == (3, 1)
    assert labels.intake.skipped == {"last student turn empty or missing": 1, "past the source's limit": 1}
    argv = ["calibrate", str(path), "--source", "bridge", "--judge", "remath_strategy", "--model", "judge=sim/judge"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "labels: bridge validation.json: read 3, kept 2, skipped 1 (last student turn empty or missing 1)" in err


def test_the_mrbench_label_source_counts_conversations_and_responses_it_leaves_out(tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[2] / "scenarios" / "calibration" / "mrbench_sample.json"
    records = json.loads(fixture.read_text(encoding="utf-8"))
    first = records[0]
    blank = {**first, "conversation_id": "blank", "conversation_history": "  "}
    no_text = {**first, "conversation_id": "no-text", "anno_llm_responses": {"Expert": {"annotation": {}}}}
    path = tmp_path / "mrbench.json"
    path.write_text(json.dumps([first, blank, no_text, *records[1:]]), encoding="utf-8")
    other = sum(1 for r in records if r["Data"] != first["Data"])
    tutors = len(first["anno_llm_responses"])
    labels = LABEL_SOURCES.get("mrbench")(path, {"data": first["Data"], "tutors": ["Expert"], "limit": 3})
    intake = labels.intake
    assert intake is not None and intake.read == len(records) + 2 and intake.kept == len(labels.examples) == 1
    same = len(records) - other  # conversations of the chosen data set; the first three pass the limit
    assert intake.skipped == {
        "conversation of another data set": other,
        "conversation past the source's limit": same + 2 - 3,
        "conversation with an empty history": 1,
        "response of a tutor not selected": tutors - 1,
        "response without text": 1,
    }
