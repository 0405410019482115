"""Plan: items × conditions × replicates → episodes, each with a stable id and its own seed."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engine.core._errors import ScenarioError
from engine.core._inputs import check_input_path
from engine.core._registry import Registry, options_model
from engine.core._seeds import derive_seed
from engine.scenario._data import item_path
from engine.scenario._intake import Intake, intake_of
from engine.scenario._items import ITEM_SOURCES, Item
from engine.scenario._spec import Scenario

__all__ = (
    "DESIGNS",
    "Design",
    "Episode",
    "TutorFreeConditions",
    "load_counted_items",
    "interleave_tutors",
    "load_items",
    "make_design",
    "plan_designed",
    "plan_episodes",
)


@dataclass(frozen=True)
class Episode:
    id: str
    item: Item
    condition: dict[str, str] = field(hash=False)
    replicate: int
    seed: int
    extras: dict[str, Any] = field(default_factory=dict, hash=False)
    """What the design tells this episode about its condition (e.g. the cue sentence); JSON-safe."""
    tutor: str | None = None
    """The tutor's label in a study of several tutors (see `ModelsSpec.tutor_labels`), else None."""

    def seed_for(self, *parts: object) -> int:
        """A sub-seed for one call of this episode, so concurrent calls never share a random stream.

        Only the tutor's own calls (`seed_for("tutor", ...)`) depend on the tutor's label: the student, the
        judges and the design see the same randomness whichever tutor plays, so two tutors meet the same
        student wherever their dialogues agree so far."""
        if self.tutor is not None and parts and parts[0] == "tutor":
            return derive_seed(self.seed, *parts, self.tutor)
        return derive_seed(self.seed, *parts)


class Design(Protocol):
    """Generates conditions that are not a plain cross product, and each episode's view of its own condition."""

    @property
    def paired_factors(self) -> tuple[str, ...]:
        """Factors that vary *within* a pair: they leave the episode seed unchanged, so paired episodes share
        the student's seed and turn budget and differ only in what these factors change (the cue)."""
        ...

    @property
    def min_items(self) -> int: ...

    def conditions(self) -> list[dict[str, str]]: ...

    def extras(self, episode: Episode, /) -> dict[str, Any]: ...


@runtime_checkable
class TutorFreeConditions(Protocol):
    """A design some of whose conditions involve no tutor (ReMath's `human`: the expert's reply replayed).

    In a study of several tutors such a unit is planned once, not once per tutor: its judge calls and its rows
    would otherwise repeat for every tutor. The design says which; the engine knows no condition by name."""

    def tutor_free(self, condition: dict[str, str], /) -> bool: ...


DESIGNS: Registry[Callable[[Any], Design]] = Registry("design", "designs")


def make_design(scenario: Scenario) -> Design | None:
    if scenario.design is None or scenario.design.name is None:
        return None
    factory = DESIGNS.get(scenario.design.name)
    return factory(options_model(factory).model_validate(scenario.design.options))


def load_items(scenario: Scenario) -> list[Item]:
    return load_counted_items(scenario)[0]


def load_counted_items(scenario: Scenario) -> tuple[list[Item], list[Intake]]:
    """The scenario's items, and per source what it read, kept and skipped (see `engine.scenario._intake`)."""
    items: list[Item] = []
    intakes: list[Intake] = []
    for source in scenario.items:
        loader = ITEM_SOURCES.get(source.source)
        path = item_path(scenario, source)
        check_input_path(path, "item file", allow_dir=True)
        found = loader(path, source.options)
        intakes.append(intake_of(found, source.source, source.path))
        items.extend(found)
    if not items:
        raise ScenarioError("the item sources gave no items: check their paths, `domains` and `limit`")
    return items, intakes


def _episode_id(item: Item, condition: dict[str, str], replicate: int) -> str:
    levels = ",".join(f"{factor}={level}" for factor, level in condition.items())
    return f"{item.id}|{levels}|r{replicate}"


def plan_episodes(scenario: Scenario, items: list[Item]) -> list[Episode]:
    """Every item under every condition consistent with its pinned factors, `replicates` times (and, in a study
    of several tutors, once per tutor: see `interleave_tutors`).

    Returned in a shuffled order (seeded by the run seed) so that no condition systematically runs first;
    `limit` keeps the first N of the unshuffled plan, so a limited run is a stable subset (with several tutors,
    N units, each played by every tutor).
    """
    return plan_designed(scenario, items, make_design(scenario))


