"""Crash-exact resume: SIGKILL at arbitrary points, then `--resume`, gives exactly the uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

import engine
from tests.helpers import scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[3]
SLOW = ["--set", "models.tutor.params.latency_s=0.01"]


def _command(scenario: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "engine", str(scenario), "--out", str(out), *SLOW, *extra]


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    data.pop("run")
    return data


def _ids(run_dir: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in (run_dir / "episodes.jsonl").read_bytes().splitlines()]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crash")
    write_bank(folder / "bank.yaml")
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_data(concurrency=3)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def clean(scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clean")
    subprocess.run(_command(scenario, out), cwd=ROOT, check=True, capture_output=True, timeout=120)
    (run_dir,) = out.iterdir()
    return run_dir


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sigkill_then_resume_matches_the_clean_run(scenario: Path, clean: Path, tmp_path: Path, seed: int) -> None:
    """Killed without warning after a random number of records (or mid-write), the run resumes to the same result."""
    rng = random.Random(seed)
    parent = tmp_path / "runs"
    process = subprocess.Popen(
        _command(scenario, parent), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wanted = rng.randint(0, 9)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        manifests = list(parent.glob("*/manifest.json"))
        episodes = manifests[0].parent / "episodes.jsonl" if manifests else None
        written = episodes.read_bytes().count(b"\n") if episodes is not None and episodes.exists() else 0
        if manifests and written >= wanted:
            break
        time.sleep(0.005)
    time.sleep(rng.random() * 0.05)  # land anywhere, including in the middle of a write
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)

    (out,) = parent.iterdir()
    resumed = subprocess.run(
        _command(scenario, parent, "--resume", str(out)), cwd=ROOT, capture_output=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr.decode()
    ids = _ids(out)
    assert sorted(ids) == sorted(_ids(clean)), "every planned episode exactly once"
    assert len(ids) == len(set(ids))
    assert _summary(out) == _summary(clean)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--port", str(port), "--latency", "0.01"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdout is not None and b"simrun serve:" in server.stdout.readline()
    return server


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    if process.stdout is not None:
        process.stdout.close()


def _wait_for_records(process: subprocess.Popen[bytes], parent: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        files = list(parent.glob("*/episodes.jsonl"))
        if files and files[0].read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.01)


def test_sigkill_and_an_outage_then_retry_errors_matches_the_clean_run(tmp_path: Path) -> None:
    """Over real HTTP against `simrun serve`: the run is SIGKILLed and the endpoint dies; it comes back and dies
    again mid-resume (breaker, exit 130); `--resume --retry-errors` then ends with the clean run's summary, every
    planned episode once. (A resume refused by the probe while the endpoint is down: test_live_endpoints.)"""
    port = _free_port()
    write_bank(tmp_path / "bank.yaml")
    endpoint = {"base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": "SIMRUN_CRASH_KEY", "max_retries": 1}
    data = scenario_data(concurrency=3, limit=6, judge_votes=1, judges=["harm"])
    data["models"] = {
        "tutor": {"model": "openai/sim-tutor", **endpoint},
        "student": {"model": "openai/sim-student", **endpoint},
        "judge": [{"model": "openai/sim-judge", **endpoint}],
    }
    scenario = tmp_path / "live.yaml"
    scenario.write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {**os.environ, "SIMRUN_CRASH_KEY": "sk-crash-test"}

    def command(out: Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "engine", str(scenario), "--out", str(out), *extra]

    server = _serve(port)
    try:
        os.environ["SIMRUN_CRASH_KEY"] = env["SIMRUN_CRASH_KEY"]  # the clean run is in-process: no interpreter start
        try:
            clean = engine.run_sync(engine.load_scenario(scenario), out=tmp_path / "clean").run_dir
        finally:
            del os.environ["SIMRUN_CRASH_KEY"]
        parent = tmp_path / "runs"
        first = subprocess.Popen(
            command(parent), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_for_records(first, parent, 2)
        _kill(first)
        _kill(server)
        (run_dir,) = parent.iterdir()

        server = _serve(port)
        second = subprocess.Popen(
            command(parent, "--resume", str(run_dir)), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        done = run_dir.joinpath("episodes.jsonl").read_bytes().count(b"\n")
        _wait_for_records(second, parent, done + 1)
        _kill(server)
        out, err = second.communicate(timeout=60)
        if second.returncode == 130:  # the outage caught it mid-run (it may also have finished first)
            told = " ".join(err.decode().split())
            assert "circuit breaker opened" in told and f"--resume {run_dir}" in told

        server = _serve(port)
        final = subprocess.run(
            command(parent, "--resume", str(run_dir), "--retry-errors"), cwd=ROOT, env=env, capture_output=True
        )
        assert final.returncode == 0, final.stderr.decode()
    finally:
        _kill(server)
    assert _summary(run_dir) == _summary(clean)
    summary = orjson.loads((run_dir / "summary.json").read_bytes())["run"]
    assert summary["episodes"] == summary["planned"] == summary["ok"]
