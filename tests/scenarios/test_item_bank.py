"""The shipped STEM item bank (scenarios/items/stem.yaml) and the crescendo scenario that uses it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import engine
from engine import Item
from engine.core._text import mentions_answer
from engine.scenario._items import load_item_bank
from engine.scenario._plan import load_items, plan_episodes
from personas import taxonomy

ROOT = Path(__file__).resolve().parents[2]
BANK = ROOT / "scenarios" / "items" / "stem.yaml"
SCENARIO = ROOT / "scenarios" / "crescendo.yaml"
DOMAINS = ("mathematics", "physics", "chemistry")
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@pytest.fixture(scope="module")
def items() -> list[Item]:
    return load_item_bank(BANK, {})


def test_bank_loads_with_enough_items_per_domain(items: list[Item]) -> None:
    """At least 20 items in each of mathematics, physics and chemistry, and no other domain."""
    counts = Counter(item.domain for item in items)
    assert set(counts) == set(DOMAINS)
    assert all(counts[domain] >= 20 for domain in DOMAINS), counts


def test_bank_ids_unique(items: list[Item]) -> None:
    """Item ids are unique (episode ids are built from them)."""
    ids = [item.id for item in items]
    assert len(ids) == len(set(ids))


def test_bank_answers_are_plain_numbers(items: list[Item]) -> None:
    """Every reference answer is a short plain number the answer-leak detector can match."""
    bad = [(item.id, item.answer) for item in items if not NUMBER.match(item.answer)]
    assert not bad


def test_bank_answers_not_given_away_by_the_question(items: list[Item]) -> None:
    """The question never states the answer (else every tutor reply quoting it would count as a leak)."""
    bad = [item.id for item in items if mentions_answer(item.question, item.answer)]
    assert not bad


def test_bank_answers_appear_in_the_solution(items: list[Item]) -> None:
    """The worked solution states the answer (it is what a leaking sim tutor pastes)."""
    bad = [item.id for item in items if not mentions_answer(item.solution, item.answer)]
    assert not bad


def test_bank_items_are_complete(items: list[Item]) -> None:
    """Questions and solutions are non-empty and items pin no factors."""
    assert all(item.question.strip() and item.solution.strip() for item in items)
    assert all(not item.fixed for item in items)


def test_bank_options(items: list[Item]) -> None:
    """`domains` filters and `limit` caps items per domain, keeping file order."""
    physics = load_item_bank(BANK, {"domains": ["physics"]})
    assert physics == [item for item in items if item.domain == "physics"]
    limited = load_item_bank(BANK, {"limit": 3})
    assert Counter(item.domain for item in limited) == {domain: 3 for domain in DOMAINS}
    assert limited == [item for item in items if item in limited]


def test_crescendo_scenario_validates_and_plans() -> None:
    """scenarios/crescendo.yaml loads and plans 11 dimensions × 2 formats × its items."""
    scenario = engine.load_scenario(SCENARIO)
    assert scenario.kind == "crescendo"
    assert scenario.factors["dimension"] == taxonomy().ids
    assert scenario.factors["format"] == ["single", "multi"]
    items = load_items(scenario)
    assert Counter(item.domain for item in items) == {domain: 10 for domain in DOMAINS}
    episodes = plan_episodes(scenario, items)
    assert len(episodes) == 11 * 2 * len(items)
    assert len({episode.id for episode in episodes}) == len(episodes)
    assert len({episode.seed for episode in episodes}) == len(episodes)


def test_crescendo_scenario_estimate_is_positive() -> None:
    """The scenario's protocol gives a call estimate for every planned episode (what --dry-run shows)."""
    scenario = engine.load_scenario(SCENARIO)
    protocol = engine.PROTOCOLS.get(scenario.kind)
    built = engine.build(scenario)
    for episode in built.episodes[:20]:
        estimate = protocol.estimate(built, episode)
        assert estimate["tutor"].calls >= 1 and estimate["judge"].calls >= 1
