"""The cases summary: planted effects are found, null effects are not, and reports rebuild from records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from rich.console import Console
from scipy import stats

from engine import SUMMARIZERS, derive_seed, load_scenario, run_sync, write_report
from engine.cli._main import main

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "casebench.yaml"


def _summary(tmp_path: Path, *overrides: str) -> dict[str, Any]:
    result = run_sync(load_scenario(SCENARIO, overrides=list(overrides)), out=tmp_path)
    assert result.exit_code == 0
    return result.summary


def _gain(summary: dict[str, Any], metric: str = "success", response: str = "all") -> dict[str, Any]:
    return next(r for r in summary["cases"]["reference_gain"] if r["metric"] == metric and r["response"] == response)


def test_a_planted_reference_gain_is_detected_and_none_is_not(tmp_path: Path) -> None:
    """case_reference_boost raises the effective-strategy chance only when references are in the prompt."""
    planted = _summary(tmp_path / "a", "design.tasks=[open]", "models.tutor.params.case_reference_boost=0.5")
    null = _summary(tmp_path / "b", "design.tasks=[open]", "models.tutor.params.case_reference_boost=0")
    gain = _gain(planted)
    assert gain["n"] == 15 and gain["status"] == "ok"
    assert gain["gain"] > 0.25 and gain["ci_low"] > 0 and gain["finding"] and gain["p"] < 0.01
    assert gain["mean_retrieved"] - gain["mean_none"] == pytest.approx(gain["gain"])
    quiet = _gain(null)
    assert abs(quiet["gain"]) < 0.15 and quiet["ci_low"] <= 0 <= quiet["ci_high"]
    for summary in (planted, null):  # a finding is the family's BH-adjusted p ≤ 0.05, not a lone interval
        rows = [r for r in summary["cases"]["reference_gain"] if r["status"] == "ok" and r["r"] is not None]
        expected = stats.false_discovery_control([r["p"] for r in rows], method="bh")
        assert [r["p_family"] for r in rows] == pytest.approx(list(expected))
        assert [r["finding"] for r in rows] == [bool(q <= 0.05) for q in expected]
    assert not any(r["finding"] for r in null["cases"]["reference_gain"])


def test_the_pooled_reference_gain_pairs_each_case_once(tmp_path: Path) -> None:
    """Both response types answer the same case, so the pooled row averages them per case: n is the number of
    cases (not cases × response types), and its retrieved mean is the mean of those per-case averages."""
    result = run_sync(load_scenario(SCENARIO, overrides=["design.tasks=[open]"]), out=tmp_path)
    records = [orjson.loads(line) for line in (result.run_dir / "episodes.jsonl").read_bytes().splitlines()]
    cases = {r["item_id"] for r in records}
    rows = [r for r in result.summary["cases"]["reference_gain"] if r["metric"] == "success"]
    assert {r["response"]: r["n"] for r in rows} == dict.fromkeys(("immediate", "long_term", "all"), len(cases))
    per_case: dict[str, list[float]] = {}
    for record in records:
        if record["metrics"].get("reference") == "retrieved":
            success = next(
                j["value"]
                for j in record["judgments"]
                if j["metric"] == "case_success" and j["target"] == record["metrics"]["response_turn"]
            )
            per_case.setdefault(record["item_id"], []).append(float(success))
    pooled = next(r for r in rows if r["response"] == "all")
    assert pooled["mean_retrieved"] == pytest.approx(sum(sum(v) / len(v) for v in per_case.values()) / len(cases))


def test_mcq_accuracy_is_tested_against_chance(tmp_path: Path) -> None:
    """At chance accuracy the per-case test does not reject; at 90% it does."""
    tasks = "design.tasks=[mcq4, binary]"
    at_chance = _summary(tmp_path / "a", tasks, "models.tutor.params.mcq_accuracy=0.25")
    good = _summary(tmp_path / "b", tasks, "models.tutor.params.mcq_accuracy=0.9")

    def row(summary: dict[str, Any], variant: str) -> dict[str, Any]:
        return next(
            r
            for r in summary["cases"]["mcq"]
            if r["variant"] == variant and r["response"] == "all" and r["challenge_type"] == "all"
        )

    assert row(at_chance, "mcq4")["chance"] == 0.25 and row(at_chance, "mcq4")["n"] == 120
    assert row(at_chance, "mcq4")["clusters"] == 15
    assert row(at_chance, "mcq4")["p_vs_chance"] > 0.05
    assert row(good, "mcq4")["rate"] > 0.75 and row(good, "mcq4")["p_vs_chance"] < 0.001
    assert row(good, "binary")["chance"] == 0.5 and row(good, "binary")["p_vs_chance"] < 0.001


def test_the_summary_tables(tmp_path: Path) -> None:
    """Success per challenge type × response (and overall) × reference with case-clustered intervals, criteria,
    de-escalation, diversity; a rebuild from the records gives the same summary; both renderers show the tables."""
    result = run_sync(load_scenario(SCENARIO, overrides=["replicates=1"]), out=tmp_path)
    summary = result.summary["cases"]
    assert summary["challenge_types"][0] == "task_resistance" and len(summary["challenge_types"]) == 5
    cells = {(r["challenge_type"], r["response"], r["reference"]): r for r in summary["success"]}
    assert len(cells) == 6 * 3 * 2 and cells[("all", "immediate", "none")]["n"] == 15
    overall = cells[("all", "overall", "none")]
    assert overall["n"] == 30 and overall["clusters"] == 15
    assert overall["k"] == cells[("all", "immediate", "none")]["k"] + cells[("all", "long_term", "none")]["k"]
    assert all(r["low"] <= r["rate"] <= r["high"] for r in summary["success"])
    assert {r["group"] for r in summary["deescalation"] if r["by"] == "challenge_type"} >= {"all", "task_resistance"}
    assert all(0 < r["distinct_4"] <= 1 for r in summary["diversity"])
    before = (result.run_dir / "summary.json").read_bytes()
    rebuilt = write_report(result.run_dir)
    assert orjson.loads(before) == orjson.loads(orjson.dumps(rebuilt))
    markdown = (result.run_dir / "report.md").read_text(encoding="utf-8")
    for heading in ("success rate", "Criterion satisfaction", "Multiple choice", "Reference gain", "de-escalation"):
        assert heading in markdown
    console = Console(record=True, width=200)
    console.print(SUMMARIZERS.get("cases").render_console(rebuilt))
    text = console.export_text()
    assert "Reference gain" in text and "accuracy vs chance" in text and "task_resistance" in text


def test_cli_runs_the_shipped_scenario_and_rebuilds_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: `simrun scenarios/casebench.yaml --limit N`, then `simrun report RUN_DIR`."""
    assert main(["validate", str(SCENARIO)]) == 0
    assert main([str(SCENARIO), "--limit", "40", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "success rate" in printed and "not from a language model" in printed
    (run_dir,) = tmp_path.iterdir()
    assert len((run_dir / "episodes.jsonl").read_text().splitlines()) == 40
    assert main(["report", str(run_dir)]) == 0
    assert "wrote" in capsys.readouterr().out


def test_success_intervals_resample_cases_not_replies(tmp_path: Path) -> None:
    """Replicates of a case are one cluster: the overall cell's interval is the cluster bootstrap over cases,
    recomputed here from the records with scipy's bootstrap."""
    result = run_sync(load_scenario(SCENARIO, overrides=["design.tasks=[open]"]), out=tmp_path)
    overall = next(
        r
        for r in result.summary["cases"]["success"]
        if (r["challenge_type"], r["response"], r["reference"]) == ("all", "overall", "none")
    )
    per_case: dict[str, list[int]] = {}
    for line in (result.run_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        record = orjson.loads(line)
        if record["metrics"].get("reference") != "none":
            continue
        turn = record["metrics"]["response_turn"]
        success = next(j["value"] for j in record["judgments"] if j["metric"] == "case_success" and j["target"] == turn)
        per_case.setdefault(record["item_id"], []).append(int(success))
    assert overall["clusters"] == len(per_case) == 15 and overall["n"] == 15 * 2 * 2  # 2 replicates × 2 responses
    cases = sorted(per_case)
    k = np.array([sum(per_case[c]) for c in cases], dtype=float)
    n = np.array([len(per_case[c]) for c in cases], dtype=float)
    assert overall["rate"] == pytest.approx(k.sum() / n.sum())
    seed = derive_seed(20261129, "success", "all", "overall", "none")  # the scenario's seed
    boot = stats.bootstrap(
        (k, n),
        lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=10_000,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    assert overall["method"] == "cluster_bootstrap"
    assert overall["low"] == pytest.approx(boot.confidence_interval.low)
    assert overall["high"] == pytest.approx(boot.confidence_interval.high)
