"""The wheel is what users install: it must hold every package and data file the commands need.

The wheel is built from a copy of the tree and installed without dependencies into a fresh venv that sees
this interpreter's installed dependencies through a `.pth` line (appended to sys.path, after the venv's own
site-packages, and without running that folder's own `.pth` files, so an editable install of the tree stays
invisible). Only the wheel's code can answer the commands; the test checks so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from subprocess import PIPE

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("engine", "agents", "judges", "personas", "pyproject.toml", "README.md")
COMMANDS = (
    ["--help"],
    ["loadtest", "--help"],
    ["serve", "--help"],
    ["validate", "scenarios/crescendo.yaml"],
)
# Neither PYTHONPATH nor the working tree may leak into the venv: it must see the wheel alone.
CLEAN_ENV = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}


def _copy_tree(into: Path) -> Path:
    """What the sdist would hold, without caches or a stale build/ folder from an earlier build."""
    tree = into / "src"
    tree.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, tree / name)
    return tree


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=CLEAN_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BuildBackendWarning" not in done.stderr and "SetuptoolsWarning" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only the wheel; returns its bin/ folder."""
    work = tmp_path_factory.mktemp("wheel")
    tree = _copy_tree(work)
    _pip("wheel", "--no-deps", "--quiet", "--wheel-dir", str(work / "dist"), str(tree))
    (wheel,) = (work / "dist").glob("simrun-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=CLEAN_ENV)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", "--no-index", "--quiet", str(wheel))
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        env=CLEAN_ENV,
    ).stdout.strip()
    (Path(purelib) / "_simrun_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    return venv / "bin"


def test_the_installed_package_is_the_wheel(installed: Path) -> None:
    code = "import engine, engine.tools.loadtest, engine.report._page; print(engine.__file__)"
    where = subprocess.run(
        [installed / "python", "-c", code], check=True, capture_output=True, text=True, cwd="/", env=CLEAN_ENV
    )
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout


def test_commands_run_from_the_wheel(installed: Path) -> None:
    """The commands start at once, side by side: each is mostly interpreter start-up."""
    running = [
        (
            args,
            subprocess.Popen(
                [installed / "simrun", *args], stdout=PIPE, stderr=PIPE, text=True, cwd=ROOT, env=CLEAN_ENV
            ),
        )
        for args in COMMANDS
    ]
    outputs = {}
    for args, process in running:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, f"simrun {' '.join(args)} exited {process.returncode}:\n{out}{err}"
        assert "Traceback" not in err, err
        outputs[args[0]] = out
    assert "valid" in outputs["validate"] and "loadtest" in outputs["--help"]
