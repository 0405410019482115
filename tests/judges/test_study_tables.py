"""A study of several tutors, each kind's own cross-tutor tables: ReMath's Tables 3 and 8 with the Human row once,
crescendo's subject × dimension × tutor harm table, and the cases text statistics against success (Spearman
across tutors, its exact p checked by enumerating every ranking)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from scipy import stats

import engine

ROOT = Path(__file__).resolve().parents[2]
TWO = ["tutor={label: calm, model: sim/tutor}", "tutor={label: rash, model: sim/tutor, params: {leak_base: 0.6}}"]


def _study(tmp_path: Path, name: str, limit: int) -> tuple[dict[str, Any], Path]:
    scenario = engine.load_scenario(ROOT / "scenarios" / name, overrides=[f"limit={limit}"], models=TWO)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    return orjson.loads((result.run_dir / "summary.json").read_bytes()), result.run_dir


def _remath_run(tmp_path: Path, models: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]], Path]:
    scenario = engine.load_scenario(ROOT / "scenarios" / "remath.yaml", overrides=["limit=12"], models=models)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    lines = (result.run_dir / "episodes.jsonl").read_bytes().splitlines()
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    return summary, [orjson.loads(line) for line in lines], result.run_dir


def test_remath_study_plays_the_human_condition_once(tmp_path: Path) -> None:
    """`given: human` involves no tutor: two tutors' study plays it as often as one tutor does, with the same ids,
    seeds and judged replies, and its rows are read once, from the summary of those episodes."""
    _, alone, _ = _remath_run(tmp_path / "one", [])
    summary, records, run_dir = _remath_run(tmp_path / "two", TWO)
    human_alone = {r["id"]: r for r in alone if r["condition"].get("given") == "human"}
    human = {r["id"]: r for r in records if r["condition"].get("given") == "human"}
    assert human_alone and human.keys() == human_alone.keys()
    assert all("tutor" not in r for r in human.values())
    for key, record in human.items():
        assert record["seed"] == human_alone[key]["seed"] and record["turns"] == human_alone[key]["turns"]
        assert record["judgments"] == human_alone[key]["judgments"]
    played = [r for r in records if r["condition"].get("given") != "human"]
    assert sorted(r["tutor"] for r in played) == sorted(["calm", "rash"] * (len(alone) - len(human_alone)))
    models = summary["models"]
    tables, by_model = models["tables"], models["by_model"]
    shared_human = [c for c in models["shared"]["remath"]["conditions"] if c["given"] == "human"]
    assert len(shared_human) == 1 and tables["human"] == shared_human[0] and tables["human_from"] is None
    assert not any(c["given"] == "human" for s in by_model.values() for c in s["remath"]["conditions"])
    own = [(label, c["given"]) for label, s in by_model.items() for c in s["remath"]["conditions"]]
    assert [(c["tutor"], c["given"]) for c in tables["conditions"]] == own
    assert {r["given"] for r in tables["shared_automated"]} == {"human", "original"}
    planned = models["balance"]["calm"]["planned"]
    assert planned == len(alone) - len(human_alone) == models["balance"]["rash"]["planned"]
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert report.count("| expert | Human (expert reply)") == 2, "once in Table 3, once in Table 8"
    assert "Human (expert reply)" not in report.split("Tutor calm")[1].split("Paired differences")[0]


def test_remath_study_shows_the_teachers_agreement_once(tmp_path: Path) -> None:
    summary, _, run_dir = _remath_run(tmp_path, TWO)
    teachers = summary["models"]["tables"]["teachers"]
    by_model = summary["models"]["by_model"]
    expected = [
        {"label": row["label"], **row["human"]} for row in by_model["calm"]["remath"]["agreement"] if row["human"]
    ]
    assert teachers and teachers == expected
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    study, tutors = report.split("Tutor calm", 1)
    assert study.count("Human–human agreement (Tables 1–2)") == 1
    assert "| human–human |" not in tutors and "shown once for the study" in tutors


def test_joined_remath_runs_take_the_human_row_from_the_first_tutor(tmp_path: Path) -> None:
    """Runs made separately and joined each hold a copy of the Human row: the table takes the first tutor's."""
    from judges.remath_study import remath_study

    alone, _, _ = _remath_run(tmp_path, [])
    own = {"remath": alone["remath"]}
    found = remath_study({"calm": own, "rash": own})
    human = [c for c in alone["remath"]["conditions"] if c["given"] == "human"]
    assert found["human"] == human[0] and found["human_from"] == "calm" and found["human_differs"] is False
    played = [c["given"] for c in alone["remath"]["conditions"] if c["given"] != "human"]
    assert played and [c["given"] for c in found["conditions"]] == played * 2


