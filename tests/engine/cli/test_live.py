"""What a run prints when nobody watches a terminal: a progress line at an interval, and where its report is.

A piped console (`simrun ... | tee log`) gets no progress bar, which would print only at the end; it gets a
plain line per interval instead. The sim tutor's latency makes the run outlast several intervals, so the lines
are counted without any clock assertion.
"""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
import yaml
from rich.console import Console

import engine
from engine.cli._live import run_with_progress_lines
from engine.cli._main import main
from tests.helpers import make_scenario, scenario_data, write_bank


def test_a_piped_run_prints_a_progress_line_each_interval(tmp_path: Path) -> None:
    tutor = {"model": "sim/tutor", "params": {"latency_s": 0.05}}
    scenario = make_scenario(tmp_path, limit=4, concurrency=1, models={**scenario_data()["models"], "tutor": tutor})
    runner = engine.Runner(scenario, out=tmp_path / "runs", report=engine.write_report)
    runner.prepare()
    log = io.StringIO()
    console = Console(file=log, width=80)
    assert not console.is_terminal
    result = anyio.run(lambda: run_with_progress_lines(runner, console, interval_s=0.01, handle_signals=False))
    assert result.ok == 4
    first, *lines = log.getvalue().splitlines()
    assert first == "small: 4 episodes; a progress line every 0.01 s"
    assert len(lines) >= 2, lines  # at least 4 turns of 50 ms each outlast two 10 ms intervals
    for line in lines:  # one line each, never wrapped at the console's width, whatever the spend shows
        assert line.startswith("small: ") and "/4 episodes (" in line and " s · errors 0 · retries 0" in line
        assert "total $" in line
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done == sorted(done) and done[-1] == 4  # the last line is the final count
    assert "tutor sim/tutor" in lines[-1] and " tok · " in lines[-1]  # tokens per role and model


def test_every_run_ends_with_its_report_and_the_view_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_data(limit=2)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main([str(path)]) == 0
    captured = capsys.readouterr()
    assert "a progress line every 10 s" in captured.err  # captured output is not a terminal: the piped form
    (run_dir,) = (tmp_path / "runs").iterdir()
    last = captured.out.splitlines()[-1]
    assert last == f"report: runs/{run_dir.name}/report.html  (open it with: simrun view runs/{run_dir.name})"
