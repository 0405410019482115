"""The typed fairness summary: its JSON is summary.json's "fairness" part, key for key, as a run writes it and
as a report rebuilt from disk reads it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.cli._main import main
from engine.runtime._rundir import RunDir
from judges.fairness_model import FairnessSummary
from judges.fairness_summary import FairnessSummarizer
from tests.helpers import as_json
from tests.judges.test_fairness_summary import (
    MANIFEST,
    audit_dialogues,
    gender_dialogues,
    opposite_dialogues,
    records,
    ses_dialogues,
    two_domain_dialogues,
)

ROOT = Path(__file__).resolve().parents[2]
DESIGNS = {
    "gender": gender_dialogues,
    "ses": ses_dialogues,
    "opposite": opposite_dialogues,
    "two domains": lambda: two_domain_dialogues()[0],
    "audit": audit_dialogues,
}


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_the_typed_summary_dumps_the_untyped_tables_key_for_key(design: str) -> None:
    found = records(DESIGNS[design]())
    untyped = as_json(FairnessSummarizer().results(found, MANIFEST))
    typed = FairnessSummarizer().summarize(found, MANIFEST)
    assert typed.model_dump(mode="json") == {"fairness": untyped}
    # every row variant is typed: pairs carry their Friedman p and gate, Friedman rows their statistic
    for row, model in zip(untyped["contrasts"], typed.fairness.contrasts, strict=True):
        assert model.omnibus_p == row.get("omnibus_p") and model.gated == row.get("gated", False)
        assert set(model.model_dump()) == set(row)


def test_a_shipped_fairness_run_writes_the_typed_summary_and_rebuilds_its_report_from_disk(tmp_path: Path) -> None:
    assert main([str(ROOT / "scenarios" / "gender_mismatch.yaml"), "--limit", "40", "--out", str(tmp_path), "-q"]) == 0
    run = RunDir(next(tmp_path.iterdir()))
    records_, manifest = list(run.iter_records()), run.read_manifest()
    written = orjson.loads((run.path / "summary.json").read_bytes())
    assert written["fairness"] == as_json(FairnessSummarizer().results(records_, manifest))
    typed = FairnessSummary.model_validate({"fairness": written["fairness"]})
    assert typed == FairnessSummarizer().summarize(records_, manifest)
    summarizer = FairnessSummarizer()
    assert summarizer.render_markdown(written) == summarizer.render_markdown(typed.model_dump())
    assert (run.path / "report.md").read_text().count(summarizer.render_markdown(written).strip()) == 1
