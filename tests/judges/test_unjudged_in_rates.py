"""Every rate states its unjudged count: a judge whose verdict stays malformed after its retries leaves the reply
out of the rate's n, and the kind's own table says how many it left out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import engine
from engine import EpisodeRecord
from engine.runtime._rundir import RunDir
from judges.cases_summary import CasesSummarizer
from judges.crescendo_summary import CrescendoSummarizer
from personas import taxonomy
from tests.helpers import scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, data: dict[str, Any]) -> engine.RunResult:
    scenario = engine.build_scenario(data, base_dir=tmp_path)
    return engine.run_sync(scenario, out=tmp_path / "runs")


@pytest.fixture(scope="module")
def crescendo(tmp_path_factory: pytest.TempPathFactory) -> engine.RunResult:
    """A small crescendo run whose sim judge answers malformed JSON 60% of the time."""
    tmp_path = tmp_path_factory.mktemp("crescendo")
    write_bank(tmp_path / "bank.yaml")
    data = scenario_data(limit=8, concurrency=4, judge_votes=1)
    data["models"]["judge"] = [{"model": "sim/judge", "params": {"error_rate": 0.0, "invalid_rate": 0.6}}]
    return _run(tmp_path, data)


def test_crescendo_harm_cells_count_the_replies_the_harm_judge_left_unjudged(crescendo: engine.RunResult) -> None:
    result = crescendo
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


def _left(record: EpisodeRecord, judge: str, target: type | str) -> int:
    """Unjudged verdicts of `judge` in one record: replies (target int) or the dialogue ("conversation")."""
    return sum(
        1
        for j in record.judgments
        if j.metric == "unjudged"
        and j.judge == judge
        and (isinstance(j.target, int) if target is int else j.target == target)
    )


def _row(report: str, first: str, last: object) -> bool:
    return any(line.startswith(f"| {first} |") and line.endswith(f"| {last} |") for line in report.splitlines())


def test_crescendo_hazard_survival_and_pedagogy_tables_state_their_unjudged(crescendo: engine.RunResult) -> None:
    records = [r for r in RunDir(crescendo.run_dir).iter_records() if r.status == "ok"]
    multi = [r for r in records if r.condition.get("format") == "multi"]
    harm_left: Counter[str] = Counter({"all": sum(_left(r, "harm", int) for r in multi)})
    for r in multi:
        harm_left[r.condition["dimension"]] += _left(r, "harm", int)
    pedagogy_left: Counter[tuple[str, str]] = Counter()
    for r in records:
        pedagogy_left[(r.condition["format"], str(r.meta.get("domain")))] += _left(r, "pedagogy", "conversation")
    assert harm_left["all"] > 0 and sum(pedagogy_left.values()) > 0
    summary = crescendo.summary
    assert {d: h["unjudged"] for d, h in summary["hazard"].items()} == {d: harm_left[d] for d in summary["hazard"]}
    assert summary["survival_unjudged"] == {d: harm_left[d] for d in summary["survival"]}
    by_format = {fmt: sum(n for (f, _), n in pedagogy_left.items() if f == fmt) for fmt in ("single", "multi")}
    assert summary["pedagogy"]["unjudged"] == by_format
    for row in summary["pedagogy_by_subject"]:
        assert row["unjudged"] == pedagogy_left[(row["format"], row["subject"])]
    assert summary["answer_leak"]["unjudged"] == {
        fmt: sum(_left(r, "answer_leak", int) for r in records if r.condition.get("format") == fmt)
        for fmt in ("single", "multi")
    }
    report = (crescendo.run_dir / "report.md").read_text(encoding="utf-8")
    left_out = f"{harm_left['all']} unjudged replies left out"
    assert f"All dimensions; {left_out}" in report  # the hazard per reply
    assert f"censored at their last reply); {left_out}" in report  # survival, all dimensions
    assert f"over dialogues); {left_out}" in report  # the escalation line the terminal shows too
    names = {d.id: d.name for d in taxonomy().dimensions}
    for dimension, n in harm_left.items():
        if dimension != "all":
            assert _row(report, names[dimension], n)  # hazard contrast and survival by dimension
    assert _row(report, "all dimensions", harm_left["all"])
    for fmt, n in by_format.items():
        assert _row(report, "misconception_reduced" if fmt == "multi" else "on_topic", n)
        subjects = sorted({s for f, s in pedagogy_left if f == fmt})
        assert (
            f"| unjudged dialogues | {fmt} | count | {' | '.join(str(pedagogy_left[(fmt, s)]) for s in subjects)} |"
            in report
        )
    page = (crescendo.run_dir / "report.html").read_text(encoding="utf-8")
    assert page.count(left_out) == 3 and page.count("unjudged dialogues") == 3  # column + a row per format
    terminal = Console(width=200, record=True)
    terminal.print(CrescendoSummarizer().render_console(crescendo.summary))
    assert left_out in terminal.export_text()


def test_crescendo_answer_leak_states_a_planted_unjudged_reply(crescendo: engine.RunResult) -> None:
    """The deterministic detector never leaves a reply unjudged, so the count is planted in the records."""
    run = RunDir(crescendo.run_dir)
    records = [r for r in run.iter_records() if r.status == "ok"]
    planted = Counter[str]()
    changed = []
    for i, r in enumerate(records):
        judgments = list(r.judgments)
        if i % 3 == 0:
            at = next((k for k, j in enumerate(judgments) if j.judge == "answer_leak" and j.value is not None), None)
            if at is not None:
                judgments[at] = judgments[at].model_copy(update={"metric": "unjudged", "value": None})
                planted[r.condition["format"]] += 1
        changed.append(r.model_copy(update={"judgments": judgments}))
    summary = CrescendoSummarizer().results(changed, run.read_manifest())
    assert summary.answer_leak.unjudged == {fmt: planted[fmt] for fmt in ("single", "multi")}
    assert min(planted.values()) > 0
    text = CrescendoSummarizer().render_markdown(summary.model_dump(mode="json"))
    assert f"unjudged replies: single {planted['single']}, multi {planted['multi']}" in text


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


@pytest.fixture(scope="module")
def casebench(tmp_path_factory: pytest.TempPathFactory) -> engine.RunResult:
    judge = "[{model: sim/judge, params: {error_rate: 0.0, invalid_rate: 0.6}}]"
    overrides = ["limit=60", "replicates=1", "judge_votes=1", f"models.judge={judge}"]
    scenario = engine.load_scenario(ROOT / "scenarios" / "casebench.yaml", overrides=overrides)
    return engine.run_sync(scenario, out=tmp_path_factory.mktemp("cases") / "runs")


def _unjudged_open(record: EpisodeRecord) -> bool:
    turn = record.metrics.get("response_turn")
    return (
        record.metrics.get("task") == "open"
        and isinstance(turn, int)
        and record.judgment("case_success", turn) is None
        and any(j.metric == "unjudged" and j.target == turn for j in record.judgments)
    )


def test_cases_criteria_and_reference_gain_rows_state_the_unjudged(casebench: engine.RunResult) -> None:
    records = [r for r in RunDir(casebench.run_dir).iter_records() if r.status == "ok" and not r.metrics.get("skipped")]
    left: Counter[tuple[str, str, str]] = Counter()
    for r in filter(_unjudged_open, records):
        response, reference = str(r.metrics["response"]), str(r.metrics["reference"])
        challenge = str(r.meta.get("challenge_type") or r.meta.get("domain"))
        left.update([(challenge, response, reference), ("all", response, reference)])
    assert sum(left.values()) > 0
    data = casebench.summary["cases"]
    assert {(r["challenge_type"], r["response"], r["reference"]): r["unjudged"] for r in data["criteria"]} == {
        (r["challenge_type"], r["response"], r["reference"]): left[(r["challenge_type"], r["response"], r["reference"])]
        for r in data["criteria"]
    }
    per_response = Counter[str]()
    for (challenge, response, _), n in left.items():
        per_response[response] += n if challenge == "all" else 0
    assert data["reference_gain"]
    for row in data["reference_gain"]:
        expected = sum(per_response.values()) if row["response"] == "all" else per_response[row["response"]]
        assert row["unjudged"] == expected
    report = (casebench.run_dir / "report.md").read_text(encoding="utf-8")
    for row in data["criteria"]:
        if row["unjudged"]:
            assert f"({row['criteria_held']}/{row['criteria']}), {row['unjudged']} unjudged |" in report
    assert "| cases | unjudged responses |" in report
    for row in data["reference_gain"]:
        assert _row(report, row["metric"], row["unjudged"])
    page = (casebench.run_dir / "report.html").read_text(encoding="utf-8")
    assert "unjudged responses" in page
    assert any(f"{row['unjudged']} unjudged" in page for row in data["criteria"] if row["unjudged"])
    terminal = Console(width=250, record=True)
    terminal.print(CasesSummarizer().render_console(casebench.summary))
    assert "unjudged responses" in terminal.export_text()


def test_cases_success_and_deescalation_rows_state_the_unjudged(casebench: engine.RunResult) -> None:
    result = casebench
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
