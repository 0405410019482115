"""summary.json files written before contrast rows were typed once still read, report and compare.

The files in tests/old_summaries were written by the previous release's shipped scenarios on the sim (remath at
150 items, fairness at 16 items on two dimensions, casebench at 40, the four-tutor crescendo study at 16), kept as
written: `p_adjusted` meant Bonferroni within Friedman for ReMath and the tutor pairs, the family's p for fairness,
and `violation` held the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import SUMMARIZERS, BlockSummarizer, ContrastRow, format_p
from engine.report._models import _omnibus_table, _pairs_table, typed_comparison
from engine.report._upgrade import upgrade_summary

OLD = Path(__file__).resolve().parents[3] / "tests" / "old_summaries"


def _old(name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((OLD / f"{name}.json").read_text(encoding="utf-8"))
    return found


def _kind(summary: dict[str, Any]) -> BlockSummarizer[Any]:
    summarizer = SUMMARIZERS.get(summary["run"]["kind"])
    assert isinstance(summarizer, BlockSummarizer)
    return summarizer


@pytest.mark.parametrize("name", ["remath", "fairness", "cases"])
def test_an_old_summary_validates_and_reports_in_every_format(name: str) -> None:
    old = _old(name)
    summarizer = _kind(old)
    typed = summarizer.read(old)  # strict models: an old key left unconverted would fail here
    assert summarizer.render_markdown(old) == summarizer.render_markdown(typed.model_dump(mode="json"))
    assert str(summarizer.render_html(old))
    assert summarizer.render_console(old) is not None
    assert upgrade_summary(typed.model_dump(mode="json")) == typed.model_dump(mode="json")  # new files unchanged


def test_remath_s_old_p_adjusted_becomes_p_within_and_the_deciding_p_is_shown() -> None:
    """The old ReMath file's findings were decided by p_family (BH) while p_adjusted was Bonferroni within
    Friedman; read back, each old key lands on its meaning and report.md shows the deciding p."""
    old = _old("remath")
    rows = old["remath"]["differences"]
    differences = _kind(old).read(old).remath.differences
    assert any(row["violation"] for row in rows)
    for row, typed in zip(rows, differences, strict=True):
        assert isinstance(typed, ContrastRow)
        assert typed.finding == row["violation"] and typed.p_family == row["p_family"] and typed.p == row["p"]
        if row["test"] == "wilcoxon (Bonferroni)":
            assert typed.p_within == row["p_adjusted"]
        else:
            assert typed.p_within is None
    markdown = _kind(old).render_markdown(old)
    for row in rows:
        if row["violation"]:
            assert f"| {row['p_family']:.3f} |" in markdown


def test_fairness_s_old_p_adjusted_is_the_family_p() -> None:
    old = _old("fairness")
    typed = _kind(old).read(old).fairness
    for row, found in zip(old["fairness"]["contrasts"], typed.contrasts, strict=True):
        assert found.p_family == row["p_adjusted"] and found.finding == row["violation"]
        assert found.p_within is None
        assert found.family_method == (old["fairness"]["correction"]["method"] if row["family"] else None)
    assert typed.findings == [c for c in typed.contrasts if c.finding]


def test_an_old_tutor_comparison_renders_with_its_verdicts() -> None:
    old = _old("models_comparison")
    comparison = upgrade_summary(old)["models"]["comparison"]
    pairs = _pairs_table(typed_comparison(comparison))
    was = [row for row in old["models"]["comparison"]["pairs"] if row["status"] == "ok"]
    assert pairs.findings == tuple(row["violation"] for row in was)
    assert [row[5] for row in pairs.rows] == [f"{row['p_family']:.3f}" for row in was]
    omnibus = _omnibus_table(typed_comparison(comparison))
    assert [row[5] for row in omnibus.rows] == [
        format_p(row["p_adjusted"]) for row in old["models"]["comparison"]["omnibus"]
    ]
