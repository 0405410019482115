"""Every shipped scenario's report says where each section comes from (a paper's table or figure, or simrun's
addition) and which protocol produced the run, in summary.json, report.md, report.html and the terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from engine import SUMMARIZERS, BlockSummarizer, load_scenario, run_sync
from engine.report._blocks import unlabelled
from engine.report._models import view_for
from engine.stats._models import TutorPair
from tests.conftest import SEED_DATA
from tests.test_findings_named import assert_findings_named

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    path.name
    for path in (ROOT / "scenarios").glob("*.yaml")
    if yaml.safe_load(path.read_text(encoding="utf-8")).get("kind") != "load"  # a load test has no sections
)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_section_of_a_shipped_scenario_carries_its_provenance(name: str, tmp_path: Path) -> None:
    overrides = ["limit=12"]
    if "data:" in (ROOT / "scenarios" / name).read_text(encoding="utf-8"):  # a public dataset in the data directory
        if not SEED_DATA.is_dir():
            pytest.skip(f"{name}: its public dataset is not on this machine (../shared/data is absent)")
        overrides.append(f"data_dir={json.dumps(str(SEED_DATA))}")
    scenario = load_scenario(ROOT / "scenarios" / name, overrides=overrides)
    result = run_sync(scenario, out=tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text(encoding="utf-8"))
    summarizer = SUMMARIZERS.get(summary["run"]["kind"])
    assert isinstance(summarizer, BlockSummarizer)
    view = view_for(summary, summarizer)  # a study of several tutors renders through the tutors' view
    blocks = view.blocks(summary) if view is not summarizer else summarizer.blocks(summarizer.read(summary))
    assert blocks and unlabelled(blocks) == []
    assert_findings_named(blocks)
    # summary.json validates against the typed rows (strict models: no key unknown to them, no old key left)
    text = (result.run_dir / "summary.json").read_text(encoding="utf-8")
    assert '"p_adjusted"' not in text and '"violation"' not in text
    if "models" in summary:
        for label in summary["models"]["labels"]:
            summarizer.read({"run": summary["run"], **summary["models"]["by_model"][label]})
        for pair in summary["models"]["comparison"]["pairs"]:
            TutorPair.model_validate(pair)
    else:
        summarizer.read(summary)

    assert summary["run"]["protocol"] and summary["run"]["scenario_file"].endswith(name)
    assert summary["provenance"] and all(entry["provenance"] for entry in summary["provenance"])

    markdown = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert f"- protocol: {summary['run']['protocol']}" in markdown
    top = [line for line in markdown.splitlines() if re.match(r"^## ", line)]
    labelled = re.findall(r"^## .*\n\n\*Provenance: .+\*$", markdown, flags=re.MULTILINE)
    assert len(labelled) == len(top)

    html = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert html.count('class="provenance"') >= len(summary["provenance"]) - sum(
        1 for entry in summary["provenance"] if " › " in entry["section"]
    )
    console = Console(width=200, record=True)
    console.print(view.render_console(summary))
    assert f"protocol: {summary['run']['protocol']}" in console.export_text()
