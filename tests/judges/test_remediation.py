"""Task C's two-order pairwise judge, Tasks A/B scoring, and the remediation summary and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from engine import EpisodeRecord, build_scenario, run_sync, write_report
from engine.cli._main import main
from engine.stats._agreement import agreement
from judges.remediation import PairwiseVerdict, combine_orders, label_agreement
from tests.agents.test_remath import remath_data

ROOT = Path(__file__).resolve().parents[2]


def _verdict(score: int) -> PairwiseVerdict:
    return PairwiseVerdict(usefulness=score, care=score, human=score, preference=score)


def test_orders_combine_with_the_swapped_sign() -> None:
    # The reply is truly better by 1; the judge adds +1 to whatever it sees second.
    second = [_verdict(2), _verdict(2)]  # reply shown as B: 1 + 1
    first = [_verdict(0), _verdict(0)]  # reply shown as A: -1 + 1
    found = {j.metric: j for j in combine_orders(second, first, judge="remath_pairwise", target=4)}
    assert found["pairwise_preference"].value == 1.0
    assert found["pairwise_position_bias"].value == 1.0
    assert found["pairwise_care"].votes == [{"reply_second": 2}] * 2 + [{"reply_first": 0}] * 2


def test_verdicts_accept_integral_numbers_only_in_range() -> None:
    assert PairwiseVerdict.model_validate({"usefulness": "+1", "care": 2.0, "human": 0, "preference": -2}).care == 2
    with pytest.raises(ValueError):
        PairwiseVerdict.model_validate({"usefulness": 3, "care": 0, "human": 0, "preference": 0})
    with pytest.raises(ValueError):
        PairwiseVerdict.model_validate({"usefulness": 0.5, "care": 0, "human": 0, "preference": 0})


def _run(tmp_path: Path, bias: float, **overrides: Any) -> dict[str, Any]:
    judge = [{"model": "sim/judge", "params": {"error_rate": 0.0, "position_bias": bias}}]
    models = {"tutor": {"model": "sim/tutor", "params": {"leak_base": 0.3}}, "judge": judge}
    design = {"name": "remath", "tasks": ["response"], "given": ["none", "error", "strategy", "both"]}
    judges = [{"name": "remath_pairwise", "against": "reference"}, "answer_leak"]
    data = remath_data(models=models, design=design, **{"judges": judges, **overrides})
    result = run_sync(build_scenario(data, base_dir=tmp_path), out=tmp_path / f"runs{bias}")
    assert result.errors == 0
    summary: dict[str, Any] = result.summary
    summary["run_dir"] = result.run_dir
    return summary


def test_both_orders_cancel_a_position_bias(tmp_path: Path) -> None:
    fair, biased = _run(tmp_path, 0.0), _run(tmp_path, 1.0)
    for a, b in zip(fair["remath"]["conditions"], biased["remath"]["conditions"], strict=True):
        assert a["position_bias"] == 0.0 and b["position_bias"] > 0.4
        # scores clip at ±2, so a bias of +1 does not cancel exactly at the ends of the scale
        assert b["preference"]["mean"] == pytest.approx(a["preference"]["mean"], abs=0.3)
    records = [
        EpisodeRecord.model_validate_json(line)
        for line in (biased["run_dir"] / "episodes.jsonl").read_text().splitlines()
    ]
    one_order = [
        v["reply_second"]
        for r in records
        for j in r.judgments
        if j.metric == "pairwise_preference"
        for v in j.votes
        if "reply_second" in v
    ]
    combined = [
        float(j.value)
        for r in records
        for j in r.judgments
        if j.metric == "pairwise_preference" and j.value is not None
    ]
    assert sum(one_order) / len(one_order) > sum(combined) / len(combined) + 0.5  # one order alone is biased


def test_planted_quality_orders_the_conditions(tmp_path: Path) -> None:
    summary = _run(tmp_path, 0.0)["remath"]
    means = {row["given"]: row["overall"]["mean"] for row in summary["conditions"]}
    assert means["both"] > means["none"]
    leaks = {row["given"]: row["answer_leak"]["rate"] for row in summary["conditions"]}
    assert leaks["strategy"] == leaks["both"] == 0.0 and leaks["none"] > 0
    friedman = next(d for d in summary["differences"] if d["metric"] == "overall" and d["test"] == "friedman")
    assert friedman["status"] == "ok" and friedman["p"] < 0.05
    both_none = next(
        d for d in summary["differences"] if d["metric"] == "overall" and (d["a"], d["b"]) == ("both", "none")
    )
    assert both_none["r"] > 0 and both_none["ci_low"] > 0
    tested = [d for d in summary["differences"] if d["status"] == "ok" and d["r"] is not None]
    expected = stats.false_discovery_control([d["p"] for d in tested], method="bh")
    assert [d["p_family"] for d in tested] == pytest.approx(list(expected))
    assert [d["finding"] for d in tested] == [bool(q <= 0.05) for q in expected]
    assert both_none["finding"]


def test_answer_leak_rate_clusters_replicates_on_their_item(tmp_path: Path) -> None:
    """Three replicates of one item share its mistake: the rate counts replies, the interval resamples items."""
    summary = _run(tmp_path, 0.0, replicates=3)
    records = [
        EpisodeRecord.model_validate_json(line)
        for line in (summary["run_dir"] / "episodes.jsonl").read_text().splitlines()
    ]
    for row in summary["remath"]["conditions"]:
        group = [r for r in records if r.condition.get("given") == row["given"]]
        leaks = [j.value is True for r in group for j in r.judgments if j.metric == "answer_leak"]
        leak = row["answer_leak"]
        assert (leak["k"], leak["n"]) == (sum(leaks), len(leaks))
        assert leak["clusters"] == len({r.item_id for r in group}) == len(group) // 3


def test_label_agreement_matches_engine_agreement(tmp_path: Path) -> None:
    data = remath_data(design={"name": "remath", "tasks": ["error"]}, judges=[])
    result = run_sync(build_scenario(data, base_dir=tmp_path), out=tmp_path / "runs")
    records = [
        EpisodeRecord.model_validate_json(x) for x in (result.run_dir / "episodes.jsonl").read_text().splitlines()
    ]
    row = label_agreement(records, "error")
    gold = [str(r.metrics["error_gold"]) for r in records]
    pred = [str(r.metrics["error_pred"]) for r in records]
    direct = agreement(gold, pred, row.labels)
    assert (row.match, row.kappa) == (direct.accuracy, direct.kappa)
    assert row.match == sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)


def test_report_rebuilds_the_same_summary(tmp_path: Path) -> None:
    result = run_sync(build_scenario(remath_data(), base_dir=tmp_path), out=tmp_path / "runs")
    before = json.loads((result.run_dir / "summary.json").read_text())
    (result.run_dir / "summary.json").unlink()
    write_report(result.run_dir)
    assert json.loads((result.run_dir / "summary.json").read_text()) == before
    report = (result.run_dir / "report.md").read_text()
    assert "## Tasks A and B" in report and "## Task C: paired differences" in report


def test_shipped_scenario_runs_and_prints_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["run", str(ROOT / "scenarios" / "remath.yaml"), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "Tasks A/B" in printed and "Task C" in printed and "paired differences" in printed
    (run_dir,) = tmp_path.iterdir()
    assert main(["report", str(run_dir)]) == 0
