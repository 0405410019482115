"""The typed cases summary: its JSON is the summary.json the untyped tables gave, key for key and in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import ContrastRow, load_scenario, run_sync
from engine.runtime._rundir import RunDir
from judges.cases_model import CasesSummary
from judges.cases_summary import CasesSummarizer
from tests.helpers import as_json

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "casebench.yaml"
CLUSTERED = ["k", "n", "clusters", "rate", "low", "high", "method"]
CONTRAST = list(ContrastRow.model_fields)
"""Every contrast row starts with the engine's fields, in their order (docs/run-directory.md), then the kind's."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    """The shipped casebench scenario cut down: every task, response type and reference, few cases."""
    scenario = load_scenario(SCENARIO, overrides=["replicates=1"])
    return RunDir(Path(run_sync(scenario, out=tmp_path_factory.mktemp("cases")).run_dir))


@pytest.fixture(scope="module")
def written(run: RunDir) -> dict[str, Any]:
    found: dict[str, Any] = orjson.loads((run.path / "summary.json").read_bytes())
    return found


def test_the_summary_types_without_changing_a_key(run: RunDir, written: dict[str, Any]) -> None:
    records, manifest = list(run.iter_records()), run.read_manifest()
    untyped = {"cases": as_json(CasesSummarizer().results(records, manifest))}
    typed = CasesSummarizer().summarize(records, manifest)
    assert orjson.dumps(typed.model_dump(mode="json")) == orjson.dumps(untyped)  # same keys, same order
    assert list(written) == ["run", "cases", "judge_agreement", "judging", "provenance", "sequential"]
    assert written["cases"] == untyped["cases"]
    assert CasesSummary.model_validate({"cases": written["cases"]}) == typed
    assert CasesSummarizer().render_markdown(written) == CasesSummarizer().render_markdown(untyped)


def test_the_summary_keys_are_today_s(written: dict[str, Any]) -> None:
    """The nested shapes, written out by hand from the summary.json a cases run wrote before typing."""
    cases = written["cases"]
    assert list(cases) == [
        "tutor",
        "challenge_types",
        "success",
        "criteria",
        "mcq",
        "reference_gain",
        "deescalation",
        "diversity",
        "case_recovery",
        "mcq_construction",
        "skipped",
    ]
    assert list(cases["success"][0]) == ["challenge_type", "response", "reference", *CLUSTERED, "unjudged"]
    assert list(cases["criteria"][0]) == ["challenge_type", "response", "reference", "responses", "mean_rate"] + [
        "criteria_held",
        "criteria",
        "pooled_low",
        "pooled_high",
        "unjudged",
    ]
    mcq = ["variant", "response", "challenge_type", "chance", "invalid", "p_vs_chance"]
    assert list(cases["mcq"][0]) == [*mcq, *CLUSTERED]
    gain = ["metric", "response", "mean_retrieved", "mean_none", "gain"]
    assert list(cases["reference_gain"][0]) == [*CONTRAST, *gain, "unjudged"]
    assert list(cases["deescalation"][0]) == ["by", "group", *CLUSTERED, "unjudged"]
    distinct = [f"distinct_{n}" for n in (1, 2, 3, 4, 5)]
    assert list(cases["diversity"][0]) == ["response", "reference", "responses", *distinct, "top_4gram"] + [
        "top_4gram_share"
    ]