def plan_designed(scenario: Scenario, items: list[Item], design: Design | None) -> list[Episode]:
    """`plan_episodes` with the scenario's design already built (see `engine.runtime._build`)."""
    if design is not None and len(items) < design.min_items:
        raise ScenarioError(
            f"the design needs at least {design.min_items} items for its paired statistics and the scenario "
            f"has {len(items)}: add items (or raise the item source's `limit`)"
        )
    factors = list(scenario.factors.items())
    names = [name for name, _ in factors]
    designed = design.conditions() if design is not None else [{}]
    pairs = len(items) * len(designed) * math.prod(len(levels) for _, levels in factors)
    if pairs > scenario.max_episodes * _WORK_PER_EPISODE:
        raise ScenarioError(_too_big(pairs * scenario.replicates, scenario.max_episodes))
    crossed = [dict(zip(names, levels, strict=True)) for levels in itertools.product(*(v for _, v in factors))]
    conditions = [{**d, **c} for d in designed for c in crossed]
    tutors = scenario.models.tutor_labels
    shared = design.tutor_free if isinstance(design, TutorFreeConditions) and tutors and len(tutors) > 1 else None
    free = [c for c in conditions if shared is not None and shared(c)]
    played = [c for c in conditions if c not in free]
    per_unit = len(tutors) if tutors else 1
    planned = (_plan_size(items, played) * per_unit + _plan_size(items, free)) * scenario.replicates
    if planned > scenario.max_episodes and (scenario.limit is None or scenario.limit > scenario.max_episodes):
        raise ScenarioError(_too_big(planned, scenario.max_episodes))
    episodes = list(itertools.islice(_episodes(scenario, design, items, conditions), scenario.limit))
    if not episodes:
        raise ScenarioError(
            "the plan has no episodes: no item is compatible with any condition (check the items' fixed "
            "factors against `factors` and the design)"
        )
    random.Random(scenario.seed).shuffle(episodes)
    return episodes if tutors is None else interleave_tutors(episodes, tutors, tutor_free=shared)


def interleave_tutors(
    episodes: list[Episode],
    labels: tuple[str, ...],
    *,
    tutor_free: Callable[[dict[str, str]], bool] | None = None,
) -> list[Episode]:
    """Every episode once per tutor, the tutors of one unit (item, condition, replicate) next to each other.

    The plan's order is the runner's admission order, so a run stopped at any point (a budget, a breaker,
    Ctrl-C) has admitted every tutor within one unit of the others: its data stay balanced and paired. The
    tutor that goes first rotates from unit to unit. Ids gain `|tutor=LABEL`; seeds do not change. A unit whose
    condition is `tutor_free` (see `TutorFreeConditions`) is played once, with no tutor and its id unchanged.
    """
    played: list[Episode] = []
    for position, episode in enumerate(episodes):
        if tutor_free is not None and tutor_free(episode.condition):
            played.append(episode)
            continue
        for turn in range(len(labels)):
            label = labels[(position + turn) % len(labels)]
            played.append(dataclasses.replace(episode, id=f"{episode.id}|tutor={label}", tutor=label))
    return played


def _plan_size(items: list[Item], conditions: list[dict[str, str]]) -> int:
    """Episodes per replicate, counted once per distinct set of pinned factors rather than per item."""
    pinned: dict[frozenset[tuple[str, str]], int] = {}
    for item in items:
        key = frozenset(item.fixed.items())
        pinned[key] = pinned.get(key, 0) + 1
    return sum(
        count * sum(all(c.get(f, level) == level for f, level in key) for c in conditions)
        for key, count in pinned.items()
    )


_WORK_PER_EPISODE = 20
"""Item × condition pairs examined per allowed episode before a plan is refused as too big to enumerate."""


def _too_big(size: int, cap: int) -> str:
    return (
        f"the plan has {size:,} episodes, over the limit of {cap:,}: lower `replicates` or the factors, "
        f"use --limit, or raise the limit on purpose with --max-episodes N (`max_episodes` in the scenario)"
    )


def _episodes(
    scenario: Scenario, design: Design | None, items: list[Item], conditions: list[dict[str, str]]
) -> Iterator[Episode]:
    """The plan in its unshuffled order, lazily, so a cap or a limit stops it early."""
    paired = set(design.paired_factors) if design is not None else set()
    seen: set[str] = set()
    for item in items:
        for base in conditions:
            condition = dict(base)
            if any(condition.get(f, level) != level for f, level in item.fixed.items()):
                continue
            condition.update({f: level for f, level in item.fixed.items() if f not in condition})
            for replicate in range(scenario.replicates):
                episode_id = _episode_id(item, condition, replicate)
                if episode_id in seen:
                    raise ScenarioError(f"duplicate episode id {episode_id!r}: item ids must be unique")
                seen.add(episode_id)
                pair = {f: level for f, level in condition.items() if f not in paired}
                seed = derive_seed(scenario.seed, _episode_id(item, pair, replicate))
                episode = Episode(episode_id, item, condition, replicate, seed)
                if design is not None:
                    episode = dataclasses.replace(episode, extras=design.extras(episode))
                yield episode
