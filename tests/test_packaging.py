"""The wheel is what users install: it must hold every package and data file the commands need.

The wheel is built from a copy of the tree and installed without dependencies into a fresh venv that sees
this interpreter's installed dependencies through a `.pth` line (appended to sys.path, after the venv's own
site-packages, and without running that folder's own `.pth` files, so an editable install of the tree stays
invisible). Only the wheel's code can answer the commands; the test checks so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from subprocess import PIPE

import httpx2
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("engine", "agents", "judges", "personas", "pyproject.toml", "README.md")
COMMANDS = (
    ["--help"],
    ["loadtest", "--help"],
    ["serve", "--help"],
    ["validate", "scenarios/crescendo.yaml"],
)
KIND_SCENARIOS = ("crescendo", "fairness", "casebench", "remath")
"""One shipped scenario per kind: the wheel must write each kind's report.md and report.html."""
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


def _package_data() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(project["tool"]["setuptools"]["package-data"])


@pytest.mark.parametrize(("package", "patterns"), sorted(_package_data().items()))
def test_package_data_names_a_package_and_files(package: str, patterns: list[str]) -> None:
    """A package-data entry for a package that was moved or renamed silently ships nothing."""
    folder = ROOT.joinpath(*package.split("."))
    assert (folder / "__init__.py").is_file(), f"package-data names {package!r}, which is not a package"
    empty = [pattern for pattern in patterns if not any(path.is_file() for path in folder.glob(pattern))]
    assert empty == [], f"package-data of {package!r}: {empty} match no file"


def test_every_data_file_of_the_packages_is_declared() -> None:
    """Every non-Python file inside the packages is read at run time, so each must be in the wheel."""
    declared: set[Path] = set()
    for package, patterns in _package_data().items():
        folder = ROOT.joinpath(*package.split("."))
        declared |= {path for pattern in patterns for path in folder.glob(pattern) if path.is_file()}
    present = {
        path
        for name in ("engine", "agents", "judges", "personas")
        for path in (ROOT / name).rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert sorted(p.relative_to(ROOT).as_posix() for p in present - declared) == []


def _simrun(installed: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [installed / "simrun", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=CLEAN_ENV, timeout=600
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"simrun {args} exited {done.returncode}:\n{done}"
    return done


def _view_answers(installed: Path, run: Path) -> None:
    """`simrun view` from the wheel serves the report: started on a free port, asked once, stopped with Ctrl-C."""
    with subprocess.Popen(
        [installed / "simrun", "view", str(run), "--port", "0"], stdout=PIPE, stderr=PIPE, text=True, env=CLEAN_ENV
    ) as process:
        assert process.stdout is not None
        try:
            first = process.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+/\S*", first)
            assert found, f"simrun view printed no address: {first}"
            page = httpx2.get(found.group(0), timeout=30)
            assert page.status_code == 200 and "<html" in page.text.lower()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.returncode == 0, process.stderr.read() if process.stderr else ""


def test_the_wheel_load_tests_a_served_endpoint_with_its_own_items(installed: Path, tmp_path: Path) -> None:
    """`simrun loadtest` without --items, in a folder with no clone, against `simrun serve` on loopback."""
    with subprocess.Popen(
        [installed / "simrun", "serve", "--port", "0"], stdout=PIPE, stderr=PIPE, text=True, env=CLEAN_ENV
    ) as server:
        assert server.stdout is not None
        try:
            found = re.search(r"http://127\.0\.0\.1:\d+/v1", server.stdout.readline())
            assert found, "simrun serve printed no address"
            load = ["--target", found.group(0), "--model", "sim", "--rate", "4", "--duration", "1"]
            done = subprocess.run(
                [installed / "simrun", "loadtest", *load, "--turns", "1", "--out", "runs"],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=CLEAN_ENV,
                timeout=300,
            )
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    # 3: a validity gate failed on a busy machine; the run itself, and the items it read, are what count here
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stdout + done.stderr
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["requests"]["ok"] > 0, summary["requests"]
    assert (run / "report.html").is_file()


def test_the_wheel_runs_every_kind_to_its_report(installed: Path, tmp_path: Path) -> None:
    """Real runs from the wheel (a few episodes of each kind's shipped scenario), then report, view and compare."""
    work = tmp_path / "work"
    # the scenarios alone, links copied as files: the items simrun ships come from the wheel (package:...)
    shutil.copytree(ROOT / "scenarios", work / "scenarios", ignore=shutil.ignore_patterns("__pycache__"))
    running = [
        subprocess.Popen(
            [installed / "simrun", f"scenarios/{kind}.yaml", "--limit", "6", "--out", f"runs-{kind}", "-q"],
            stdout=PIPE,
            stderr=PIPE,
            text=True,
            cwd=work,
            env=CLEAN_ENV,
        )
        for kind in KIND_SCENARIOS
    ]
    for kind, process in zip(KIND_SCENARIOS, running, strict=True):
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0 and "Traceback" not in err, f"{kind} exited {process.returncode}:\n{out}{err}"
        (run,) = (work / f"runs-{kind}").iterdir()
        assert (run / "report.md").stat().st_size > 0 and "<html" in (run / "report.html").read_text(encoding="utf-8")
    (first,) = (work / "runs-crescendo").iterdir()
    _simrun(installed, "scenarios/crescendo.yaml", "--limit", "6", "--seed", "7", "--out", "runs-crescendo", cwd=work)
    (report_html := first / "report.html").unlink()
    assert "report.html" in _simrun(installed, "report", first, cwd=work).stdout and report_html.is_file()
    _view_answers(installed, first)
    second = next(run for run in (work / "runs-crescendo").iterdir() if run != first)
    compared = _simrun(installed, "compare", first, second, "--out", "compared", cwd=work)
    assert "compare.html" in compared.stdout and (work / "compared" / "compare.html").is_file()
