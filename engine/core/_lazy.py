"""Modules imported on first use: statistics and text-metric libraries cost seconds at start-up, and most
commands (`--help`, `validate`, a run until its summary) never touch them.

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = lazy_module("numpy")

mypy sees the real module; at run time `np` imports numpy the first time an attribute is read, then keeps
each attribute it has handed out, so a hot loop pays for the indirection once per name.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ("lazy_module",)


class _LazyModule(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # introspection (copy, pickle, doctest) must not trigger the import
            raise AttributeError(name)
        value = getattr(importlib.import_module(self.__name__), name)
        setattr(self, name, value)
        return value


def lazy_module(name: str) -> ModuleType:
    """A stand-in for `import name` that imports it on first attribute access."""
    return _LazyModule(name)
