"""The fairness report's blocks from a hand-built summary: what each output shows, with values worked out here."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from engine import Forest, HeatGrid, Section, Table
from engine.report._markdown import markdown_blocks
from judges.fairness_blocks import fairness_blocks
from judges.fairness_model import FairnessResults
from judges.fairness_summary import FairnessSummarizer


def _row(domain: str, test: str, r: float | None, p: float | None, violation: bool, **extra: Any) -> dict[str, Any]:
    return {
        "domain": domain,
        "channel": "explicit",
        "dimension": "ses",
        "metric": "answer_leakage",
        "test": test,
        "a": "low",
        "b": "high",
        "n": 20,
        "status": "ok" if r is not None else "insufficient",
        "r": r,
        "ci_low": None if r is None else r - 0.2,
        "ci_high": None if r is None else r + 0.2,
        "p": p,
        "p_family": None if p is None else min(1.0, 3 * p),
        "mean_diff": None if r is None else r / 10,
        "meaningful": r is not None and abs(r) >= 0.1,
        "finding": violation,
        "family": "run" if p is not None else None,
        "ci_level": None if r is None else 0.95,
        **extra,
    }


def _results() -> FairnessResults:
    contrasts = [
        _row("all", "friedman", None, 0.04, False, statistic=6.5),
        _row("all", "pairwise", 0.6, 0.004, True, omnibus_p=0.04, gated=False),
        _row("algebra", "pairwise", 0.3, 0.2, False, omnibus_p=0.3, gated=True),
        _row("optics", "pairwise", -0.1, 0.5, False, omnibus_p=0.3, gated=True),
    ]
    correction = {
        "method": "bh",
        "q": 0.05,
        "family": "run",
        "family_size": 3,
        "families": {"run": 3},
        "findings": 1,
        "tested": 3,
        "insufficient": 0,
        "omnibus_alpha": 0.1,
        "min_pairs": 15,
    }
    cells = [
        {"domain": d, "channel": "explicit", "dimension": "ses", "metric": "answer_leakage"}
        | {"mean_abs_r": abs(r), "contrasts": 1, "finding": d == "all"}
        for d, r in (("all", 0.6), ("algebra", 0.3), ("optics", -0.1))
    ]
    return FairnessResults.model_validate(
        {
            "tutor": "sim/tutor",
            "correction": correction,
            "contrasts": contrasts,
            "findings": [contrasts[1]],
            "means": [],
            "mean_abs_r": {"cells": cells, "by_metric": [], "by_dimension": [], "aggregates": []},
            "audit": [],
            "stop_reasons": {"explicit/ses=low": {"solved": 2, "max_turns": 1}, "explicit/ses=high": {"solved": 3}},
        }
    )


def _walk(blocks: Any) -> list[Any]:
    found = []
    for block in blocks:
        found.append(block)
        if isinstance(block, Section):
            found += _walk(block.body)
    return found


def test_the_pooled_cell_is_plotted_and_every_per_domain_row_is_listed() -> None:
    blocks = _walk(fairness_blocks(_results()))
    forests = [b for b in blocks if isinstance(b, Forest)]
    assert [f.key for f in forests] == ["forest-explicit-all-ses"]
    # the Friedman row has no interval: in the table, not the plot; the finding is highlighted
    (interval,) = forests[0].panels[0].intervals
    assert (interval.estimate, interval.low, interval.high, interval.highlight) == pytest.approx((0.6, 0.4, 0.8, True))
    assert len(forests[0].numbers.rows) == 2 and forests[0].numbers.findings == (False, True)
    (per_domain,) = [b for b in blocks if isinstance(b, Table) and b.key == "per-domain"]
    expected = [("algebra", "0.300", 20), ("optics", "0.300", 20)]
    assert [(row[0], row[-2], row[-1]) for row in per_domain.rows] == expected
    (stops,) = [b for b in blocks if isinstance(b, Table) and b.key == "stop-reasons"]
    assert stops.columns == ("condition", "max_turns", "solved")
    assert stops.rows == (("explicit/ses=low", 1, 2), ("explicit/ses=high", 0, 3))
    assert not [b for b in blocks if isinstance(b, HeatGrid)]  # no opposite design, no 2×2


def test_markdown_nests_the_cells_under_their_sections_and_the_terminal_keeps_to_the_findings() -> None:
    markdown = markdown_blocks(fairness_blocks(_results()))
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert headings[:5] == [
        "## Fairness findings",
        "## Mean |r| · explicit cues",
        "### explicit cues · domain all",
        "### explicit cues · domain algebra",
        "### explicit cues · domain optics",
    ]
    assert headings[-6:] == [
        "### Forest plot: ses · explicit cues · domain all",
        "### Per-domain contrasts",
        "## Signed r per dimension (EduFair Tables 9–12)",
        "### ses · explicit cues",
        "## Why dialogues stopped",
        "## Simulated-student audit",
    ]
    assert "| answer_leakage | 0.600* | – |" in markdown  # no by-metric mean was given
    console = Console(record=True, width=200)
    console.print(FairnessSummarizer().render_console({"fairness": _results().model_dump()}))
    text = console.export_text()
    assert "Fairness findings (1)" in text and "Per-domain" not in text and "explicit/ses=low" not in text


def test_the_pivot_shows_one_pair_per_cell_with_desirability_marks() -> None:
    """EduFair Tables 9–12: a row per domain, the first-vs-last-level pair of a three-level dimension per cell."""
    data = _results().model_dump()
    middle = {**data["contrasts"][1], "a": "low", "b": "middle", "r": 0.9, "finding": False}
    data["contrasts"].insert(1, middle)  # listed first, but not the extreme pair
    data["means"] = [
        {"domain": "all", "channel": "explicit", "dimension": "ses", "metric": "answer_leakage"}
        | {"levels": {"low": 0.2, "middle": 0.3, "high": 0.5}}
    ]
    blocks = fairness_blocks(FairnessResults.model_validate(data))
    (pivot,) = [b for b in _walk(blocks) if isinstance(b, Table) and b.key == "pivot-explicit-ses"]
    assert pivot.columns[1:3] == ("mistake_recognize ↑", "answer_leakage ↓")
    rows = {row[0]: row for row in pivot.rows}
    assert list(rows) == ["all", "algebra", "optics"]
    finding = data["contrasts"][2]
    assert finding["finding"] and finding["p_family"] is not None  # the bold cell carries the p that decided it
    expected = f"+0.60 [+0.40, +0.80], p (family) {finding['p_family']:.3f}"
    assert str(rows["all"][2]) == f"Strong(text='{expected}')" and rows["all"][6] == "0.600"
    assert "Benjamini–Hochberg over" in pivot.caption
    assert rows["optics"][2] == "-0.10 [-0.30, +0.10]" and rows["optics"][1] is None
    (section,) = [b for b in blocks if isinstance(b, Section) and b.key == "pivot"]
    assert section.provenance == "EduFair Tables 9–12"
