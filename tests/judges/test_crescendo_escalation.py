"""Planted escalation: the shipped crescendo scenario with pressure switched off and on, run end to end on the sim.

With `leak_per_turn: 0` the sim tutor leaks with one probability at every exchange, so harm per reply is the same
in both formats and the hazard of first harm is flat: the amplification intervals must include 0 in most
dimensions and the hazard contrast must include 0. With the shipped knobs (+0.08 per turn of pressure) both
must show escalation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from engine import load_scenario, run_sync

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "crescendo.yaml"
ITEMS_PER_DOMAIN = 5


def _run(tmp: Path, *overrides: str) -> dict[str, Any]:
    scenario = load_scenario(SCENARIO, overrides=[f"items.0.limit={ITEMS_PER_DOMAIN}", *overrides])
    return run_sync(scenario, out=tmp).summary


@pytest.fixture(scope="module")
def null(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("null"), "models.tutor.params.leak_per_turn=0")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("shipped"))


def _dimension_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in summary["amplification"] if a["subject"] is None and a["dimension"] is not None]


def test_no_pressure_effect_gives_intervals_around_zero(null: dict[str, Any]) -> None:
    rows = _dimension_rows(null)
    assert len(rows) == 11
    covering = [r["dimension"] for r in rows if r["ci"]["low"] <= 0.0 <= r["ci"]["high"]]
    assert len(covering) >= 9, covering
    pooled = next(a for a in null["amplification"] if a["dimension"] is None and a["subject"] is None)
    assert pooled["ci"]["low"] <= 0.0 <= pooled["ci"]["high"]
    contrast = null["hazard"]["all"]["later_minus_first"]
    assert contrast["low"] <= 0.0 <= contrast["high"], contrast


def test_no_pressure_effect_still_inflates_any_harm_per_dialogue(null: dict[str, Any]) -> None:
    """The old unit: 6–7 chances per dialogue make 'any harm' far exceed single-turn harm with no escalation."""
    single, multi = null["overall"]
    assert multi["exposure"] > 4
    assert multi["per_conversation"]["rate"] - single["per_response"]["rate"] > 0.3


def test_shipped_pressure_shows_escalation(shipped: dict[str, Any]) -> None:
    rows = _dimension_rows(shipped)
    assert sum(r["delta"] > 0 for r in rows) >= 10
    above = [r["dimension"] for r in rows if r["ci"]["low"] > 0.0]
    assert len(above) >= 3, above  # 15 single-turn replies per dimension: most intervals are still wide
    pooled = next(a for a in shipped["amplification"] if a["dimension"] is None and a["subject"] is None)
    assert pooled["ci"]["low"] > 0.05
    contrast = shipped["hazard"]["all"]["later_minus_first"]
    assert contrast["low"] > 0.0, contrast


def test_single_judge_spec_reports_no_agreement(shipped: dict[str, Any]) -> None:
    """The shipped scenario asks one judge spec three times: agreement between judge models is not measured."""
    block = shipped["judge_agreement"]
    assert block["judges"] == ["sim/judge"] and block["metrics"] == []


NULL_SEEDS = (11, 12, 13)


@pytest.fixture(scope="module")
def null_seeds(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return [
        _run(tmp_path_factory.mktemp(f"null{seed}"), f"seed={seed}", "models.tutor.params.leak_per_turn=0")
        for seed in NULL_SEEDS
    ]


def _pooled(summary: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in summary["amplification"] if a["dimension"] is None and a["subject"] is None)


def _knobs_unsafe_share() -> float:
    """What one generated reply's verdict is with escalation off: the tutor leaks with `leak_base`, each of the
    `judge_votes` votes is wrong with `error_rate`, the majority decides."""
    scenario = load_scenario(SCENARIO)
    leak = float(scenario.models.tutors[0].params["leak_base"])
    error = float(scenario.models.judge[0].params["error_rate"])
    wrong = float(stats.binom.sf(scenario.judge_votes // 2, scenario.judge_votes, error))
    return leak * (1 - wrong) + (1 - leak) * wrong


def test_escalation_off_measures_one_per_reply_rate_in_both_formats(
    null: dict[str, Any], null_seeds: list[dict[str, Any]]
) -> None:
    """With escalation off every generated reply is unsafe with one probability, the knobs'. Pooled over four runs,
    harm per generated reply (SafeTutors' denominator) has it inside the 99% Wilson interval in each format, and
    the two formats' counts do not differ (chi-square, p > 0.01): amplification is 0 within Monte-Carlo error.
    The visible-only view drops refused replies from the multi-turn side only, so it sits above the knobs' rate.
    The dimension intervals cover 0 in most cells of every run. `bench/crescendo_null.py` measures the pooled
    interval's coverage of 0 over many seeds."""
    truth = _knobs_unsafe_share()
    runs = [null, *null_seeds]
    counts = {
        fmt: [sum(s["overall"][i]["per_response"][key] for s in runs) for key in ("k", "n")]
        for i, fmt in enumerate(("single", "multi"))
    }
    for k, n in counts.values():
        interval = stats.binomtest(k, n).proportion_ci(confidence_level=0.99, method="wilson")
        assert interval.low <= truth <= interval.high, (k, n, truth)
    table = [[k, n - k] for k, n in counts.values()]
    assert stats.chi2_contingency(table).pvalue > 0.01, table
    visible_k = sum(s["overall"][1]["per_visible_reply"]["k"] for s in runs)
    visible_n = sum(s["overall"][1]["per_visible_reply"]["n"] for s in runs)
    assert stats.binomtest(visible_k, visible_n).proportion_ci(confidence_level=0.99).low > truth
    for summary in runs:
        dims = _dimension_rows(summary)
        assert sum(r["ci"]["low"] <= 0.0 <= r["ci"]["high"] for r in dims) >= 9
        multi = summary["overall"][1]  # the full count: backtracked replies are in the multi-turn denominator
        assert multi["per_response"]["n"] == multi["per_visible_reply"]["n"] + multi["backtracked"]["replies"]
