"""Extension point of the `sim` provider: behaviours, knobs and judge rubrics that scenario kinds plug in.

The sim itself knows no scenario kind. A kind's plug-in package registers, in its own modules (listed under the
`simrun.sim` entry-point group, or whole under `simrun.plugins`; the sim imports them all on its first lookup):

* a **behaviour** for one `(role, task)` pair with `@sim_task(role, task)` — for example `("judge",
  "case_checklist")`. The handler returns the reply text (a judge returns its JSON). It receives a seeded
  `random.Random` derived from the request (from `salt`, `role:task` unless given), so its reply is a pure
  function of the request, and the request's own knobs;
* **knobs** with `@sim_knobs(role)`: a pydantic model whose fields join the role's `params` (validated with
  the core knobs, `extra` still forbidden), so a kind's knobs live with the behaviour that reads them;
* for a judge, how a request over HTTP (`simrun serve`, which carries no engine-side context) names the
  rubric: the task itself is the rubric id (`response_format.json_schema.name`), and `markers` are JSON keys
  only that rubric's prompt names, for clients that send no schema name. `default=True` marks the rubric a
  judge answers when a request names none.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, create_model

from engine.core._registry import load_plugins
from engine.models._provider import ChatRequest

__all__ = (
    "SIM_TASKS",
    "SimTask",
    "SimTaskHandler",
    "default_task",
    "knobs_model",
    "sim_knobs",
    "sim_task",
    "task_for_request",
)

SimTaskHandler = Callable[[ChatRequest, random.Random, Any], str]
M = TypeVar("M", bound=type[BaseModel])


@dataclass(frozen=True)
class SimTask:
    handler: SimTaskHandler
    salt: str
    markers: tuple[str, ...] = ()
    default: bool = False


SIM_TASKS: dict[tuple[str, str], SimTask] = {}
_KNOBS: dict[str, list[type[BaseModel]]] = {}


def sim_task(
    role: str, task: str, *, salt: str | None = None, markers: Iterable[str] = (), default: bool = False
) -> Callable[[SimTaskHandler], SimTaskHandler]:
    """Register `handler` as the sim's behaviour for `task` when it plays `role`."""

    def register(handler: SimTaskHandler) -> SimTaskHandler:
        if (role, task) in SIM_TASKS:
            raise ValueError(f"sim task {role}/{task} is registered twice")
        if default and default_task(role, load=False) is not None:
            raise ValueError(f"sim role {role} already has a default task")
        SIM_TASKS[(role, task)] = SimTask(handler, salt or f"{role}:{task}", tuple(markers), default)
        return handler

    return register


def sim_knobs(role: str) -> Callable[[M], M]:
    """Add the fields of a pydantic model to the knobs (`params`) of the sim's `role`."""

    def register(model: M) -> M:
        _KNOBS.setdefault(role, []).append(model)
        knobs_model.cache_clear()
        return model

    return register


@functools.cache
def knobs_model(role: str, core: type[BaseModel]) -> type[BaseModel]:
    """`core` with every registered knob model of `role` mixed in (the model `params` are validated with)."""
    load_plugins("sim")
    extra = tuple(_KNOBS.get(role, ()))
    if not extra:
        return core
    model: type[BaseModel] = create_model(core.__name__, __base__=(*reversed(extra), core), __module__=core.__module__)
    model.__doc__ = core.__doc__
    return model


def lookup(role: str, task: str) -> SimTask | None:
    load_plugins("sim")
    return SIM_TASKS.get((role, task))


def default_task(role: str, *, load: bool = True) -> str | None:
    if load:
        load_plugins("sim")
    return next((task for (r, task), entry in SIM_TASKS.items() if r == role and entry.default), None)


def task_for_request(role: str, schema_name: str | None, prompt: str) -> str | None:
    """The registered task an HTTP request asks for: its schema name, else the first rubric its prompt marks."""
    load_plugins("sim")
    if schema_name and (role, schema_name) in SIM_TASKS:
        return schema_name
    for (r, task), entry in SIM_TASKS.items():
        if r == role and any(marker in prompt for marker in entry.markers):
            return task
    return default_task(role)
