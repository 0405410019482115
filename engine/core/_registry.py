"""Name → plug-in registries, so a scenario can name a provider, agent or judge without the engine importing it.

Built-ins and third-party packages register the same way: a module listed under the `simrun.plugins`
entry-point group is imported the first time any registry is asked for a name, and registers its
plug-ins with the decorators below. Names of third-party plug-ins should be `package/name`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from engine.core._errors import UnknownPluginError

__all__ = ("PLUGIN_GROUP", "NoOptions", "Registry", "load_plugins", "options_model")

PLUGIN_GROUP = "simrun.plugins"
T = TypeVar("T")

_loaded = False
_load_lock = threading.Lock()


def load_plugins() -> None:
    """Import every module registered under the `simrun.plugins` entry-point group, once."""
    global _loaded
    if _loaded:  # the sim asks on every reply: no lock once loaded
        return
    with _load_lock:
        if _loaded:
            return
        _loaded = True
        for entry in entry_points(group=PLUGIN_GROUP):
            entry.load()


class Registry(Generic[T]):
    """A named collection of plug-ins of one kind; registering a name twice is an error, not an override."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
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

    def get(self, name: str) -> T:
        load_plugins()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownPluginError(self.kind, name, self._items) from None

    def names(self) -> list[str]:
        load_plugins()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        load_plugins()
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._items

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
