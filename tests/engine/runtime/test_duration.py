"""`--dry-run`'s expected duration: the tightest of the rate limits, token limits and simulated latency."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli._main import main
from engine.runtime._duration import duration_text, expected_duration
from engine.runtime._plugins import CallEstimate
from tests.helpers import make_scenario

ROOT = Path(__file__).resolve().parents[3]


def _models(tutor: dict[str, object]) -> dict[str, object]:
    return {"tutor": {"model": "sim/tutor", **tutor}, "student": "sim/student", "judge": "sim/judge"}


def test_the_tightest_limit_sets_the_duration(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path, models=_models({"rpm": 120, "tpm": 60_000}))
    bound = expected_duration(scenario, {"tutor": CallEstimate(calls=1000, tokens=50_000)})
    assert bound is not None
    assert bound.seconds == pytest.approx(1000 / 120 * 60)  # 500 s from rpm; tpm allows it in 50 s
    assert "rpm 120" in bound.reason
    bound = expected_duration(scenario, {"tutor": CallEstimate(calls=10, tokens=500_000)})
    assert bound is not None and bound.seconds == pytest.approx(500_000 / 60_000 * 60) and "tpm" in bound.reason


def test_sim_latency_is_divided_by_the_calls_in_flight(tmp_path: Path) -> None:
    scenario = make_scenario(
        tmp_path, concurrency=32, models=_models({"params": {"latency_s": 0.1}, "max_concurrency": 4})
    )
    bound = expected_duration(scenario, {"tutor": CallEstimate(calls=1000, tokens=1)})
    assert bound is not None and bound.seconds == pytest.approx(1000 * 0.1 / 4)
    unlimited = make_scenario(tmp_path, concurrency=8, models=_models({"params": {"latency_s": 0.1}}))
    bound = expected_duration(unlimited, {"tutor": CallEstimate(calls=1000, tokens=1)})
    assert bound is not None and bound.seconds == pytest.approx(1000 * 0.1 / 8)


def test_nothing_to_bound_it_says_so(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path)
    assert expected_duration(scenario, {"tutor": CallEstimate(calls=1000, tokens=1)}) is None
    assert "no rate limit" in duration_text(scenario, {"tutor": CallEstimate(calls=1000, tokens=1)})


def test_dry_run_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's old trap: an rpm meant for a paid API throttles the sim tutor to an 8-minute run."""
    path = str(ROOT / "scenarios" / "crescendo.yaml")
    assert main([path, "--dry-run", "--set", "models.tutor.rpm=500"]) == 0
    out = capsys.readouterr().out
    calls = int(next(line for line in out.splitlines() if "│ tutor" in line).split("│")[3].strip().replace(",", ""))
    minutes, seconds = divmod(round(calls / 500 * 60), 60)
    assert f"expected duration: at least {minutes} min {seconds:02d} s (tutor rpm 500" in out
