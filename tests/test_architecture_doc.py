"""docs/architecture.md's layer table must name every module group and module of the engine, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
ENGINE = ROOT / "engine"
ROW = re.compile(r"^\| `(engine/[^`]*/)` \|.*\| (?P<modules>[^|]*) \|$")


def _table() -> dict[str, set[str]]:
    """Folder → the entries of its row's last column, from the table under "The engine's layers"."""
    section = PAGE.read_text(encoding="utf-8").split("## The engine's layers", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        if (match := ROW.match(line)) is not None:
            assert match.group(1) not in rows, f"{match.group(1)} has two rows"
            rows[match.group(1)] = set(re.findall(r"`([^`]+)`", match.group("modules")))
    return rows


def _tree() -> dict[str, set[str]]:
    """Folder → its private modules (`_x`) and sub-folders (`x/`), for every package under engine/."""
    folders: dict[str, set[str]] = {}
    for init in sorted(ENGINE.rglob("__init__.py")):
        folder = init.parent
        if folder == ENGINE:
            continue
        entries = {p.stem for p in folder.glob("_*.py") if p.name != "__init__.py"}
        entries |= {f"{p.name}/" for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
        folders[f"{folder.relative_to(ROOT).as_posix()}/"] = entries
    return folders


def test_the_table_is_found_and_has_a_row_per_layer() -> None:
    assert {"engine/core/", "engine/cli/"} <= set(_table())


def test_every_module_group_in_the_tree_has_a_row_and_every_row_a_folder() -> None:
    table, tree = _table(), _tree()
    assert sorted(set(tree) - set(table)) == [], "module groups missing from docs/architecture.md"
    assert sorted(set(table) - set(tree)) == [], "rows in docs/architecture.md for folders that do not exist"


def test_every_module_is_listed_and_every_listed_module_exists() -> None:
    table, tree = _table(), _tree()
    missing = {folder: sorted(tree[folder] - table.get(folder, set())) for folder in tree}
    stale = {folder: sorted(table[folder] - tree.get(folder, set())) for folder in table}
    assert {k: v for k, v in missing.items() if v} == {}, "modules missing from docs/architecture.md"
    assert {k: v for k, v in stale.items() if v} == {}, "listed in docs/architecture.md but not in the tree"
