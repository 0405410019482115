"""Name → plug-in registries, so a scenario can name a provider, agent or judge without the engine importing it.

Built-ins and third-party packages register the same way, from modules named by entry points, with the
decorators below. A registry of group `g` looks a name up in the entry-point group `simrun.g` (for example
`simrun.protocols`), where each entry's name is a plug-in name and its value the module that registers it: the
first lookup of that name imports that module alone, so a run imports only the plug-ins its scenario names.
Modules listed under `simrun.plugins` instead are imported whole on the first lookup of a name no module
declares (and by `simrun list`). Names of third-party plug-ins should be `package/name`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from engine.core._errors import UnknownPluginError

__all__ = ("PLUGIN_GROUP", "NoOptions", "Registry", "load_plugins", "options_model")

PLUGIN_GROUP = "simrun.plugins"
"""Modules imported whole, on the first lookup of a name that no `simrun.<group>` entry declares."""
T = TypeVar("T")

_imported: set[str] = set()
_loaded_groups: set[str | None] = set()
_load_lock = threading.RLock()  # re-entrant: a plug-in module may look a name up while it is imported


@functools.cache
def _declared() -> tuple[EntryPoint, ...]:
    """Every `simrun.*` entry point of the environment, read once per process (plug-ins load once too)."""
    found = entry_points()
    return tuple(e for group in sorted(found.groups) if group.startswith("simrun.") for e in found.select(group=group))


def _import(entries: Iterator[EntryPoint] | tuple[EntryPoint, ...]) -> None:
    with _load_lock:
        for entry in entries:
            if entry.value not in _imported:
                _imported.add(entry.value)
                entry.load()


def load_plugins(group: str | None = None) -> None:
    """Import the modules of `simrun.<group>` and the whole ones of `simrun.plugins`; no group: every module.

    Each module is imported once per process; the sim asks on every reply, so a loaded group takes no lock.
    """
    if group in _loaded_groups or None in _loaded_groups:
        return
    with _load_lock:
        wanted = {PLUGIN_GROUP, f"simrun.{group}"}
        _import(tuple(e for e in _declared() if group is None or e.group in wanted))
        _loaded_groups.add(group)


class Registry(Generic[T]):
    """A named collection of plug-ins of one kind; registering a name twice is an error, not an override.

    `group` names the entry-point group `simrun.<group>` whose entries say which module registers which name.
    """

    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        self.group = f"simrun.{group}"
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(plugin: T) -> T:
            self.add(name, plugin)
            return plugin

        return add

    def add(self, name: str, plugin: T) -> None:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = plugin

    def _find(self, name: str) -> T | None:
        """The plug-in, importing the module that declares `name`, or every whole module if none does."""
        if name not in self._items:  # the sim asks on every reply: no lock once registered
            declared = tuple(e for e in _declared() if e.group == self.group and e.name == name)
            _import(declared)
            if not declared:
                _import(tuple(e for e in _declared() if e.group == PLUGIN_GROUP))
        return self._items.get(name)

    def get(self, name: str) -> T:
        plugin = self._find(name)
        if plugin is None:
            load_plugins()  # the error lists every name there is
            raise UnknownPluginError(self.kind, name, self._items)
        return plugin

    def names(self) -> list[str]:
        load_plugins()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        load_plugins()
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    @contextmanager
    def temporarily(self, name: str, plugin: T) -> Iterator[None]:
        """Register `plugin` for the duration of a block (tests and embedding tools)."""
        load_plugins()
        self.add(name, plugin)
        try:
            yield
        finally:
            del self._items[name]


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def options_model(plugin: object) -> type[BaseModel]:
    """The pydantic model a plug-in's options are validated with (its `Options` attribute, or none)."""
    model = getattr(plugin, "Options", NoOptions)
    assert isinstance(model, type) and issubclass(model, BaseModel), f"{plugin!r}.Options must be a BaseModel"
    return model
