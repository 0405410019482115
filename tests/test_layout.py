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


@pytest.mark.parametrize("module", [agents, judges, personas])
def test_public_surface_is_declared(module: ModuleType) -> None:
    """Each package's `__all__` lists exactly its public names (each loads on first use, so all are loaded first)."""
    for name in module.__all__:
        getattr(module, name)
    public = {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert set(module.__all__) == public


def test_engine_public_surface_is_its_stub() -> None:
    """`engine.__all__` is exactly what `__init__.pyi` types, and every name in it loads."""
    stub = ast.parse((ROOT / "engine" / "__init__.pyi").read_text(encoding="utf-8"))
    typed = {alias.name for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    declared = next(node for node in stub.body if isinstance(node, ast.Assign))
    assert isinstance(declared.value, ast.List)
    assert {ast.literal_eval(e) for e in declared.value.elts} == typed == set(engine.__all__)
    for name in engine.__all__:
        assert not isinstance(getattr(engine, name), ModuleType), name


LAYERS = ("core", "scenario", "models", "stats", "runtime", "report", "tools", "cli")
"""The engine's layers, lowest first: a module imports only from its own layer and those below it."""


def _engine_imports(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name == "engine" or name.startswith("engine.")]


def test_engine_folders_are_its_layers() -> None:
    """Every engine module sits in a layer folder, and every module inside one is private (`_name.py`)."""
    loose = sorted(p.name for p in (ROOT / "engine").glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert loose == []
    folders = {p.name for p in (ROOT / "engine").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS)
    for layer in LAYERS:
        for path in (ROOT / "engine" / layer).rglob("*.py"):
            assert path.name == "__init__.py" or path.name.startswith("_"), path


def test_lower_layers_never_import_upper_ones() -> None:
    """Including imports inside functions and under TYPE_CHECKING: a hidden upward import is still a cycle."""
    for rank, layer in enumerate(LAYERS):
        for path in (ROOT / "engine" / layer).rglob("*.py"):
            for name in _engine_imports(ast.parse(path.read_text(encoding="utf-8"))):
                parts = name.split(".")
                assert name != "engine" and parts[1] in LAYERS, f"{path}: imports {name}"
                assert LAYERS.index(parts[1]) <= rank, f"{path} ({layer}) imports {name} from a layer above it"


def test_plugins_import_only_the_public_api() -> None:
    """agents, judges and personas use `from engine import X` with X in `engine.__all__`, as a third party would."""
    public = set(engine.__all__)
    for package in sorted(PLUGIN_PACKAGES):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    assert not any(a.name.split(".")[0] == "engine" for a in node.names), path
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine":
                    assert node.module == "engine", f"{path}: from {node.module} import ..."
                    assert {a.name for a in node.names} <= public, path


@pytest.mark.parametrize("module", [engine, agents, judges, personas])
def test_packages_are_this_repository(module: ModuleType) -> None:
    """`agents` and `judges` are common names on PyPI: the imported ones must be ours."""
    assert module.__file__ is not None and Path(module.__file__).resolve().is_relative_to(ROOT)


_HEAVY = ("numpy", "scipy", "sklearn", "nltk", "matplotlib", "openai", "aiohttp")
_ON_ENDPOINTS = ["--model", "tutor=openai/t", "--model", "student=openai/s", "--model", "judge=openai/j"]


@pytest.mark.parametrize(
    "code",
    [
        "import engine.cli._main",
        "from engine.core._registry import load_plugins; load_plugins()",  # every shipped plug-in, as before a run
        "from engine.cli._main import main; main(['--help'])",
        "from engine.cli._main import main; main(['validate', 'scenarios/crescendo.yaml'])",
        f"from engine.cli._main import main; main(['validate', 'scenarios/crescendo.yaml', *{_ON_ENDPOINTS!r}])",
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


def test_only_the_command_line_imports_click() -> None:
    """The library is usable without the CLI: commands are a thin layer in engine/cli over library functions."""
    offenders = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith("engine/cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = [node.module]
            offenders += [name for module in imported if module.split(".")[0] == "click"]
    assert offenders == []


def test_a_scenario_imports_only_the_plug_ins_it_names() -> None:
    """Loading a crescendo scenario on real endpoints imports crescendo's modules and no other kind's (the sim,
    which any kind may extend, imports every sim module; `simrun list` imports everything)."""
    probe = (
        "import re, sys\n"
        f"from engine.cli._main import main; main(['validate', 'scenarios/crescendo.yaml', *{_ON_ENDPOINTS!r}])\n"
        "loaded = {m for m in sys.modules if m.split('.')[0] in ('agents', 'judges', 'personas')}\n"
        "assert {'agents.crescendo', 'judges.crescendo_summary', 'judges.harm'} <= loaded, loaded\n"
        "other = [m for m in loaded if re.search(r'\\.(fairness|remath|case|persona\\b|.*_sim\\b)', m)]\n"
        "assert not other, other\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_engine_tests_mirror_its_layers() -> None:
    """tests/engine/ holds one folder per engine layer (and, inside, per module group), so a test sits beside
    the layer it tests and a renamed layer or group cannot leave its tests behind."""
    tests = ROOT / "tests" / "engine"
    assert sorted(p.name for p in tests.glob("*.py")) == ["__init__.py"], "tests/engine/ holds only layer folders"
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = folder.relative_to(tests)
        assert relative.parts[0] in LAYERS, f"tests/engine/{relative} names no engine layer"
        assert (ROOT / "engine" / relative / "__init__.py").is_file(), f"tests/engine/{relative} mirrors no package"
        assert (folder / "__init__.py").is_file(), f"tests/engine/{relative} is not a package"


def test_a_family_of_modules_is_a_folder() -> None:
    """Three or more modules named `_x`, `_x_...` in one folder are one thing in parts: they get a folder `x/`
    (as `tools/serve/`, `tools/calibrate/` and `models/sim/` did), so the tree shows the design."""
    families = []
    for init in (ROOT / "engine").rglob("__init__.py"):
        stems = [p.stem for p in init.parent.glob("_*.py") if p.name not in {"__init__.py", "__main__.py"}]
        for family in {stem.split("_")[1] for stem in stems}:
            members = sorted(s for s in stems if s == f"_{family}" or s.startswith(f"_{family}_"))
            if len(members) >= 3:
                families.append(f"{init.parent.relative_to(ROOT).as_posix()}: {members}")
    assert families == []
