"""Simulator studies across a cluster: one function over many seeds, locally or as Ray tasks.

A power or null study runs the same simulated analysis under hundreds of seeds per design and effect size:
CPU-bound, independent, small results. `fan_out` sends chunks of the arguments to Ray tasks (one CPU each) and
returns the results in argument order, so a study's figures are the same on one core or a hundred.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

__all__ = ("fan_out",)

A = TypeVar("A")
R = TypeVar("R")
CHUNKS_PER_CPU = 4
"""Chunks per worker CPU: few enough that each task outweighs Ray's cost of a task, enough to even out speeds."""


def _apply(function: Callable[[A], R], chunk: list[A]) -> list[R]:
    return [function(argument) for argument in chunk]


def fan_out(
    function: Callable[[A], R],
    arguments: Iterable[A],
    *,
    executor: Literal["local", "ray"] = "local",
    address: str | None = None,
    workers: int | None = None,
) -> list[R]:
    """`[function(a) for a in arguments]`, on Ray tasks with `executor="ray"` (a cluster at `address`, or a local
    one; `workers` CPUs at most, default the cluster's). `function` and its results must pickle
    (module-level functions and `functools.partial` of them do)."""
    items = list(arguments)
    if executor == "local" or not items:
        return _apply(function, items)
    from engine.runtime._ray import connect, require_ray

    ray = require_ray()
    connect(address)
    cpus = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = max(1, math.ceil(len(items) / (cpus * CHUNKS_PER_CPU)))
    task = ray.remote(num_cpus=1)(_apply)
    shared = ray.put(function)
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    done: list[list[R]] = [[] for _ in chunks]
    in_flight: dict[object, int] = {}
    queued = iter(range(len(chunks)))
    for index in queued:  # at most `cpus` tasks at once: `workers` bounds what the study takes of a cluster
        in_flight[task.remote(shared, chunks[index])] = index
        while len(in_flight) >= cpus or (index == len(chunks) - 1 and in_flight):
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                done[in_flight.pop(ref)] = ray.get(ref)
    return [result for chunk in done for result in chunk]
