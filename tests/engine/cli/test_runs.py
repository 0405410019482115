"""Finding and reading runs from the console: `simrun runs`, `latest`, compare's headline, verbosity, width."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from rich.console import Console
from rich.table import Table

from engine.cli._main import main
from engine.cli._verbosity import split_verbosity
from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width
from engine.runtime._runs import resolve_run
from engine.scenario._budget import price_source

ROOT = Path(__file__).resolve().parents[3]
REMATH = str(ROOT / "scenarios" / "remath.yaml")


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Two small runs in ./runs that differ in one key (the working directory is tmp_path)."""
    monkeypatch.chdir(tmp_path)
    for leak in ("0.1", "0.6"):
        assert main([REMATH, "--limit", "24", "--set", f"models.tutor.params.leak_base={leak}", "-q"]) == 0
    return sorted((tmp_path / "runs").iterdir())


def test_runs_lists_scenario_kind_status_outcome_start_and_spend(
    two_runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    for expected in ("remath", "remediation", "finished", "24 ok", "latest~1"):
        assert expected in out
    assert price_source().replace(" ", "") in "".join(out.split()), "the spend names where its prices came from"
    assert f"prices: scenario's, else {price_source()}" in (two_runs[0] / "report.md").read_text(encoding="utf-8")
    started = orjson.loads((two_runs[0] / "manifest.json").read_bytes())["started_at"][:10]
    assert started in out


def test_latest_names_the_newest_run_wherever_a_run_directory_is_expected(
    two_runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["report", "latest"]) == 0
    assert str(two_runs[1]).endswith(capsys.readouterr().out.split("wrote runs/")[1].split("/summary.json")[0])
    assert main(["compare", "latest~1", "latest", "--out", "cmp"]) == 0
    out = capsys.readouterr().out
    assert "Paired differences over 24 matched episodes" in out and "r [95% CI]" in out
    assert "answer_leak" in out  # the leak rate differs between the runs: its row is in the headline
    assert main(["report", "latest~2"]) == 2
    assert "holds only 2 run(s)" in capsys.readouterr().err


def test_dir_latest_names_the_newest_run_in_that_folder(two_runs: list[Path], tmp_path: Path) -> None:
    """`runs/A/latest` stays run A however many runs land elsewhere: how the README names the runs it compares."""
    moved = tmp_path / "kept" / "A"
    moved.mkdir(parents=True)
    two_runs[0].rename(moved / two_runs[0].name)
    assert resolve_run("kept/A/latest") == Path("kept/A") / two_runs[0].name
    assert resolve_run("runs/latest") == resolve_run("latest") == Path("runs") / two_runs[1].name
    with pytest.raises(ScenarioError, match="kept/A/ holds only 1 run"):
        resolve_run("kept/A/latest~1")
    assert resolve_run("kept/A/latest~x") == Path("kept/A/latest~x")  # not the form: a plain path


def test_latest_with_no_runs_is_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["view", "latest"]) == 2
    assert "holds no runs" in capsys.readouterr().err
    assert main(["runs"]) == 0 and "no runs in runs/" in capsys.readouterr().out


def test_quiet_keeps_the_results_and_drops_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([REMATH, "--limit", "6", "--log-level", "info"]) == 0
    loud = capsys.readouterr()
    assert "run.started" in loud.err and "remath" in loud.err  # events echoed, progress shown
    assert main([REMATH, "--quiet", "--limit", "6"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and "run directory:" in quiet.out


@pytest.mark.parametrize(
    ("args", "front", "rest"),
    [
        (["x.yaml", "--quiet"], ["--quiet"], ["x.yaml"]),
        (["-q", "report", "latest"], ["-q"], ["report", "latest"]),
        (
            ["run", "x.yaml", "--log-level", "info", "--limit", "3"],
            ["--log-level", "info"],
            ["run", "x.yaml", "--limit", "3"],
        ),
        (["x.yaml", "--log-level=debug", "--", "--quiet"], ["--log-level=debug"], ["x.yaml", "--", "--quiet"]),
    ],
)
def test_verbosity_options_are_taken_from_anywhere(args: list[str], front: list[str], rest: list[str]) -> None:
    assert split_verbosity(args) == (front, rest)


def test_the_library_prints_nothing_unless_the_host_configures_logging(tmp_path: Path) -> None:
    """A run from Python with no logging set up: stdout stays empty and events.jsonl still has every event."""
    code = (
        "import engine\nfrom pathlib import Path\n"
        f"scenario = engine.load_scenario({REMATH!r}, overrides=['limit=6'])\n"
        f"result = engine.run_sync(scenario, out=Path({str(tmp_path)!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout == ""
    (run,) = tmp_path.glob("remath-*")
    events = [orjson.loads(line)["event"] for line in (run / "events.jsonl").read_bytes().splitlines()]
    assert events[0] == "run.started" and events.count("episode.finished") == 6


def _printed(table: Table, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(fit_to_width(table, width))
    return console.export_text()


def test_a_table_too_wide_for_80_columns_is_stacked_whole_words_and_all() -> None:
    wide = Table(title="wide")
    headers = ("conversations per second", "requests per second", "output tokens per second", "goodput share")
    for name in headers:
        wide.add_column(name)
    wide.add_row("4.00 started", "15.99 measured", "1,234.56 counted", "95%")
    text = _printed(wide, 40)
    assert "…" not in text
    assert all(word in text.split() for name in headers for word in name.split())
    assert max(len(line) for line in text.splitlines()) <= 40


def test_a_table_whose_words_fit_wraps_instead_of_cutting() -> None:
    narrow = Table(title="narrow")
    for name in ("dimension", "single / reply", "multi / reply", "multi / dialogue", "Δ dialogue", "episodes"):
        narrow.add_column(name)
    narrow.add_row("Motivational–affective", "13 [5–30]", "38 [32–44]", "100 [89–100]", "+87", "660")
    text = _printed(narrow, 80)
    assert "…" not in text and "episodes" in text and "dialogue" in text
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("scenario", ["crescendo", "casebench", "remath", "fairness"])
def test_every_kinds_console_tables_read_at_80_columns(
    scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the command line prints a summariser's tables, every one fits 80 columns with no header cut."""
    monkeypatch.setenv("COLUMNS", "80")
    path = str(ROOT / "scenarios" / f"{scenario}.yaml")
    limit = "300" if scenario == "fairness" else "30"  # fewer fairness pairs print "too small to test", no table
    assert main([path, "--limit", limit, "--out", str(tmp_path), "-q"]) in (0, 3)
    out = capsys.readouterr().out
    assert "…" not in out
    table_lines = [line for line in out.splitlines() if set(line) & set("┃│┏┡└━─")]
    assert table_lines and max(map(len, table_lines)) <= 80
