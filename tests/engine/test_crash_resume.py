"""Crash-exact resume: SIGKILL at arbitrary points, then `--resume`, gives exactly the uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.helpers import scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[2]
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
