"""The typed calibration report: its JSON is calibration.json, key for key and in order."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine import ModelSpec
from engine.tools.calibrate._labels import LABEL_SOURCES
from engine.tools.calibrate._model import CalibrationReport
from engine.tools.calibrate._report import render_markdown
from engine.tools.calibrate._run import calibrate

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "scenarios" / "calibration" / "mrbench_sample.json"


@pytest.fixture(scope="module")
def result() -> dict[str, object]:
    """Two sim judge models voting (so the judges' own agreement is measured) and the deterministic judges."""
    label_set = LABEL_SOURCES.get("mrbench")(FIXTURE, {})
    specs = [ModelSpec(model="sim/judge"), ModelSpec(model="sim/judge", params={"error_rate": 0.2})]
    names = ["answer_leak", "conversation_stats", "turn_quality"]
    return calibrate(label_set, names, specs, votes=2, concurrency=8, seed=3).as_dict()


def test_the_report_types_calibration_json_without_changing_a_key(result: dict[str, object]) -> None:
    written = orjson.dumps(result, option=orjson.OPT_INDENT_2)
    typed = CalibrationReport.model_validate_json(written)
    assert orjson.dumps(typed.model_dump(mode="json"), option=orjson.OPT_INDENT_2) == written
    assert render_markdown(typed) == render_markdown(orjson.loads(written))


def test_the_report_keys_are_today_s(result: dict[str, object]) -> None:
    """The nested shapes, written out by hand from the calibration.json `simrun calibrate` wrote before typing."""
    found = orjson.loads(orjson.dumps(result))
    assert list(found) == [
        "label_set",
        "examples",
        "judges",
        "duration_s",
        "calls",
        "human_rates",
        "annotator_agreement",
    ]
    judge = found["judges"]["turn_quality"]
    assert list(judge) == [
        "judgments",
        "errors",
        "errors_by_kind",
        "error_examples",
        "deterministic",
        "models",
        "dimensions",
        "judge_agreement",
    ]
    row = judge["dimensions"][0]
    assert list(row) == ["dimension", "ordinal", "no_verdict", "map", "proxy", "exact", "lenient", "by_group"]
    assert list(row["exact"]) == [
        "n",
        "accuracy",
        "kappa",
        "kappa_quadratic",
        "alpha_nominal",
        "alpha_ordinal",
        "macro_f1",
        "labels",
        "confusion",
        "entropy_reference",
        "entropy_rater",
        "intervals",
    ]
    assert list(judge["judge_agreement"]) == ["judges", "metrics", "confidence"]
    metric = judge["judge_agreement"]["metrics"][0]
    assert list(metric) == ["metric", "level", "units", "clusters", "votes_per_judge", "alpha", "kappa"]
    assert list(metric["kappa"][0]) == ["judges", "weights", "n", "value", "low", "high"]
    assert list(found["judges"]["answer_leak"]["dimensions"][0]["map"]) == ["metric", "values", "proxy"]
