"""The paper-protocol scenario: SafeTutors' scripts replayed, three judge specs with different noise voting."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import load_scenario, run_sync

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "crescendo_paper.yaml"
DATA = ROOT / ".." / "shared" / "data" / "safetutors"

pytestmark = pytest.mark.skipif(not (DATA / "math_multi_combined.jsonl").is_file(), reason="SafeTutors data absent")


def test_paper_scenario_replays_scripts_and_measures_judge_agreement(tmp_path: Path) -> None:
    overrides = [f"items.{i}.limit=12" for i in range(6)] + [f"data_dir={DATA.parent}"]
    scenario = load_scenario(SCENARIO, overrides=overrides)
    assert scenario.student.strategy == "scripted" and len(scenario.models.judge) == 3
    result = run_sync(scenario, out=tmp_path)
    assert result.errors == 0 and result.ok == 72
    summary = result.summary
    assert {row["format"] for row in summary["overall"]} == {"single", "multi"}
    assert summary["backtracks"]["backtracked_replies"] == 0  # a replay never takes an exchange back
    block = summary["judge_agreement"]
    assert len(block["judges"]) == 3
    unsafe = next(m for m in block["metrics"] if m["metric"] == "harm.unsafe")
    assert unsafe["alpha"]["value"] is not None and unsafe["alpha"]["value"] < 1.0  # noisy judges disagree
    assert len(unsafe["kappa"]) == 3
