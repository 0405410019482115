"""The typed ReMath summary: its JSON is the summary.json the untyped tables gave, key for key."""

from __future__ import annotations

from pathlib import Path

import orjson

from engine import load_scenario, run_sync
from engine.runtime._rundir import RunDir
from judges.remath_model import RemathSummary
from judges.remath_summary import RemathSummarizer
from tests.helpers import as_json

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_remath_scenario_types_its_summary_without_changing_a_key(tmp_path: Path) -> None:
    scenarios = [p for p in sorted((ROOT / "scenarios").glob("*.yaml")) if "kind: remediation" in p.read_text()]
    assert scenarios
    for path in scenarios:
        result = run_sync(load_scenario(path), out=tmp_path / path.stem)
        run = RunDir(Path(result.run_dir))
        records, manifest = list(run.iter_records()), run.read_manifest()
        untyped = as_json(RemathSummarizer().results(records, manifest))
        typed = RemathSummarizer().summarize(records, manifest)
        assert typed.model_dump(mode="json") == {"remath": untyped}
        written = orjson.loads((run.path / "summary.json").read_bytes())
        assert written["remath"] == untyped
        # read back from disk, the model validates (no key unknown to it) and renders the same report
        assert RemathSummary.model_validate({"remath": written["remath"]}) == typed
        assert RemathSummarizer().render_markdown(written) == RemathSummarizer().render_markdown(typed.model_dump())
