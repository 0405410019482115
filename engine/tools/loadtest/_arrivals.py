"""Arrival schedules as offsets from a shared start, so sends never drift and every worker agrees on them.

Offsets are cumulative (`start + i / rate`, or a running sum of exponential gaps for Poisson), which is what
GuideLLM and vLLM do: sleeping *until* each deadline keeps the achieved rate on target where sleeping *for*
each gap would accumulate timer lateness.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = ("arrival_offsets", "think_times")


def arrival_offsets(kind: str, rate: float, *, seed: int, until_s: float | None = None) -> Iterator[float]:
    """Seconds after the start at which conversation 0, 1, 2, ... arrives; ends before `until_s` if given."""
    rng = random.Random(f"arrivals:{seed}")
    index, offset = 0, 0.0
    while True:
        if kind == "constant":
            offset = index / rate
        elif index:
            offset += rng.expovariate(rate)
        if until_s is not None and offset >= until_s:
            return
        yield offset
        index += 1


def think_times(kind: str, mean_s: float, *, seed: int, conversation: int) -> Iterator[float]:
    """The pauses of one conversation, drawn from its own stream so workers and schedules do not interact."""
    rng = random.Random(f"think:{seed}:{conversation}")
    while True:
        yield rng.expovariate(1 / mean_s) if kind == "exponential" and mean_s > 0 else mean_s