def test_crescendo_study_puts_every_tutor_in_each_subject_dimension_cell(tmp_path: Path) -> None:
    summary, run_dir = _study(tmp_path, "crescendo.yaml", 3)
    tables = summary["models"]["tables"]
    for label, own in summary["models"]["by_model"].items():
        cells = {(c["subject"], c["dimension"], c["format"]): c for c in tables["harm"] if c["tutor"] == label}
        for c in own["by_subject_dimension"]:
            assert cells[(c["subject"], c["dimension"], c["format"])]["per_response"] == c["per_response"]
        for c in own["harm"]:
            assert cells[("all subjects", c["dimension"], c["format"])]["per_response"] == c["per_response"]
        counts = {(h["subject"], h["format"]): h["count"] for h in tables["high_harm"] if h["tutor"] == label}
        assert counts == {
            (h["subject"] or "all subjects", h["format"]): h["count"] for h in own["high_harm_dimensions"]
        }
    assert {h["tutor"]: h["hazard"] for h in tables["hazard"]} == {
        label: own["hazard"]["all"] for label, own in summary["models"]["by_model"].items()
    }
    assert [{k: v for k, v in p.items() if k != "tutor"} for p in tables["pedagogy"]] == [
        row for own in summary["models"]["by_model"].values() for row in own["pedagogy_by_subject"]
    ]
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "### Harm by subject × dimension × tutor" in report and "### Amplification per tutor" in report


def test_spearman_across_models_matches_every_ranking_enumerated() -> None:
    x, y = [0.2, 0.5, 0.4, 0.9, 0.7], [0.1, 0.3, 0.6, 0.8, 0.5]
    found = engine.spearman_across_models(x, y)
    assert found is not None
    rho = stats.spearmanr(x, y).statistic
    assert found.rho == pytest.approx(rho)
    every = [stats.spearmanr(x, list(p)).statistic for p in itertools.permutations(y)]
    assert found.p == pytest.approx(sum(abs(r) >= abs(rho) - 1e-12 for r in every) / len(every))
    assert found.min_p == pytest.approx(2 / 120) and found.readable
    assert found.low is not None and found.high is not None and found.low < rho < found.high


def test_four_models_can_never_give_a_readable_correlation() -> None:
    found = engine.spearman_across_models([1, 2, 3, 4], [1, 2, 3, 4])
    assert found is not None and found.rho == pytest.approx(1.0)
    assert found.p == pytest.approx(2 / 24) == found.min_p and not found.readable
    assert engine.spearman_across_models([1, 2], [2, 1]) is None
    assert engine.spearman_across_models([1, 2, 3], [5, 5, 5]) is None


def test_cases_study_correlates_each_text_statistic_with_success(tmp_path: Path) -> None:
    summary, _ = _study(tmp_path, "casebench.yaml", 6)
    rows = summary["models"]["tables"]["text_vs_success"]
    assert {r["statistic"] for r in rows} == {
        "distinct_3",
        "distinct_4",
        "distinct_5",
        "top_4gram_share",
        "case_recovery",
    }
    assert all(r["rho"] is None and not r["readable"] for r in rows), "two tutors give no correlation"
    rates = summary["models"]["tables"]["rates"]
    for label, own in summary["models"]["by_model"].items():
        success = {tuple(r["row"]): r["rate"] for r in rates if r["tutor"] == label and r["table"] == "success"}
        for row in own["cases"]["success"]:
            key = (row["response"], row["reference"], row["challenge_type"])
            assert success[key] == {k: row[k] for k in ("k", "n", "clusters", "rate", "low", "high", "method")}


def test_fairness_study_puts_each_tutors_mean_r_and_findings_side_by_side(tmp_path: Path) -> None:
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "fairness.yaml", overrides=["design.dimensions=[gender]"], models=TWO
    )
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    tables = summary["models"]["tables"]
    assert tables["tutors"] == ["calm", "rash"] and tables["means"]
    for label, own in summary["models"]["by_model"].items():
        means = {(m["domain"], m["row"]): m["mean_abs_r"] for m in tables["means"] if m["tutor"] == label}
        for d in own["fairness"]["mean_abs_r"]["by_dimension"]:
            assert means[(d["domain"], d["dimension"])] == d["mean_abs_r"]
        found = {f["domain"]: f["findings"] for f in tables["findings"] if f["tutor"] == label}
        findings = own["fairness"]["findings"]
        assert found == {d: sum(v["domain"] == d for v in findings) for d in found}
        assert sum(found.values()) >= len(findings)
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "### Mean |r| and findings per tutor × domain (EduFair Tables 5–8)" in report
