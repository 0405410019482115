"""Persona and risk definitions as data, with their loaders (SafeTutors taxonomy, demographic fairness personas).

Each name loads its module on first use (typed in `__init__.pyi`): a run imports only the plug-ins its
scenario names, through the entry points in pyproject.toml.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
