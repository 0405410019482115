"""Public datasets live in a data directory the user names; nothing shipped points at a development folder.

The SafeTutors files here are the invented records of tests/personas/test_safetutors.py, written under the names
of the six released files, so the shipped paper scenario runs against them offline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import load_scenario
from engine.cli._main import main
from tests.personas.test_safetutors import CHEM_SINGLE, MATH_MULTI, SAFETUTORS_FILES, write_jsonl

ROOT = Path(__file__).resolve().parents[3]
PAPER = ROOT / "scenarios" / "crescendo_paper.yaml"
SHIPPED = ("README.md", "docs", "scenarios", "engine", "agents", "personas", "judges", "pyproject.toml")


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIMRUN_DATA", raising=False)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "downloads" / "safetutors"
    folder.mkdir(parents=True)
    for name in SAFETUTORS_FILES:
        write_jsonl(folder / name, CHEM_SINGLE if "_single" in name else MATH_MULTI)
    return folder.parent


def test_the_flag_names_the_data_directory(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(PAPER), "--data-dir", str(data_dir)]) == 0
    assert "18 episodes" in capsys.readouterr().out  # 3 invented records in each of the six files


def test_the_environment_variable_names_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIMRUN_DATA", str(data_dir))
    assert main(["validate", str(PAPER)]) == 0
    assert "valid" in capsys.readouterr().out


def test_the_scenario_setting_is_relative_to_the_scenario(data_dir: Path, tmp_path: Path) -> None:
    scenario_file = tmp_path / "paper.yaml"
    scenario_file.write_text(PAPER.read_text(encoding="utf-8") + "\ndata_dir: downloads\n", encoding="utf-8")
    scenario = load_scenario(scenario_file)
    assert scenario.data_dir == "downloads"
    assert scenario.content_hash() == load_scenario(PAPER, overrides=[f"data_dir={data_dir}"]).content_hash()


def test_a_run_reads_the_files_from_the_data_directory(data_dir: Path, tmp_path: Path) -> None:
    argv = [str(PAPER), "--data-dir", str(data_dir), "--limit", "4", "--out", str(tmp_path / "runs"), "-q"]
    assert main(argv) == 0
    assert len(list((tmp_path / "runs").glob("*/report.html"))) == 1


def test_without_a_data_directory_the_error_says_what_where_and_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([str(PAPER), "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    flat = " ".join(err.split())
    for said in ("SafeTutors", "https://github.com/RadiantCrystal/SafeTutors", "DIR/safetutors/", "--data-dir"):
        assert said in flat, flat
    assert "SIMRUN_DATA" in flat and not (tmp_path / "runs").exists()


def test_a_data_directory_without_the_file_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(PAPER), "--data-dir", str(tmp_path)]) == 2
    flat = " ".join(capsys.readouterr().err.split())
    assert str(tmp_path / "safetutors" / "math_single_combined.jsonl") in flat and "SafeTutors" in flat


@pytest.mark.parametrize("path", ["data:../outside.jsonl", "data:/", "data:a/../../b.jsonl"])
def test_a_data_path_stays_inside_the_data_directory(
    path: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["validate", str(PAPER), "--data-dir", str(data_dir), "--set", f"items.0.path={path}"]
    assert main(argv) == 2
    assert "data:FOLDER/FILE" in capsys.readouterr().err


def _shipped_files() -> list[Path]:
    found: list[Path] = []
    for name in SHIPPED:
        path = ROOT / name
        files = path.rglob("*") if path.is_dir() else [path]
        found += [p for p in files if p.is_file() and "__pycache__" not in p.parts]
    return found


def test_no_shipped_file_points_at_a_development_folder() -> None:
    """The seed data beside this checkout exists only on development machines: no user can follow such a path."""
    pointing = re.compile(r"\.\./(\.\./)*shared/|" + re.escape(str(ROOT.parent / "shared")))
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in _shipped_files()
        if p.suffix in {".py", ".yaml", ".yml", ".md", ".toml", ".j2", ".json"}
        and pointing.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == []
