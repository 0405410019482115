"""Every table names the p that decided it: a row marked as a finding shows the deciding p's column, the
caption names that p's method, and report.md, the terminal and report.html mark the same rows.

`assert_findings_named` walks every block of a report; the shipped scenarios' runs walk it too
(tests/scenarios/test_provenance.py). Here each kind with contrasts is walked where it has findings: a real
ReMath run of the previous release (its findings decided by a p it never printed), a fairness summary and a
cases run with planted effects, and a four-tutor study with its tested pairs marked as findings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from engine import SUMMARIZERS, BlockSummarizer, load_scenario, run_sync
from engine.report._blocks import FINDING_MARK, Block, Section, Table, tables_of
from engine.report._console import console_blocks
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from engine.report._models import _forest, _pairs_table, typed_comparison
from engine.report._upgrade import upgrade_summary
from engine.stats._contrast import FAMILY_NAMES, WITHIN_NAME
from judges.fairness_summary import FairnessSummarizer
from tests.judges.test_fairness_summary import MANIFEST, records, ses_dialogues

ROOT = Path(__file__).resolve().parents[1]
METHODS = (*FAMILY_NAMES.values(), WITHIN_NAME)


def _tables(blocks: Sequence[Block]) -> Iterator[Table]:
    for block in blocks:
        if isinstance(block, Section):
            yield from _tables(block.body)
        else:
            yield from tables_of(block)


def assert_findings_named(blocks: Sequence[Block]) -> int:
    """Every finding row shows its deciding p under a caption naming the method, and every output marks it;
    returns how many finding rows the blocks hold."""
    marked = on_console = 0
    for table in _tables(blocks):
        if not any(table.findings):
            continue
        assert table.decided_by in table.columns, (table.title, table.decided_by)
        assert any(method in table.shown_caption() for method in METHODS), table.shown_caption()
        column = table.columns.index(table.decided_by)
        if table.console_columns != ():  # a table the terminal shows shows the deciding p there too
            assert table.decided_by in table.console_shown()
            on_console += 1
        for row, finding in zip(table.shown_rows(), table.findings, strict=False):
            if finding:
                assert row[column] not in (None, "", "–"), (table.title, row)
                assert str(row[0]).startswith(FINDING_MARK) or FINDING_MARK in str(getattr(row[0], "text", ""))
                marked += 1
    markdown = markdown_blocks(blocks)
    console = Console(width=400, record=True)
    console.print(console_blocks(blocks))
    html = str(html_blocks(blocks))
    assert markdown.count(f"| {FINDING_MARK} ") + markdown.count(f"| **{FINDING_MARK} ") == marked
    assert html.count(FINDING_MARK) >= marked
    if on_console:
        assert FINDING_MARK in console.export_text()
    return marked


def _kind(summary: dict[str, Any]) -> BlockSummarizer[Any]:
    summarizer = SUMMARIZERS.get(summary["run"]["kind"])
    assert isinstance(summarizer, BlockSummarizer)
    return summarizer


def test_remath_findings_show_the_benjamini_hochberg_p_that_decided_them() -> None:
    """The issue's case: a previous release's finding printed "p (adj.)" = Bonferroni within Friedman under a
    BH caption; now its column p (BH) is the deciding one, beside p (Bonferroni)."""
    old = json.loads((ROOT / "tests" / "old_summaries" / "remath.json").read_text(encoding="utf-8"))
    summarizer = _kind(old)
    blocks = summarizer.blocks(summarizer.read(old))
    assert assert_findings_named(blocks) == sum(row["violation"] for row in old["remath"]["differences"]) == 3
    table = next(t for t in _tables(blocks) if any(t.findings))
    assert table.decided_by == "p (BH)" and "Benjamini–Hochberg over 20 contrasts, q = 0.05" in table.caption


def test_fairness_findings_name_the_family_p_and_its_correction() -> None:
    summary = FairnessSummarizer().summarize(records(ses_dialogues()), MANIFEST)
    findings = len(summary.fairness.findings)
    assert findings > 0
    # the findings table, the forest's numbers and the per-domain table each mark a finding once per row shown
    assert assert_findings_named(FairnessSummarizer().blocks(summary)) >= findings


def test_a_planted_cases_gain_is_marked_with_its_family_p(tmp_path: Path) -> None:
    scenario = load_scenario(
        ROOT / "scenarios" / "casebench.yaml",
        overrides=["design.tasks=[open]", "models.tutor.params.case_reference_boost=0.5"],
    )
    summary = run_sync(scenario, out=tmp_path).summary
    assert any(row["finding"] for row in summary["cases"]["reference_gain"])
    summarizer = _kind(summary)
    assert assert_findings_named(summarizer.blocks(summarizer.read(summary))) >= 1


def test_tutor_pairs_marked_as_findings_show_their_family_p() -> None:
    old = json.loads((ROOT / "tests" / "old_summaries" / "models_comparison.json").read_text(encoding="utf-8"))
    comparison = upgrade_summary(old)["models"]["comparison"]
    comparison["pairs"] = [{**row, "finding": row["p_family"] is not None} for row in comparison["pairs"]]
    typed = typed_comparison(comparison)
    blocks = [_pairs_table(typed), *_forest(typed)]
    assert assert_findings_named(blocks) >= sum(row["finding"] for row in comparison["pairs"]) > 0
