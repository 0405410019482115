"""The dry run's expected tokens for fairness against what a small sim run of the same plan uses (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

from engine import load_built, run_sync

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "fairness.yaml"


def test_expected_tokens_per_role_are_within_1_5x_of_a_sim_run_and_the_upper_bound_holds(tmp_path: Path) -> None:
    built = load_built(SCENARIO, overrides=["items.0.limit=5"])
    totals = built.estimate()
    result = run_sync(built, out=tmp_path)
    by_role = json.loads((result.run_dir / "manifest.json").read_text())["calls"]["tokens_by_role"]
    used = {role: sum(sum(pair) for pair in models.values()) for role, models in by_role.items()}
    assert set(used) == set(totals) == {"tutor", "student", "judge"}
    for role, guess in totals.items():
        assert 1 / 1.5 <= guess.tokens / used[role] <= 1.5, (role, guess.tokens, used[role])
        assert guess.upper_tokens >= used[role]
