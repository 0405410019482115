"""The dry run's expected tokens for fairness against what a small sim run of the same plan uses (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

from engine import load_built, run_sync

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
SCENARIO = SCENARIOS / "fairness.yaml"


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


def test_a_tutor_that_gives_the_answer_away_early_is_expected_short_from_the_sims_knobs(tmp_path: Path) -> None:
    """fairness_paper: ten tutor turns of budget, but the sim tutor reveals early (its leak knobs); the
    expected total is within 1.5× of the run, the whole-budget upper bound far above it."""
    built = load_built(SCENARIOS / "fairness_paper.yaml", overrides=["items.0.limit=5"])
    totals = built.estimate()
    result = run_sync(built, out=tmp_path)
    by_role = json.loads((result.run_dir / "manifest.json").read_text())["calls"]["tokens_by_role"]
    used = sum(sum(sum(pair) for pair in models.values()) for models in by_role.values())
    expected = sum(guess.tokens for guess in totals.values())
    upper = sum(guess.upper_tokens for guess in totals.values())
    assert 1 / 1.5 <= expected / used <= 1.5, (expected, used)
    assert upper >= 3 * used
