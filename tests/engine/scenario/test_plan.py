"""Planning: items × conditions × replicates, stable ids and seeds, pinned factors, limits."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Item, ScenarioError, derive_seed
from engine.scenario._plan import plan_episodes
from tests.helpers import make_scenario


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plan")


def _items(n: int) -> list[Item]:
    return [Item(id=f"i{k}", domain="mathematics", question=f"q{k}", answer=str(k)) for k in range(n)]


@given(
    items=st.integers(1, 5),
    levels=st.lists(st.integers(1, 4), min_size=0, max_size=3),
    replicates=st.integers(1, 3),
    seed=st.integers(0, 2**32),
)
def test_plan_size_ids_and_seeds(plan_dir: Path, items: int, levels: list[int], replicates: int, seed: int) -> None:
    """The plan is the full cross product; ids are unique; seeds derive from the run seed and the id only."""
    factors = {f"f{i}": [f"l{j}" for j in range(n)] for i, n in enumerate(levels)}
    scenario = make_scenario(plan_dir, factors=factors, replicates=replicates, seed=seed)
    episodes = plan_episodes(scenario, _items(items))
    assert len(episodes) == items * math.prod(levels) * replicates
    assert len({e.id for e in episodes}) == len(episodes)
    assert all(e.seed == derive_seed(seed, e.id) for e in episodes)
    again = plan_episodes(scenario, _items(items))
    assert [e.id for e in again] == [e.id for e in episodes]


def test_pinned_factors_and_limit(tmp_path: Path) -> None:
    """An item pinned to a level only meets conditions with that level; `limit` keeps a stable prefix."""
    scenario = make_scenario(tmp_path, factors={"dimension": ["cognitive", "epistemic"], "format": ["single", "multi"]})
    pinned = Item(id="p", domain="physics", question="q", answer="1", fixed={"format": "multi", "extra": "x"})
    episodes = plan_episodes(scenario, [pinned])
    assert sorted(e.condition["dimension"] for e in episodes) == ["cognitive", "epistemic"]
    assert all(e.condition["format"] == "multi" and e.condition["extra"] == "x" for e in episodes)
    limited = plan_episodes(make_scenario(tmp_path, limit=3), _items(4))
    full = plan_episodes(make_scenario(tmp_path), _items(4))
    assert len(limited) == 3 and {e.id for e in limited} <= {e.id for e in full}


def test_duplicate_item_ids_are_a_scenario_error(tmp_path: Path) -> None:
    """Two items with one id would make two episodes with one id: refused."""
    scenario = make_scenario(tmp_path)
    try:
        plan_episodes(scenario, [*_items(1), *_items(1)])
    except ScenarioError as exc:
        assert "duplicate episode id" in str(exc)
    else:
        raise AssertionError("duplicate ids were accepted")


def test_episode_sub_seeds_differ_by_part() -> None:
    """Sub-seeds for different calls of one episode differ and are reproducible."""
    assert derive_seed(1, "a", 0) == derive_seed(1, "a", 0) != derive_seed(1, "a", 1)
