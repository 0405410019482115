"""Item files in the user's data directory: `path: data:safetutors/x.jsonl` names a public dataset simrun does not ship.

A file simrun does ship is named by its package instead (`path: package:personas/cases.yaml`), so a scenario
reads it from an installed wheel as from a clone, wherever the scenario file sits.

A shipped scenario cannot know where a user keeps a downloaded dataset, so it names the file relative to a data
directory the user chooses: `--data-dir DIR` (which sets the scenario's `data_dir`), the scenario's own `data_dir`
(relative to the scenario), or the `SIMRUN_DATA` environment variable. When the file is not there, the error says
which dataset it is and where to get it, from the item source's `dataset` attribute (e.g. "SafeTutors,
https://github.com/RadiantCrystal/SafeTutors"), so a user is never left with a bare "no such file".
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from engine.core._errors import ScenarioError
from engine.scenario._items import ITEM_SOURCES
from engine.scenario._spec import ItemSourceSpec, Scenario

__all__ = ("DATA_ENV", "DATA_PREFIX", "PACKAGE_PREFIX", "data_dir", "item_path", "package_file")

DATA_PREFIX = "data:"
PACKAGE_PREFIX = "package:"
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
    """The file an item source reads: relative to the scenario, (`data:...`) to the data directory, or
    (`package:...`) inside an installed package."""
    if source.path.startswith(PACKAGE_PREFIX):
        return package_file(source.path)
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


def package_file(named: str) -> Path:
    """`package:PACKAGE/FILE`: a file shipped inside an installed package (its package data)."""
    package, _, inside = named.removeprefix(PACKAGE_PREFIX).lstrip("/").partition("/")
    if not all(part.isidentifier() for part in package.split(".")) or not inside or ".." in Path(inside).parts:
        raise ScenarioError(f"{named!r}: expected package:PACKAGE/FILE, a file shipped inside an installed package")
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise ScenarioError(f"{named!r}: no installed package {package!r}") from None
    found = Path(str(root.joinpath(inside)))
    if not found.is_file():
        raise ScenarioError(f"{named!r}: the installed package {package!r} ships no file {inside!r} ({found})")
    return found
