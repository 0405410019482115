"""The typed crescendo summary: summary.json's crescendo part is its JSON, key for key and in order, in the shapes a
crescendo run wrote before it was typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import run_sync
from engine.runtime._rundir import RunDir
from judges.crescendo_model import CrescendoSummary
from judges.crescendo_summary import CrescendoSummarizer
from tests.helpers import make_scenario

CELL = [
    "episodes",
    "per_response",
    "per_visible_reply",
    "per_conversation",
    "exposure",
    "unjudged",
    "backtracked",
    "format",
]
CLUSTERED = ["k", "n", "clusters", "rate", "low", "high", "method"]
WILSON = ["k", "n", "rate", "low", "high"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    """A small crescendo run on the sim (both formats, several dimensions and subjects, backtracks)."""
    base = tmp_path_factory.mktemp("crescendo")
    return RunDir(Path(run_sync(make_scenario(base), out=base / "runs").run_dir))


@pytest.fixture(scope="module")
def written(run: RunDir) -> dict[str, Any]:
    found: dict[str, Any] = orjson.loads((run.path / "summary.json").read_bytes())
    return found


def test_the_summary_types_without_changing_a_key(run: RunDir, written: dict[str, Any]) -> None:
    records, manifest = list(run.iter_records()), run.read_manifest()
    typed = CrescendoSummarizer().results(records, manifest)
    assert isinstance(typed, CrescendoSummary)
    untyped = orjson.loads(orjson.dumps(typed.model_dump(mode="json")))
    assert list(written) == [
        "run",
        *CrescendoSummary.model_fields,
        "judge_agreement",
        "judging",
        "provenance",
        "sequential",
    ]
    assert {key: written[key] for key in untyped} == untyped
    assert CrescendoSummary.model_validate({k: written[k] for k in untyped}) == typed
    assert CrescendoSummarizer().render_markdown(written) == CrescendoSummarizer().render_markdown(untyped)


def test_the_summary_keys_are_today_s(written: dict[str, Any]) -> None:
    """The nested shapes, written out by hand from the summary.json a crescendo run wrote before typing."""
    assert list(written["harm"][0]) == ["dimension", *CELL]
    assert list(written["harm_by_domain"][0]) == ["domain", *CELL]
    assert list(written["by_subject_dimension"][0]) == ["subject", "dimension", *CELL]
    assert list(written["overall"][0]) == CELL
    assert list(written["harm"][0]["per_response"]) == CLUSTERED
    assert list(written["harm"][0]["per_conversation"]) == WILSON
    assert list(written["high_harm_dimensions"][0]) == ["subject", "format", "count", "of", "dimensions"]
    assert list(written["amplification"][0]) == [
        "dimension",
        "subject",
        "single_rate",
        "multi_rate",
        "delta",
        "ci",
        "single_replies",
        "multi_replies",
        "multi_dialogues",
        "visible_only",
    ]
    assert list(written["amplification"][0]["ci"]) == ["low", "high", "method", "confidence"]
    hazard = written["hazard"]["all"]
    assert list(hazard) == ["per_turn", "first", "later", "later_minus_first", "unjudged"]
    assert list(hazard["per_turn"][0]) == ["turn", "at_risk", "events", "hazard", "low", "high"]
    assert list(written["survival"]["all"][0]) == ["turn", "at_risk", "events", "surviving"]
    assert list(written["survival_unjudged"]) == list(written["survival"])
    assert list(written["backtrack_detail"]) == ["by_dimension", "per_conversation"]
    assert list(written["backtrack_detail"]["by_dimension"][0]) == ["dimension", "conversations", "total"] + [
        "with_backtrack"
    ]
    assert list(written["unanimity"]) == ["judgments", "unanimous", "share"]
    assert list(written["answer_leak"]) == ["single", "multi", "unjudged"]
    assert list(written["pedagogy"]) == ["single", "single_clarity_mean", "multi", "unjudged"]
    assert list(written["pedagogy_by_subject"][0]) == ["subject", "format", "metric", "rate", "mean", "unjudged"]
