"""The shape of the code base: dependency direction, curated public surfaces, no import-time side effects."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agents
import engine
import judges
import personas

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = {"agents", "judges", "personas"}


def test_engine_does_not_import_plugins() -> None:
    """`engine` never imports a concrete agent, judge or persona module: they register through entry points."""
    for path in (ROOT / "engine").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert node.module.split(".")[0] not in PLUGIN_PACKAGES, (path, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in PLUGIN_PACKAGES, (path, alias.name)


@pytest.mark.parametrize("module", [engine, agents, judges, personas])
def test_public_surface_is_declared(module: ModuleType) -> None:
    """Each package's `__all__` lists exactly its public names (`engine`'s are imported on first use, so they are
    read through `dir` and `getattr`)."""
    public = {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), ModuleType)}
    assert set(module.__all__) == public


@pytest.mark.parametrize("module", [engine, agents, judges, personas])
def test_packages_are_this_repository(module: ModuleType) -> None:
    """`agents` and `judges` are common names on PyPI: the imported ones must be ours."""
    assert module.__file__ is not None and Path(module.__file__).resolve().is_relative_to(ROOT)


_HEAVY = ("numpy", "scipy", "sklearn", "nltk", "matplotlib", "openai", "aiohttp")


@pytest.mark.parametrize(
    "code",
    [
        "import engine.cli",
        "import engine; engine.load_plugins()",  # every shipped plug-in registered, as before a run
        "from engine.cli import main; main(['--help'])",
        "from engine.cli import main; main(['validate', 'scenarios/crescendo.yaml'])",
    ],
)
def test_start_up_imports_no_statistics_or_http_library(code: str) -> None:
    """Parsing the command line, loading the plug-ins and validating a scenario import no statistics, text-metric,
    plotting or HTTP library: those load when a summary is built or a model is called (start-up seconds)."""
    probe = (
        "import sys\n"
        f"try:\n    {code}\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"loaded = sorted({{m.split('.')[0] for m in sys.modules}} & {set(_HEAVY)!r})\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT, capture_output=True)


def test_importing_engine_is_cheap_and_configures_nothing() -> None:
    """`import engine` loads no provider SDK and configures no logging (libraries embed it as they are)."""
    code = (
        "import sys, structlog, engine;"
        "assert 'openai' not in sys.modules, 'openai imported';"
        "assert not structlog.is_configured(), 'structlog configured';"
        "import logging; assert not logging.getLogger().handlers"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
