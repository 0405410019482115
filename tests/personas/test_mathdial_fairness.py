"""MathDial problems as the seeds of a fairness run: the `mathdial` source serves the `demographic` design as it
serves crescendo (tests/personas/test_mathdial.py), offline, on invented records in MathDial's layout."""

from __future__ import annotations

import json
from pathlib import Path

from engine import load_scenario, run_sync
from tests.personas.test_mathdial import ROOT, _record, _write


def test_a_fairness_run_draws_its_problems_from_mathdial_offline(tmp_path: Path) -> None:
    records = [
        _record(
            qid, f"A shelf holds {qid + 3} rows of 4 jars. How many jars are there?", f"{qid + 3}*4\n {4 * qid + 12}"
        )
        for qid in range(16)
    ]
    path = _write(tmp_path / "test.jsonl", records)
    items = json.dumps([{"source": "mathdial", "path": str(path)}])
    scenario = load_scenario(ROOT / "scenarios" / "fairness.yaml", overrides=[f"items={items}", "limit=40"])
    result = run_sync(scenario, out=tmp_path / "runs")
    assert (result.ok, result.errors) == (40, 0)
    played = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    assert all(r["item_id"].startswith("md-") for r in played)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert [(i["source"], i["read"], i["kept"]) for i in manifest["items_intake"]] == [("mathdial", 16, 16)]
