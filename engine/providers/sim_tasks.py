"""Extension point of the `sim` provider: behaviours for tasks beyond the core ones, one module per scenario kind.

A handler answers one `(role, task)` pair — for example `("judge", "case_checklist")` — and returns the reply
text (a judge returns its JSON). It receives a seeded `random.Random` derived from the request, so its reply
is a pure function of the request, and the request's own knobs (`SimTutorParams`, `SimStudentParams` or
`SimJudgeParams`). Handlers register with `@sim_task(role, task)` in a module of this package that `sim.py`
imports; each such module documents the behaviour it simulates.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .base import ChatRequest

__all__ = ("SIM_TASKS", "SimTaskHandler", "sim_task")

SimTaskHandler = Callable[[ChatRequest, random.Random, Any], str]
SIM_TASKS: dict[tuple[str, str], SimTaskHandler] = {}


def sim_task(role: str, task: str) -> Callable[[SimTaskHandler], SimTaskHandler]:
    """Register `handler` as the sim's behaviour for `task` when it plays `role`."""

    def register(handler: SimTaskHandler) -> SimTaskHandler:
        if (role, task) in SIM_TASKS:
            raise ValueError(f"sim task {role}/{task} is registered twice")
        SIM_TASKS[(role, task)] = handler
        return handler

    return register
