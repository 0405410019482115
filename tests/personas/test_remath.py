"""ReMath mistake items: the built-in set, label normalisation, and the Bridge layout reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents import remath_sim as sim_remath
from engine import ITEM_SOURCES, ScenarioError
from personas.remath import (
    BUILTIN_ITEMS,
    ERROR_TYPES,
    INTENTIONS,
    STRATEGIES,
    bridge_items,
    load_mistake_items,
    normalise_error,
    normalise_intention,
    normalise_strategy,
)


def _turn(i: int, user: str, text: str) -> dict[str, Any]:
    return {"id": i, "text": text, "time": f"0{i}:00", "user": user}


def bridge_record(c_id: str, e: str, what: str, why: str, *, mistake: str = "is it 12?") -> dict[str, Any]:
    """One record in the Bridge layout, with invented content."""
    return {
        "c_id": c_id,
        "lesson_topic": "2.1A.Counting On",
        "c_h": [
            _turn(1, "tutor", "We have 7 apples and pick 3 more."),
            _turn(2, "student", "ok"),
            _turn(3, "tutor", "How many apples now?"),
            _turn(4, "student", mistake),
        ],
        "c_r": [_turn(5, "tutor", "Good try.")],
        "c_r_": [{"user": "tutor", "text": "Nice try! Let's count on from 7: 8, 9...", "is_revised": True}],
        "c_revision": [{"user": "tutor", "text": "Nice try!", "is_revised": True}],
        "e": e,
        "z_what": what,
        "z_why": why,
    }


def test_the_builtin_set_has_at_least_20_valid_items_covering_every_error_type() -> None:
    items = load_mistake_items()
    assert len(items) >= 20
    assert {m.error for m in items} == set(ERROR_TYPES)
    assert len({m.strategy for m in items}) >= 8
    assert all(m.history[-1].role == "student" and m.reference for m in items)


def test_the_sim_uses_the_same_label_lists() -> None:
    assert tuple(ERROR_TYPES) == sim_remath.ERRORS
    assert tuple(STRATEGIES) == sim_remath.STRATEGIES
    assert tuple(INTENTIONS) == sim_remath.INTENTIONS


def test_remath_source_filters_and_builds_engine_items() -> None:
    items = ITEM_SOURCES.get("remath")(BUILTIN_ITEMS, {"errors": ["careless"], "limit": 2})
    assert len(items) == 2 and all(i.data["error"] == "careless" for i in items)
    assert items[0].question == items[0].data["history"][-1]["text"]
    with pytest.raises(ScenarioError):
        ITEM_SOURCES.get("remath")(BUILTIN_ITEMS, {"errors": ["lazy"]})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("guess", "guess"),
        ("Right-Idea", "right-idea"),
        ("diagnose", "not-sure"),
        ("not sure", "not-sure"),
        ("N/A", "N/A"),
        ("The student did not make a mistake.", "N/A"),
    ],
)
def test_error_labels_are_normalised(raw: str, expected: str) -> None:
    assert normalise_error(raw) == expected


def test_strategy_and_intention_accept_keys_and_paper_names() -> None:
    assert normalise_strategy("Provide a worked example") == "provide_example"
    assert normalise_strategy("ask_question") == "ask_question"
    assert normalise_strategy("Provided a visual aid.") == "other"
    assert (
        normalise_intention("Help the student understand the lesson topic or solution strategy") == "understand_topic"
    )
    assert normalise_intention("End session\n") == "other"


@given(st.text(max_size=60))
def test_normalisers_always_return_a_known_label(raw: str) -> None:
    assert normalise_error(raw) in ERROR_TYPES
    assert normalise_strategy(raw) in STRATEGIES
    assert normalise_intention(raw) in INTENTIONS


def test_bridge_reader_on_an_own_fixture(tmp_path: Path) -> None:
    records = [
        bridge_record("77_1", "guess", "provide_strategy", "understand_topic"),
        bridge_record("77_1", "diagnose", "Provided a visual aid", "hint_mistake"),  # repeated c_id
        bridge_record("78_4", "The student did not make a mistake.", "affirm_correct_answer", "signal_goal"),
        {**bridge_record("79_2", "careless", "provide_hint", "hint_mistake"), "c_r_": []},  # no expert reply
    ]
    path = tmp_path / "test.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    items = ITEM_SOURCES.get("bridge")(path, {})
    assert [i.id for i in items] == ["test-0000", "test-0001", "test-0002"]
    assert [i.data["error"] for i in items] == ["guess", "not-sure", "N/A"]
    assert items[1].data["strategy"] == "other" and items[1].data["raw"]["z_what"] == "Provided a visual aid"
    assert items[0].data["source_id"] == items[1].data["source_id"] == "77_1"
    assert items[0].data["reference"].startswith("Nice try") and items[0].data["novice"] == "Good try."
    assert [t["role"] for t in items[0].data["history"]] == ["tutor", "student", "tutor", "student"]


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers()), st.dictionaries(st.text(), st.text())))
def test_bridge_reader_rejects_other_shapes_with_value_error(data: Any) -> None:
    if isinstance(data, list) and not data:
        assert bridge_items(data, split="x") == []
    else:
        with pytest.raises(ValueError):
            bridge_items(data, split="x")


@pytest.mark.parametrize("content", ["not json", '{"c_h": []}', "[1, 2]"])
def test_bad_bridge_files_are_scenario_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ScenarioError):
        ITEM_SOURCES.get("bridge")(path, {})


@pytest.mark.parametrize(
    "text",
    [
        "items: []",
        "items: [{id: a, topic: t, history: [{role: student, text: x}], error: guess}]",
        "items:\n  - {id: a, topic: t, history: [{role: tutor, text: q}, {role: tutor, text: r}], error: guess, "
        "strategy: ask_question, intention: other, reference: ok}",
        "items:\n  - {id: a, topic: t, history: [{role: tutor, text: q}, {role: student, text: r}], error: lazy, "
        "strategy: ask_question, intention: other, reference: ok}",
    ],
)
def test_bad_item_files_are_scenario_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "items.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError):
        load_mistake_items(path)


@pytest.mark.seed_data
def test_bridge_reader_on_the_public_files(seed_data: Path) -> None:
    counts = {}
    for split in ("train", "validation", "test"):
        items = ITEM_SOURCES.get("bridge")(seed_data / "remath-bridge" / f"{split}.json", {})
        counts[split] = len(items)
        assert len({i.id for i in items}) == len(items)
        assert {i.data["error"] for i in items} <= set(ERROR_TYPES)
        assert all(i.data["history"][-1]["role"] == "student" for i in items)
    assert sum(counts.values()) >= 690  # 700 records; a few lack a usable history or expert response
