"""Plan: items × conditions × replicates → episodes, each with a stable id and its own seed."""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass, field

from .errors import ScenarioError
from .items import ITEM_SOURCES, Item
from .spec import Scenario

__all__ = ("Episode", "derive_seed", "load_items", "plan_episodes")


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts; the same parts always give the same seed, on any machine."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True)
class Episode:
    id: str
    item: Item
    condition: dict[str, str] = field(hash=False)
    replicate: int
    seed: int

    def seed_for(self, *parts: object) -> int:
        """A sub-seed for one call of this episode, so concurrent calls never share a random stream."""
        return derive_seed(self.seed, *parts)


def load_items(scenario: Scenario) -> list[Item]:
    items: list[Item] = []
    for source in scenario.items:
        loader = ITEM_SOURCES.get(source.source)
        items.extend(loader(scenario.base_dir / source.path, source.options))
    return items


def _episode_id(item: Item, condition: dict[str, str], replicate: int) -> str:
    levels = ",".join(f"{factor}={level}" for factor, level in condition.items())
    return f"{item.id}|{levels}|r{replicate}"


def plan_episodes(scenario: Scenario, items: list[Item]) -> list[Episode]:
    """Every item under every condition consistent with its pinned factors, `replicates` times.

    Returned in a shuffled order (seeded by the run seed) so that no condition systematically runs first;
    `limit` keeps the first N of the unshuffled plan, so a limited run is a stable subset.
    """
    factors = list(scenario.factors.items())
    names = [name for name, _ in factors]
    episodes: list[Episode] = []
    seen: set[str] = set()
    for item in items:
        for levels in itertools.product(*(values for _, values in factors)):
            condition = dict(zip(names, levels, strict=True))
            if any(condition.get(f, level) != level for f, level in item.fixed.items()):
                continue
            condition.update({f: level for f, level in item.fixed.items() if f not in condition})
            for replicate in range(scenario.replicates):
                episode_id = _episode_id(item, condition, replicate)
                if episode_id in seen:
                    raise ScenarioError(f"duplicate episode id {episode_id!r}: item ids must be unique")
                seen.add(episode_id)
                seed = derive_seed(scenario.seed, episode_id)
                episodes.append(Episode(episode_id, item, condition, replicate, seed))
    if scenario.limit is not None:
        episodes = episodes[: scenario.limit]
    random.Random(scenario.seed).shuffle(episodes)
    return episodes
