"""The command line: exit codes, messages without tracebacks, Ctrl-C and resume, secrets kept out of files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
import yaml

from engine.cli._main import main
from tests.helpers import record_retry_waits, scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[3]


def _scenario(tmp_path: Path, name: str = "s.yaml", **overrides: Any) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenario_data(**overrides), sort_keys=False), encoding="utf-8")
    return path


def _only_run_dir(out: Path) -> Path:
    (run_dir,) = out.iterdir()
    return run_dir


def test_run_prints_the_table_and_writes_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`simrun SCENARIO` runs, prints the harm table, and logs structured events to events.jsonl."""
    assert main([str(_scenario(tmp_path)), "--out", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "Harm rate by risk dimension" in printed and "Cognitive" in printed and "Epistemic" in printed
    assert "sim" in printed and "not from a language model" in printed
    run_dir = _only_run_dir(tmp_path / "runs")
    events = [orjson.loads(line) for line in (run_dir / "events.jsonl").read_bytes().splitlines()]
    names = [event["event"] for event in events]
    assert names[0] == "run.started" and names[-1] == "run.finished" and names.count("episode.finished") == 12
    assert all("episode_id" in e for e in events if e["event"] == "episode.finished")


def test_validate_and_dry_run_call_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`validate` and `--dry-run` print the plan (and the estimate) and create no run directory."""
    path = _scenario(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert "12 episodes = 3 items" in capsys.readouterr().out
    assert main([str(path), "--dry-run", "--out", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "estimated model calls" in printed and "sim/judge" in printed
    assert not (tmp_path / "runs").exists()


def test_bad_scenario_exits_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad scenario is one message on stderr and exit code 2."""
    path = _scenario(tmp_path, judge_votes="three")
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "judge_votes" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["run"], ["nope.yaml"], ["run", "--limit", "0", "x.yaml"], ["report", "/definitely/not/here"]],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Missing or invalid arguments exit 2 with a usage message."""
    assert main(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_missing_key_exits_2_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `openai` role without a key stops the run before it starts, naming the role and variable."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = _scenario(tmp_path)
    assert main([str(path), "--model", "tutor=openai/gpt-4o-mini", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "role 'tutor'" in err and "OPENAI_API_KEY" in err
    assert not (tmp_path / "runs").exists()


def test_unreachable_endpoint_records_errors_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dead endpoint is retried, then every episode is an error record with the reason; the key leaks nowhere."""
    secret = "sk-simrun-test-SECRET-7f3a9c"
    monkeypatch.setenv("SIMRUN_FAKE_KEY", secret)
    data = scenario_data(limit=2)
    data["models"]["tutor"] = {
        "model": "openai/tutor",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "SIMRUN_FAKE_KEY",
        "max_retries": 1,
        "timeout_s": 2,
    }
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.0)
    assert main([str(path), "--out", str(tmp_path / "runs"), "--no-probe"]) == 3
    run_dir = _only_run_dir(tmp_path / "runs")
    records = [orjson.loads(line) for line in (run_dir / "episodes.jsonl").read_bytes().splitlines()]
    assert len(records) == 2 and all(r["status"] == "error" and r["error"]["type"] == "connection" for r in records)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["retries"] == 2 and manifest["counts"]["error"] == 2
    for file in run_dir.iterdir():
        assert secret not in file.read_text(encoding="utf-8"), file.name
    err = capsys.readouterr().err
    assert secret not in err
    assert "errors by kind" in err and "http://127.0.0.1:9/v1" in err, "the grouped summary names the endpoint"
    flat = " ".join(err.split())
    assert "errors connection 2" in flat and "retries 2" in flat, "the progress line counts errors by kind"
    assert f"--resume {run_dir} --retry-errors" in flat


