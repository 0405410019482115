"""Files simrun ships are named by their package (`package:personas/cases.yaml`), so a scenario copied anywhere,
or run from an installed wheel, reads them without a clone's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

import personas
from engine import load_scenario
from engine.cli._main import main
from engine.scenario._data import package_file
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._run import load_items

ROOT = Path(__file__).resolve().parents[3]
CASEBENCH = ROOT / "scenarios" / "casebench.yaml"


def test_a_package_path_is_the_file_inside_the_installed_package() -> None:
    assert package_file("package:personas/cases.yaml") == Path(personas.__file__).with_name("cases.yaml")


def test_the_shipped_casebench_runs_from_a_copy_outside_the_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copied = tmp_path / "elsewhere" / "casebench.yaml"
    copied.parent.mkdir()
    copied.write_text(CASEBENCH.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_scenario(copied).content_hash() == load_scenario(CASEBENCH).content_hash()  # not where it sits
    argv = [str(copied), "--limit", "3", "--out", str(tmp_path / "runs"), "-q"]
    assert main(argv) == 0
    assert (next((tmp_path / "runs").glob("casebench-*")) / "report.md").is_file()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("package:personas/../pyproject.toml", "expected package:PACKAGE/FILE"),
        ("package:personas", "expected package:PACKAGE/FILE"),
        ("package:no_such_package_here/a.yaml", "no installed package 'no_such_package_here'"),
        ("package:personas/missing.yaml", "ships no file 'missing.yaml'"),
    ],
)
def test_a_bad_package_path_exits_2_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, says: str
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        CASEBENCH.read_text(encoding="utf-8").replace("package:personas/cases.yaml", path), encoding="utf-8"
    )
    assert main(["validate", str(scenario)]) == 2
    assert says in capsys.readouterr().err


def test_the_load_tester_s_default_items_are_the_shipped_bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no clone here
    items = load_items(LoadConfig(target="http://127.0.0.1:9/v1", model="m", rate=1))
    assert len(items) == 60 and {i.domain for i in items} == {"mathematics", "physics", "chemistry"}
    assert (ROOT / "scenarios" / "items" / "stem.yaml").resolve() == package_file("package:personas/stem.yaml")
