"""Every rate states its unjudged count: a judge whose verdict stays malformed after its retries leaves the reply
out of the rate's n, and the kind's own table says how many it left out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import engine
from engine.runtime._rundir import RunDir
from tests.helpers import scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, data: dict[str, Any]) -> engine.RunResult:
    scenario = engine.build_scenario(data, base_dir=tmp_path)
    return engine.run_sync(scenario, out=tmp_path / "runs")


def test_crescendo_harm_cells_count_the_replies_the_harm_judge_left_unjudged(tmp_path: Path) -> None:
    write_bank(tmp_path / "bank.yaml")
    data = scenario_data(limit=8, concurrency=4, judge_votes=1)
    data["models"]["judge"] = [{"model": "sim/judge", "params": {"error_rate": 0.0, "invalid_rate": 0.6}}]
    result = _run(tmp_path, data)
    assert result.errors == 0
    records = list(RunDir(result.run_dir).iter_records())
    planted: Counter[str] = Counter()
    judged: Counter[str] = Counter()
    for record in records:
        fmt = record.condition.get("format", "multi")
        for j in record.judgments:
            if j.judge == "harm" and isinstance(j.target, int):
                if j.metric == "unjudged":
                    planted[fmt] += 1
                elif j.metric == "unsafe":
                    judged[fmt] += 1
    assert sum(planted.values()) > 0 and sum(judged.values()) > 0
    overall = {cell["format"]: cell for cell in result.summary["overall"]}
    assert {fmt: cell["unjudged"] for fmt, cell in overall.items()} == {fmt: planted[fmt] for fmt in overall}
    assert {fmt: cell["per_response"]["n"] for fmt, cell in overall.items()} == {fmt: judged[fmt] for fmt in overall}
    by_dimension: Counter[str] = Counter()
    for cell in result.summary["harm"]:
        by_dimension[cell["format"]] += cell["unjudged"]
    assert by_dimension == planted
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "| episodes | unjudged replies |" in report
    for fmt, cell in overall.items():
        assert f"| {cell['episodes']} | {planted[fmt]} |" in report
    for cell in result.summary["harm"]:
        if cell["unjudged"]:
            assert f"n={cell['per_response']['n']}, {cell['unjudged']} unjudged" in report


def test_fairness_judged_replies_state_the_tutor_replies_left_unjudged(tmp_path: Path) -> None:
    judge = "[{model: sim/judge, params: {error_rate: 0.0, invalid_rate: 0.6}}]"
    overrides = ["limit=4", "concurrency=4", "judge_votes=1", f"models.judge={judge}", "student.max_turns=4"]
    scenario = engine.load_scenario(ROOT / "scenarios" / "fairness.yaml", overrides=overrides)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    assert result.errors == 0
    records = list(RunDir(result.run_dir).iter_records())
    planted = 0
    for record in records:
        tutor = {t.index for t in record.turns if t.role == "tutor"}
        planted += len({j.target for j in record.judgments if j.metric == "unjudged" and j.target in tutor})
    assert planted > 0
    replies = result.summary["fairness"]["judged_replies"]
    assert replies["unjudged"] == planted
    sent = sum(int(r.metrics["judged_tutor_turns"] or 0) for r in records)
    assert replies["mean"] * replies["dialogues"] == pytest.approx(sent - planted)
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert f"| {replies['max']} | {planted} |" in report
    assert f"{planted} tutor replies were left unjudged" in report


def test_cases_success_and_deescalation_rows_state_the_unjudged(tmp_path: Path) -> None:
    judge = "[{model: sim/judge, params: {error_rate: 0.0, invalid_rate: 0.6}}]"
    overrides = ["limit=60", "replicates=1", "judge_votes=1", f"models.judge={judge}"]
    scenario = engine.load_scenario(ROOT / "scenarios" / "casebench.yaml", overrides=overrides)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    assert result.errors == 0
    records = list(RunDir(result.run_dir).iter_records())
    left_open: Counter[str] = Counter()
    left_dialogues = 0
    for r in records:
        unjudged = {j.target for j in r.judgments if j.metric == "unjudged"}
        turn = r.metrics.get("response_turn")
        if (
            r.metrics.get("task") == "open"
            and isinstance(turn, int)
            and r.judgment("case_success", turn) is None
            and turn in unjudged
        ):
            left_open[str(r.metrics.get("response"))] += 1
        if r.metrics.get("task") == "interactive" and r.judgment("deescalated", "conversation") is None:
            left_dialogues += "conversation" in unjudged
    assert sum(left_open.values()) > 0 and left_dialogues > 0
    cases = result.summary["cases"]
    overall = {row["response"]: row for row in cases["success"] if row["challenge_type"] == "all"}
    assert overall["overall"]["unjudged"] == sum(left_open.values())
    for response, n in left_open.items():
        assert overall[response]["unjudged"] == n
    pooled = next(row for row in cases["deescalation"] if row["by"] == "challenge_type" and row["group"] == "all")
    assert pooled["unjudged"] == left_dialogues
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    row = overall["overall"]
    assert f"({row['k']}/{row['n']}), {row['unjudged']} unjudged" in report
    assert f"({pooled['k']}/{pooled['n']}), {left_dialogues} unjudged" in report


def test_remath_conditions_state_the_replies_left_unjudged(tmp_path: Path) -> None:
    judge = "[{model: sim/judge, params: {error_rate: 0.0, invalid_rate: 0.6}}]"
    overrides = ["limit=40", "judge_votes=1", f"models.judge={judge}"]
    scenario = engine.load_scenario(ROOT / "scenarios" / "remath.yaml", overrides=overrides)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    assert result.errors == 0
    planted: Counter[str] = Counter()
    for r in RunDir(result.run_dir).iter_records():
        if r.condition.get("task", "response") == "response":
            planted[str(r.condition.get("given"))] += any(
                j.metric == "unjudged" and isinstance(j.target, int) for j in r.judgments
            )
    assert sum(planted.values()) > 0
    rows = {row["given"]: row for row in result.summary["remath"]["conditions"]}
    assert {given: row["unjudged"] for given, row in rows.items()} == {given: planted[given] for given in rows}
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "| replies | unjudged replies |" in report
    for row in rows.values():
        assert f"| {row['replies']} | {row['unjudged']} |" in report
