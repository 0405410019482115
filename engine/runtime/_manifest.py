"""What a run's manifest says about the scenario it ran: the stored scenario and its hashes, who played each role,
what the item sources kept, and the versions — everything but the run's progress, which the runner adds."""

from __future__ import annotations

import functools
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from engine.core._events import Redactor
from engine.core._records import RECORD_VERSION
from engine.runtime._build import BuiltScenario
from engine.runtime._players import played_by
from engine.runtime._rundir import stored_hash
from engine.runtime._tutors import manifest_models

__all__ = ("describe_run", "versions")


@functools.cache
def versions() -> dict[str, str]:
    """Each lookup scans every installed distribution, and the manifest is written twice a run."""
    found = {"python": sys.version.split()[0]}
    for package in ("simrun", "openai", "httpx2", "anyio", "pydantic", "aiolimiter"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def describe_run(built: BuiltScenario, redactor: Redactor, plan_hash: str, *, custom_tutor: bool) -> dict[str, Any]:
    scenario = built.scenario
    stored = redactor.data(scenario.resolved())
    return {
        "simrun_version": versions().get("simrun", "unknown"),
        "record_version": RECORD_VERSION,
        "scenario": stored,
        "scenario_file": scenario.source,
        "items_intake": [intake.as_dict() for intake in built.intake],
        "decoding_refused": scenario.models.decoding_refused(),
        "scenario_hash": built.scenario_hash,
        "stored_scenario_hash": stored_hash(stored),
        "plan_hash": plan_hash,
        "kind": scenario.kind,
        "seed": scenario.seed,
        "models": manifest_models(scenario.models, custom_tutor=custom_tutor),
        "providers": sorted({spec.provider for _, spec in built.models}),
        "played_by": played_by(scenario.models, custom_tutor=custom_tutor),
    }
