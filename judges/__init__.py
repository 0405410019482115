"""Everything that scores: LLM rubric judges, deterministic detectors, vote combiners, summarisers.

Each name loads its module on first use (typed in `__init__.pyi`): a run imports only the plug-ins its
scenario names, through the entry points in pyproject.toml.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
