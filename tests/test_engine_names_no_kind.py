"""The engine knows no scenario kind: its code names no shipped plug-in and branches on no kind.

The names come from the registries themselves (everything the `agents`, `judges` and `personas` packages
register, sim behaviours included) plus the kinds' own words, so a new shipped plug-in is covered without
editing this test. Docstrings and comments may cite a kind as an example; code — identifiers and string
literals — may not, except where `ALLOWED` says why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import engine
from engine.core._registry import load_plugins
from engine.models.sim._tasks import SIM_TASKS
from engine.tools.calibrate._labels import LABEL_SOURCES

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = ("agents", "judges", "personas")
KIND_WORDS = {
    "crescendo",
    "fairness",
    "cases",
    "casebench",
    "tutorcasebench",
    "remediation",
    "remath",
    "safetutors",
    "edufair",
    "mrbench",
}
REGISTRIES = (
    engine.PROTOCOLS,
    engine.SUMMARIZERS,
    engine.TUTORS,
    engine.STUDENTS,
    engine.JUDGES,
    engine.ITEM_SOURCES,
    engine.DESIGNS,
    LABEL_SOURCES,
)
# Registered names that are also the plain words every layer uses; the engine says them about no plug-in.
GENERIC_WORDS = {
    "model": "the `model` tutor is named after the language model it asks",
    "labels": "the `labels` label source reads a file of human labels",
}
# (file relative to engine/, word) → why it may stay. Keep this short and true.
ALLOWED = {
    ("tools/loadtest/_generator.py", "persona"): "the load mode drives the persona student's sim behaviour as its load",
    ("cli/_calibrate.py", "mrbench"): "CLI default of `simrun calibrate --source`; the label source is a plug-in",
    ("cli/_embed.py", "cases"): "CLI default of `simrun embed --source`; the item source is a plug-in",
}


def _owner(plugin: object) -> str:
    module = getattr(plugin, "__module__", None) or type(plugin).__module__
    return str(module).split(".")[0]


def shipped_names() -> set[str]:
    """Every name a shipped plug-in package registers, and the kinds' words."""
    load_plugins()
    names = set(KIND_WORDS)
    for registry in REGISTRIES:
        names.update(name for name, plugin in registry.items() if _owner(plugin) in PLUGIN_PACKAGES)
    names.update(task for (_, task), entry in SIM_TASKS.items() if _owner(entry.handler) in PLUGIN_PACKAGES)
    return {name.lower() for name in names} - set(GENERIC_WORDS)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        if isinstance(node, ast.ClassDef | ast.Module):  # attribute docstrings: a string after an assignment
            for before, after in zip(node.body, node.body[1:], strict=False):
                if not isinstance(before, ast.AnnAssign | ast.Assign) or not isinstance(after, ast.Expr):
                    continue
                if isinstance(after.value, ast.Constant):
                    found.add(id(after.value))
    return found


def code_words(source: str) -> Iterator[tuple[int, str]]:
    """(line, word) of every identifier and every word of a non-docstring string literal."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for word in re.findall(r"[A-Za-z][A-Za-z0-9_]*", node.value):
                yield node.lineno, word
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.alias):
            yield node.lineno, node.name


def _parts(word: str) -> set[str]:
    """The word itself, and the kind words inside a compound identifier (`run_crescendo` names crescendo)."""
    lowered = word.lower()
    return {lowered, *(set(lowered.split("_")) & KIND_WORDS)}


def test_shipped_names_are_found() -> None:
    """The scan is only as good as its word list: it must see the shipped kinds and their sim tasks."""
    names = shipped_names()
    assert {"crescendo", "fairness", "cases", "remediation", "case_checklist", "remath_pairwise", "harm"} <= names


def test_code_words_skip_docstrings_and_see_code() -> None:
    source = '"""crescendo"""\nx = "a fairness run"\n'
    assert [word for _, word in code_words(source)] == ["x", "a", "fairness", "run"]


def test_engine_code_names_no_shipped_kind() -> None:
    names = shipped_names()
    offending = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        relative = path.relative_to(ROOT / "engine").as_posix()
        for line, word in code_words(path.read_text(encoding="utf-8")):
            for part in _parts(word) & names:
                if (relative, part) not in ALLOWED:
                    offending.append(f"engine/{relative}:{line}: {word}")
    assert not offending, "engine code names shipped plug-ins:\n" + "\n".join(offending)


def test_allow_list_is_still_needed() -> None:
    """An allowance nobody uses any more is removed, so the list stays honest."""
    names = shipped_names()
    used: set[tuple[str, str]] = set()
    for path in (ROOT / "engine").rglob("*.py"):
        relative = path.relative_to(ROOT / "engine").as_posix()
        used.update(
            (relative, part) for _, word in code_words(path.read_text(encoding="utf-8")) for part in _parts(word)
        )
    assert set(ALLOWED) <= used & {(r, w) for r, w in ALLOWED if w in names}


def test_engine_branches_on_no_kind() -> None:
    """No `kind == "..."` comparison against a literal outside a mode's own package."""
    for path in (ROOT / "engine").rglob("*.py"):
        if "loadtest" in path.parts or path.name == "_loadtest.py":
            continue  # the load mode may name its own manifest kind
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                literal = [o for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)]
                kindish = any("kind" in ast.unparse(o) for o in operands)
                assert not (literal and kindish), f"{path}:{node.lineno}: {ast.unparse(node)}"
