"""report.html: self-contained, deterministic, escaped, bounded transcripts; kind sections and the fallback."""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine.core._records import EpisodeRecord, Judgment, Turn
from engine.report._page import MAX_TRANSCRIPTS, render_report, select_transcripts
from engine.report._rebuild import REPORT_HTML, write_report
from engine.report._sections import generic_section
from engine.tools._view import serve_report
from judges.fairness_summary import FairnessSummarizer
from tests.helpers import ITEMS, PLANTED, make_scenario, write_bank

STAMP = "2025-01-01T00:00:00.000+00:00"


def _run(tmp_path: Path, **overrides: Any) -> Path:
    scenario = make_scenario(tmp_path, **overrides)
    result = engine.run_sync(scenario, out=tmp_path / "runs")
    return Path(result.run_dir)


@pytest.fixture(scope="module")
def crescendo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small crescendo run on the sim provider, whose bank plants markup in a question (a dataset string)."""
    base = tmp_path_factory.mktemp("crescendo")
    items = [dict(item) for item in ITEMS]
    items[0]["question"] = f"{PLANTED} {items[0]['question']}"
    write_bank(base / "bank.yaml", items)
    return _run(base, judge_votes=3)


def test_every_run_writes_a_self_contained_report(crescendo_run: Path) -> None:
    """The run ends with report.html: header facts, inline SVG plots with tables, no fetch of anything."""
    html = (crescendo_run / REPORT_HTML).read_text(encoding="utf-8")
    manifest = orjson.loads((crescendo_run / "manifest.json").read_bytes())
    assert manifest["scenario_hash"] in html and f"<dd>{manifest['seed']}</dd>" in html
    assert 'id="sim-note"' in html and "sim/tutor" in html and "finished" in html
    assert len(re.findall(r"<svg class=\"plot-svg\"", html)) == 4
    for key in ("fig-crescendo-heatmap", "fig-crescendo-hazard", "fig-crescendo-survival", "fig-crescendo-backtracks"):
        assert f'id="{key}"' in html
    for table in ("tbl-harm", "tbl-hazard", "tbl-hazard-contrast", "tbl-survival", "tbl-backtracks"):
        assert f'id="{table}"' in html
    assert not re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", html)
    assert "@import" not in html and not re.search(r"url\((?!#)", html)  # only in-page references
    assert "default-src &#39;none&#39;" in html  # the CSP, attribute-escaped


def test_rebuilding_is_byte_identical(crescendo_run: Path) -> None:
    """`simrun report` rewrites report.html byte for byte (no dates, seeded SVG ids)."""
    before = (crescendo_run / REPORT_HTML).read_bytes()
    (crescendo_run / REPORT_HTML).unlink()
    write_report(crescendo_run)
    assert (crescendo_run / REPORT_HTML).read_bytes() == before


def test_planted_markup_is_shown_as_text(crescendo_run: Path, tmp_path: Path) -> None:
    """Markup in a dataset question, a model's turn, a rationale and a condition reaches the page only as text."""
    run = Path(shutil.copytree(crescendo_run, tmp_path / "run"))
    lines = (run / "episodes.jsonl").read_bytes().splitlines()
    record = orjson.loads(lines[0])
    record["turns"][-1]["text"] = PLANTED
    record["judgments"].append(
        {"judge": PLANTED, "metric": "unsafe", "target": len(record["turns"]) - 1, "value": True, "rationale": PLANTED}
    )
    record["condition"]["dimension"] = PLANTED
    lines[0] = orjson.dumps(record)
    (run / "episodes.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    write_report(run)
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    assert PLANTED not in html and "<script>alert" not in html and "<img" not in html
    assert html.count("&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") >= 4
    assert len(re.findall(r"<script\b", html)) == 1  # the page's own filter script only


def _record(index: int, condition: dict[str, str], *, status: str = "ok") -> EpisodeRecord:
    return EpisodeRecord(
        id=f"i{index}|{condition}|r0",
        scenario="t",
        item_id=f"i{index:03d}",
        condition=condition,
        replicate=0,
        seed=index,
        status="error" if status == "error" else "ok",
        error={"type": "timeout", "message": "slow"} if status == "error" else None,
        turns=[Turn(index=0, role="student", text="hi"), Turn(index=1, role="tutor", text="hello")],
        judgments=[Judgment(judge="j", metric="m", target=1, value=True, votes=[True, False], rationale="why")],
        metrics={"flag": index % 2 == 0},
        started_at=STAMP,
        finished_at=STAMP,
    )


def test_transcripts_are_bounded_and_cover_every_condition() -> None:
    """At most MAX_TRANSCRIPTS full transcripts: errors first, then the same share of every condition."""
    conditions = [{"arm": name} for name in ("a", "b", "c")]
    records = [_record(i, conditions[i % 3], status="error" if i < 5 else "ok") for i in range(700)]
    chosen = select_transcripts(records)
    assert len(chosen) == MAX_TRANSCRIPTS
    assert set(range(5)) <= chosen
    per_arm = {arm["arm"]: sum(1 for i in chosen if records[i].condition == arm and i >= 5) for arm in conditions}
    assert max(per_arm.values()) - min(per_arm.values()) <= 1
    html = render_report(_summary(), records, {"scenario_hash": "h", "seed": 1}, object())
    assert html.count('data-embedded="yes"') == MAX_TRANSCRIPTS and html.count('data-embedded="no"') == 500
    assert 'href="episodes/700.html"' in html or 'id="ep-700"' in html


def _summary(**extra: Any) -> dict[str, Any]:
    run = {"scenario": "t", "kind": "custom", "status": "finished", "planned": 1, "episodes": 1, "ok": 1, "error": 0}
    run.update(errors_by_type={}, models={"tutor": "x/y"}, providers=["x"], simulated=False)
    return {"run": run, **extra}


def test_a_kind_without_html_gets_its_summary_as_tables() -> None:
    """The generic fallback renders lists of rows, nested rates and scalars from summary.json's shape."""
    summary = _summary(
        rates=[{"arm": "<b>a</b>", "rate": {"k": 1, "n": 4, "rate": 0.25}}],
        totals={"episodes": 4, "note": "plain"},
    )
    body = str(generic_section(summary))
    assert "no HTML section of its own" in body and "&lt;b&gt;a&lt;/b&gt;" in body and "<b>a" not in body
    html = render_report(summary, [_record(0, {"arm": "a"})], {}, object())
    assert 'id="sim-note"' not in html and "no HTML section" in html


def _contrast(metric: str, test: str, r: float, low: float, high: float, a: str, b: str) -> dict[str, Any]:
    return {
        "domain": "all",
        "channel": "opposite",
        "dimension": "gender_mismatch",
        "metric": metric,
        "test": test,
        "a": a,
        "b": b,
        "n": 20,
        "status": "ok",
        "r": r,
        "ci_low": low,
        "ci_high": high,
        "p": 0.01,
        "p_family": 0.01,
        "mean_diff": 0.1,
        "meaningful": abs(r) >= 0.1,
        "finding": low > 0 or high < 0,
    }


def test_fairness_section_draws_the_forest_and_the_two_by_two_panel() -> None:
    """Violations are marked in the forest table; the 2×2 panel shows the four cell means and five contrasts."""
    tests = ("matched", "mismatched", "perceived", "stated", "interaction")
    contrasts = [
        _contrast(
            "answer_leakage", t, 0.5 if t == "perceived" else 0.05, 0.2 if t == "perceived" else -0.3, 0.7, "x", "y"
        )
        for t in tests
    ]
    levels = {"female/female": 0.1, "female/male": 0.4, "male/female": 0.15, "male/male": 0.45}
    data = {
        "tutor": "sim/tutor",
        "contrasts": contrasts,
        "findings": [c for c in contrasts if c["finding"]],
        "means": [
            {
                "domain": "all",
                "channel": "opposite",
                "dimension": "gender_mismatch",
                "metric": "answer_leakage",
                "levels": levels,
            }
        ],
        "correction": {
            "method": "bh",
            "q": 0.05,
            "family": "run",
            "family_size": 5,
            "families": {"run": 5},
            "findings": 1,
            "tested": 5,
            "insufficient": 0,
            "omnibus_alpha": 0.1,
            "min_pairs": 15,
        },
        "mean_abs_r": {
            "cells": [
                {
                    "domain": "all",
                    "channel": "opposite",
                    "dimension": "gender_mismatch",
                    "metric": "answer_leakage",
                    "mean_abs_r": 0.05,
                    "contrasts": 2,
                    "finding": True,
                }
            ],
            "by_metric": [{"domain": "all", "channel": "opposite", "metric": "answer_leakage", "mean_abs_r": 0.05}],
            "by_dimension": [
                {"domain": "all", "channel": "opposite", "dimension": "gender_mismatch", "mean_abs_r": 0.05}
            ],
            "aggregates": [],
        },
        "audit": [],
        "stop_reasons": {"opposite/gender_mismatch=female/male": {"tutor_revealed": 3}},
    }
    html = str(FairnessSummarizer().render_html({**_summary(), "fairness": data}))
    assert 'id="fig-forest-opposite-all-gender_mismatch"' in html
    assert 'id="fig-mismatch-opposite-all-gender_mismatch"' in html
    assert html.count('<tr class="violation">') == 2  # the findings table and the forest's numbers mark it
    assert "<strong>+0.50 [+0.20, +0.70]</strong>" in html
    for value in ("0.1", "0.4", "0.15", "0.45"):
        assert f'<td class="num">{value}</td>' in html


def test_view_serves_the_report_and_any_episode(crescendo_run: Path) -> None:
    """`simrun view` serves report.html and renders transcripts that the page did not embed; nothing else."""
    with serve_report(crescendo_run) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url) as response:
            assert response.read() == (crescendo_run / REPORT_HTML).read_bytes()
        with urllib.request.urlopen(server.url + "episodes/2.html") as response:
            page = response.read().decode()
        second = EpisodeRecord.model_validate_json((crescendo_run / "episodes.jsonl").read_bytes().splitlines()[1])
        assert 'class="turns"' in page and second.turns[-1].text.replace("'", "&#39;") in page
        for missing in ("episodes/9999.html", "manifest.json", "../episodes.jsonl"):
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(server.url + missing)
            assert caught.value.code == 404
            caught.value.close()
