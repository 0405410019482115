"""Item files in the user's data directory: `path: data:safetutors/x.jsonl` names a public dataset simrun does not ship.

A shipped scenario cannot know where a user keeps a downloaded dataset, so it names the file relative to a data
directory the user chooses: `--data-dir DIR` (which sets the scenario's `data_dir`), the scenario's own `data_dir`
(relative to the scenario), or the `SIMRUN_DATA` environment variable. When the file is not there, the error says
which dataset it is and where to get it, from the item source's `dataset` attribute (e.g. "SafeTutors,
https://github.com/RadiantCrystal/SafeTutors"), so a user is never left with a bare "no such file".
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.core._errors import ScenarioError
from engine.scenario._items import ITEM_SOURCES
from engine.scenario._spec import ItemSourceSpec, Scenario

__all__ = ("DATA_ENV", "DATA_PREFIX", "data_dir", "item_path")

DATA_PREFIX = "data:"
DATA_ENV = "SIMRUN_DATA"


def data_dir(scenario: Scenario) -> Path | None:
    """The data directory: the scenario's `data_dir` (set by `--data-dir` too), else $SIMRUN_DATA, else none."""
    if scenario.data_dir:
        return scenario.base_dir / Path(scenario.data_dir).expanduser()
    named = os.environ.get(DATA_ENV, "").strip()
    return Path(named).expanduser().resolve() if named else None


def _dataset(source: str) -> str | None:
    if source not in ITEM_SOURCES:
        return None
    about = getattr(ITEM_SOURCES.get(source), "dataset", None)
    return about if isinstance(about, str) else None


def item_path(scenario: Scenario, source: ItemSourceSpec) -> Path:
    """The file an item source reads: relative to the scenario, or (`data:...`) to the data directory."""
    if not source.path.startswith(DATA_PREFIX):
        return scenario.base_dir / source.path
    relative = source.path.removeprefix(DATA_PREFIX).lstrip("/")
    if not relative or ".." in Path(relative).parts:
        raise ScenarioError(f"{source.path!r}: expected data:FOLDER/FILE inside the data directory")
    root = data_dir(scenario)
    if root is not None and (root / relative).exists():
        return root / relative
    about = _dataset(source.source)
    what = f"the {about} dataset" if about else f"a public dataset read by the {source.source!r} item source"
    where = (
        f"{root / relative} does not exist (data directory {root})"
        if root is not None
        else f"no data directory is set for {source.path!r}"
    )
    folder = Path(relative).parent.as_posix()
    raise ScenarioError(
        f"{where}. This scenario reads {what}, which simrun does not ship: download its files into DIR/{folder}/ "
        f"(so that DIR/{relative} exists), then name DIR with --data-dir DIR, the environment variable {DATA_ENV}=DIR, "
        "or the scenario's data_dir."
    )
