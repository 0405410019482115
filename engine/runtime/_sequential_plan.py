"""Planning a sequential run before it spends: the expected share of its plan under effects the user names.

Each question's item values are drawn as Bernoulli at the named mean (a rate, or 1/2 + difference / (2 × the
width of `bounds`) for a paired question): for a given mean, that is the largest variance a bounded value can
have, so the expected spend errs on the costly side. Questions not named sit at their null (the threshold, or
no difference), where they settle only through futility. Seeded: the same plan prints the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.core._errors import ScenarioError
from engine.core._lazy import lazy_module
from engine.runtime._sequential import hypothesis
from engine.scenario._stopping import QuestionSpec, StoppingSpec
from engine.stats._sequential import e_bh, sequential_path

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

__all__ = ("SpendForecast", "forecast_spend", "parse_effects")


@dataclass(frozen=True)
class SpendForecast:
    expected_share: float
    """Mean share of the plan's items played before the stop."""
    power: dict[str, float]
    """Share of simulated runs in which each question is a finding at the stop."""


def parse_effects(pairs: tuple[str, ...], stopping: StoppingSpec) -> dict[str, float]:
    names = {q.name for q in stopping.questions}
    found: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in names:
            raise ScenarioError(f"--effect {pair!r}: expected QUESTION=VALUE with a question of design.stopping "
                                f"({', '.join(sorted(names))})")  # fmt: skip
        try:
            found[name] = float(value)
        except ValueError:
            raise ScenarioError(f"--effect {pair!r}: {value!r} is not a number") from None
    return found


def _mean(q: QuestionSpec, effect: float | None) -> float:
    h = hypothesis(q)
    if effect is None:
        return h.null
    low, high = q.bounds
    mean = (effect / (high - low) + 1) / 2 if q.paired is not None else (effect - low) / (high - low)
    if not 0.0 <= mean <= 1.0:
        raise ScenarioError(f"--effect {q.name}={effect}: outside the question's bounds {list(q.bounds)}")
    return mean


def forecast_spend(stopping: StoppingSpec, items: int, effects: Mapping[str, float], seeds: int = 200) -> SpendForecast:
    questions = stopping.questions
    means = [_mean(q, effects.get(q.name)) for q in questions]
    looks = list(range(stopping.look_every, items, stopping.look_every)) + [items]
    hypotheses = [hypothesis(q) for q in questions]
    rng = np.random.default_rng(31)
    spent, found = [], np.zeros(len(questions))
    for _ in range(seeds):
        values = [rng.binomial(1, mean, items).astype(np.float64) for mean in means]
        path = sequential_path(values, [[n] * len(questions) for n in looks], looks, hypotheses, stopping.alpha)
        stop = next((k for k, look in enumerate(path) if look.all_settled), len(path) - 1)
        spent.append(path[stop].items / items)
        found += e_bh([q.e_value for q in path[stop].questions], stopping.alpha)
    return SpendForecast(
        float(np.mean(spent)), {q.name: float(f / seeds) for q, f in zip(questions, found, strict=True)}
    )
