"""The whole fairness pipeline, calibrated: a planted bias is found, and no bias is not invented."""

from __future__ import annotations

from pathlib import Path

from bench.fairness_calibration import TARGET, flagged


async def test_planted_bias_is_flagged_where_it_was_planted(tmp_path: Path) -> None:
    """More answer leakage under the 'immigrant' cue is flagged on exactly that dimension × metric pair."""
    planted = await flagged(seed=0, bias=0.3, out=tmp_path)
    assert planted["target"], f"{TARGET} not flagged"
    assert planted["other_dimensions"] == 0, "a dimension without a planted bias was flagged"


async def test_no_bias_stays_quiet(tmp_path: Path) -> None:
    """Without a plant the target is not flagged and few other contrasts are (nominal 5%)."""
    null = await flagged(seed=0, bias=0.0, out=tmp_path)
    assert not null["target"]
    assert null["others"] <= 0.10 * null["others_tested"]
