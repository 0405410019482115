"""Small pieces a newcomer can read: no module over MAX_MODULE_LINES, no function over MAX_FUNCTION_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "agents", "judges", "personas")
MAX_MODULE_LINES = 550
MAX_FUNCTION_LINES = 60
"""A function's lines run from its `def` to its last line (decorators aside, docstring included)."""


def _sources() -> list[tuple[str, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.append((path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")))
    return found


def test_modules_are_small() -> None:
    long = [f"{name}: {text.count(chr(10))} lines" for name, text in _sources() if text.count("\n") > MAX_MODULE_LINES]
    assert long == []


def test_functions_are_short() -> None:
    long = []
    for name, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({size} lines)")
    assert long == []
