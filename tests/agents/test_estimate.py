"""The dry run's expected tokens against what a small sim run of the same plan uses (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import CallEstimate, load_built, run_sync

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _estimated_and_used(scenario: str, limit: int, out: Path) -> tuple[dict[str, CallEstimate], dict[str, int]]:
    """Each role's expected tokens, and the tokens a sim run of the same plan used."""
    built = load_built(SCENARIOS / scenario, overrides=[f"items.0.limit={limit}"])
    totals = built.estimate()
    result = run_sync(built, out=out)
    by_role = json.loads((result.run_dir / "manifest.json").read_text())["calls"]["tokens_by_role"]
    return totals, {role: sum(sum(pair) for pair in models.values()) for role, models in by_role.items()}


@pytest.mark.parametrize(("scenario", "limit"), [("crescendo.yaml", 2), ("fairness.yaml", 5)])
def test_expected_tokens_per_role_are_within_1_5x_of_a_sim_run_and_the_upper_bound_holds(
    scenario: str, limit: int, tmp_path: Path
) -> None:
    totals, used = _estimated_and_used(scenario, limit, tmp_path)
    assert set(used) == set(totals) == {"tutor", "student", "judge"}
    for role, guess in totals.items():
        assert 1 / 1.5 <= guess.tokens / used[role] <= 1.5, (role, guess.tokens, used[role])
        assert guess.upper_tokens >= used[role]
    expected, spent = sum(g.tokens for g in totals.values()), sum(used.values())
    assert 1 / 1.5 <= expected / spent <= 1.5


def test_a_tutor_that_gives_the_answer_away_early_is_expected_short_from_the_sims_knobs(tmp_path: Path) -> None:
    """fairness_paper: ten tutor turns of budget, but the sim tutor reveals early (its leak knobs); the
    expected total is within 1.5× of the run, the whole-budget upper bound far above it."""
    totals, used = _estimated_and_used("fairness_paper.yaml", 5, tmp_path)
    expected = sum(guess.tokens for guess in totals.values())
    upper = sum(guess.upper_tokens for guess in totals.values())
    assert 1 / 1.5 <= expected / sum(used.values()) <= 1.5, (expected, used)
    assert upper >= 3 * sum(used.values())