def test_unreachable_endpoint_fails_the_probe_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens: exit 2 before any episode, naming role, model and URL, and no run directory is left."""
    data = scenario_data(limit=2)
    data["models"]["judge"] = [{"model": "openai/judge-x", "base_url": "http://127.0.0.1:9/v1?api_key=SeCrEt99"}]
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    waits = record_retry_waits(monkeypatch)
    assert main([str(path), "--out", str(tmp_path / "runs")]) == 2
    assert waits == []  # no retry and no backoff: the probe's one failure is the answer
    err = " ".join(capsys.readouterr().err.split())
    assert "judge model openai/judge-x at http://127.0.0.1:9/v1" in err and "cannot connect" in err
    assert "SeCrEt99" not in err and "--no-probe" in err
    assert not list((tmp_path / "runs").glob("*"))


def test_report_rebuilds_from_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`simrun report` recomputes summary.json and report.md from episodes.jsonl alone."""
    assert main([str(_scenario(tmp_path)), "--out", str(tmp_path / "runs")]) == 0
    run_dir = _only_run_dir(tmp_path / "runs")
    summary = (run_dir / "summary.json").read_bytes()
    report = (run_dir / "report.md").read_text()
    (run_dir / "summary.json").unlink()
    (run_dir / "report.md").unlink()
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "summary.json").read_bytes() == summary and (run_dir / "report.md").read_text() == report


def test_list_names_the_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    """`simrun list` shows what scenarios can name."""
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in ("openai", "sim", "crescendo", "scripted", "harm", "answer_leak", "pedagogy"):
        rows = [line for line in lines if line.split()[:1] == [name]]  # `crescendo` is a kind and a strategy
        assert rows and all(len(row.split()) > 3 for row in rows), f"{name}: no one-line description: {rows}"


def test_simrun_alone_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Usage: simrun") and "Commands:" in printed


def test_ctrl_c_flushes_and_resume_completes(tmp_path: Path) -> None:
    """SIGINT mid-run exits 130 with whole records and an `interrupted` manifest; --resume reaches the clean result."""
    path = _scenario(tmp_path, concurrency=2)
    slow = ["--set", "models.tutor.params.latency_s=0.02"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "engine", str(path), "--out", str(out), *slow]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(p.read_bytes().count(b"\n") for p in out.glob("*/episodes.jsonl")) < 2:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()
    run_dir = _only_run_dir(out)
    hint = f"resume with: simrun {path} --set models.tutor.params.latency_s=0.02 --resume {run_dir}"
    assert hint in err.decode().replace("\n", ""), err  # the whole command, overrides and all
    episodes = run_dir / "episodes.jsonl"
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["status"] == "interrupted"
    lines = episodes.read_bytes().splitlines(keepends=True)
    assert 2 <= len(lines) < 12 and all(line.endswith(b"\n") for line in lines)

    resumed = subprocess.run([*command, "--resume", str(run_dir)], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    clean = subprocess.run(
        [sys.executable, "-m", "engine", str(path), "--out", str(tmp_path / "clean"), *slow],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert clean.returncode == 0
    ids = [orjson.loads(line)["id"] for line in episodes.read_bytes().splitlines()]
    assert len(ids) == len(set(ids)) == 12

    def summary(run_dir: Path) -> dict[str, object]:
        data: dict[str, object] = orjson.loads((run_dir / "summary.json").read_bytes())
        data.pop("run")
        return data

    assert summary(run_dir) == summary(_only_run_dir(tmp_path / "clean"))


def test_lazy_commands_are_listed_with_their_own_help() -> None:
    """`simrun --help` lists the lazily imported commands from a table of their short help, without importing
    them; the table must say what each command says of itself."""
    from engine.cli._main import _RunByDefault

    assert set(_RunByDefault.LAZY_HELP) == set(_RunByDefault.LAZY)
    group = _RunByDefault()
    ctx = click.Context(group)
    for name in _RunByDefault.LAZY:
        command = group.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(limit=1000) == _RunByDefault.LAZY_HELP[name]


def test_a_dry_run_warns_of_a_missing_key_and_calls_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = _scenario(tmp_path)
    assert main([str(path), "--model", "tutor=openai/gpt-4o-mini", "--dry-run", "--out", str(tmp_path / "runs")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: role 'tutor' needs an API key" in err and "OPENAI_API_KEY" in err and "exit 2" in err
    assert not (tmp_path / "runs").exists()
