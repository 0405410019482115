"""`engine.__all__` is what plug-ins and hosts use: each name in it has a user outside the engine.

A name counts as used when a plug-in package imports it, a doc page shows it (`engine.X`, `from engine import X`,
a Python example, or a name the pages for hosts and plug-in authors cite), or a test of the public API calls
it. A name with none of these is an internal one: the engine imports it from its private module, and the stub
stays the surface a third party reads.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = ("agents", "judges", "personas")
API_PAGES = ("README.md", "docs/library.md", "docs/extending.md")
"""The pages written for hosts and plug-in authors: a name they cite in backticks is documented API."""
API_TESTS = ("tests/test_library.py", "tests/test_toy_kind.py", "tests/engine/tools/test_run_options.py")
"""Tests of the public API: embedding simrun, a third-party kind, the typed run options."""


def _python_uses(source: str) -> set[str]:
    """Names taken from `engine`: `from engine import X`, `engine.X`, and bare names a snippet uses."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "engine":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "engine":
            found.add(node.attr)
    return found


def _plugin_uses() -> set[str]:
    paths = [path for package in PLUGIN_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return set().union(*(_python_uses(path.read_text(encoding="utf-8")) for path in paths))


def _doc_uses(public: set[str]) -> set[str]:
    found: set[str] = set()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        found.update(re.findall(r"\bengine\.(\w+)", text))
        for names in re.findall(r"from engine import \(?([\w, \n]+)\)?", text):
            found.update(re.findall(r"\w+", names))
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            tree = ast.parse(block)
            found.update(node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in public)
        if page.relative_to(ROOT).as_posix() in API_PAGES:
            found.update(name for name in re.findall(r"`@?(\w+)[`(\[]", text) if name in public)
    return found


def _test_uses() -> set[str]:
    return set().union(*(_python_uses((ROOT / path).read_text(encoding="utf-8")) for path in API_TESTS))


def test_every_public_name_has_a_user_outside_the_engine() -> None:
    public = set(engine.__all__)
    unused = public - _plugin_uses() - _doc_uses(public) - _test_uses()
    assert sorted(unused) == [], "public names nothing outside the engine uses: import them from their module"


def test_the_sources_of_uses_exist() -> None:
    """A renamed page or test must not silently empty a source of uses."""
    for path in (*API_PAGES, *API_TESTS):
        assert (ROOT / path).is_file(), path
    assert {"Utterance", "EpisodeContext"} <= _test_uses()
    assert {"JUDGES", "Utterance"} <= _plugin_uses()
    assert {"Judge", "run_sync"} <= _doc_uses(set(engine.__all__))
