"""Plug-ins load by name: each entry point says which module registers which name, and a lookup imports only it.

The declarations live in pyproject.toml (one `simrun.<group>` entry-point group per registry), so a name a
module registers but no entry declares would be found only after something loaded everything: the first
test keeps the two in step. The others check, in fresh processes, what a lookup imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import engine
from engine.core._registry import PLUGIN_GROUP, load_plugins
from engine.runtime._modes import RUN_MODES
from tests.test_engine_names_no_kind import REGISTRIES

ROOT = Path(__file__).resolve().parents[3]
GROUPS = tuple(registry.group for registry in (*REGISTRIES, engine.PROVIDERS, RUN_MODES))


_WHO_REGISTERS = """
import json, sys
from engine.core._registry import Registry, load_plugins
from engine.models.sim import _tasks as _sim_tasks
found = []
add = Registry.add
def spy(self, name, plugin):
    frame = sys._getframe(1)
    while frame.f_globals["__name__"] == "engine.core._registry":
        frame = frame.f_back
    found.append([self.group, name, frame.f_globals["__name__"]])
    add(self, name, plugin)
Registry.add = spy
load_plugins()
sim = sorted({entry.handler.__module__ for entry in _sim_tasks.SIM_TASKS.values()})
print(json.dumps({"registered": found, "sim": sim}))
"""


def test_every_registered_name_is_declared_by_the_module_that_registers_it() -> None:
    """Each (group, name) a module registers while the plug-ins load is its entry point, and the reverse."""
    done = subprocess.run([sys.executable, "-c", _WHO_REGISTERS], check=True, cwd=ROOT, capture_output=True, text=True)
    found = json.loads(done.stdout)
    declared = {(e.group, e.name): e.value for group in GROUPS for e in entry_points(group=group)}
    registered = {
        (group, name): module
        for group, name, module in found["registered"]
        if (group, name) in declared or not module.startswith("engine.")  # the engine's own: `bank`, `sim`, ...
    }
    assert registered == declared
    assert set(found["sim"]) <= {e.value for e in entry_points(group="simrun.sim")}
    assert list(entry_points(group=PLUGIN_GROUP)) == []  # the shipped packages declare every name


def _modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT, capture_output=True, text=True)
    return set(done.stdout.split())


def _plugin_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ("agents", "judges", "personas") and "." in m}


def test_a_lookup_imports_only_the_module_that_declares_the_name() -> None:
    loaded = _modules_after("import engine; engine.PROTOCOLS.get('crescendo'); engine.JUDGES.get('harm')")
    assert _plugin_modules(loaded) <= {
        "agents.crescendo",
        "agents.students",
        "personas.safetutors",
        "judges.harm",
        "judges.llm",
        "judges.votes",
    }, _plugin_modules(loaded)
    assert {"agents.crescendo", "judges.harm"} <= loaded


@pytest.mark.parametrize(
    "code",
    [
        "import engine; print(engine.JUDGES.names())",
        "import engine\ntry:\n    engine.JUDGES.get('no_such_judge')\nexcept engine.ScenarioError as e:\n    print(e)",
    ],
)
def test_a_listing_or_an_unknown_name_loads_every_plugin(code: str) -> None:
    loaded = _modules_after(code)
    declared = {
        e.value for group in ("simrun.protocols", "simrun.judges", "simrun.sim") for e in entry_points(group=group)
    }
    assert declared <= loaded


def test_an_unknown_name_lists_every_registered_name() -> None:
    load_plugins()
    with pytest.raises(engine.ScenarioError) as caught:
        engine.PROTOCOLS.get("no_such_kind")
    for name in ("crescendo", "fairness", "cases", "remediation"):
        assert repr(name) in str(caught.value) or name in str(caught.value)
