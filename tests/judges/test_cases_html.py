"""The cases section of report.html: plots with their tables, verdicts, escaping and a byte-identical rebuild."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import SUMMARIZERS, load_scenario, run_sync
from engine.cli._main import main
from engine.report._rebuild import REPORT_HTML
from engine.report._sections import EpisodeScores, EpisodeVerdict
from engine.runtime._rundir import RunDir
from judges.cases_blocks import rate_cell
from judges.cases_model import McqRow, SuccessRow
from judges.cases_summary import CasesSummarizer, episode_scores
from tests.helpers import ESCAPED, PLANTED

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "casebench.yaml"
RESPONSES = ("immediate", "long_term", "overall")
PLOTS = ("cases-criteria", "cases-mcq", "cases-reference-gain", "cases-deescalation")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped casebench scenario, one replicate (135 episodes: every task, response type and reference)."""
    result = run_sync(load_scenario(SCENARIO, overrides=["replicates=1"]), out=tmp_path_factory.mktemp("cases"))
    assert result.exit_code == 0
    return Path(result.run_dir)


def test_report_has_every_plot_with_its_table(run: Path) -> None:
    """Success, criteria, MCQ, reference gain and de-escalation are inline SVG, each with its numbers below."""
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    summary = orjson.loads((run / "summary.json").read_bytes())["cases"]
    assert len(re.findall(r'<svg class="plot-svg"', html)) == len(PLOTS) + len(RESPONSES)
    for key in PLOTS:
        figure = html.index(f'id="fig-{key}"')
        assert html.index(f'id="tbl-{key}"') > figure  # the table follows its plot
    assert 'id="tbl-cases-diversity"' in html and "distinct-4" in html
    pooled = next(
        r
        for r in summary["success"]
        if (r["challenge_type"], r["response"], r["reference"]) == ("all", "immediate", "none")
    )
    assert f"<td>{rate_cell(SuccessRow.model_validate(pooled))}</td>" in html
    binary = next(
        r for r in summary["mcq"] if (r["variant"], r["response"], r["challenge_type"]) == ("binary", "all", "all")
    )
    assert f"<td>{rate_cell(McqRow.model_validate(binary))}</td>" in html and "binary (chance 50%)" in html
    gains = summary["reference_gain"]
    assert len(gains) == 6 and all(f"{g['r']:+.2f} [{g['ci_low']:+.2f}, {g['ci_high']:+.2f}]" in html for g in gains)
    assert "no HTML section of its own" not in html


def test_success_is_one_small_panel_per_response_and_reference(run: Path) -> None:
    """Six series on one axis hid each other: each response type gets its own figure, one panel per reference
    (titled, so no legend is needed), and the success table follows the last of them."""
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    starts = [html.index(f'id="fig-cases-success-{response}"') for response in RESPONSES]
    assert starts == sorted(starts)
    assert html.index('id="tbl-cases-success"') > starts[-1]
    for start in starts:
        figure = html[start : html.index("</figure>", start)]
        assert ">ref none</text>" in figure and ">ref retrieved</text>" in figure
        assert "immediate · ref none" not in figure  # titles, not a six-entry legend


def test_verdicts_and_scores_name_each_task_outcome(run: Path) -> None:
    """The transcripts filter offers each task's outcome; compare scores are NaN where a task does not measure."""
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    summarizer = SUMMARIZERS.get("cases")
    assert isinstance(summarizer, EpisodeVerdict) and isinstance(summarizer, EpisodeScores)
    records = list(RunDir(run).iter_records())
    verdicts = {summarizer.episode_verdict(r) for r in records}
    assert {"success", "no criterion met", "mcq correct", "mcq wrong", "de-escalated", "not de-escalated"} <= verdicts
    for verdict in verdicts:
        assert f'<option value="{verdict}">{verdict}</option>' in html
    for record in records:
        scores = summarizer.episode_scores(record)
        assert scores == episode_scores(record)
        measured = {k for k, v in scores.items() if not math.isnan(v)}
        task = str(record.metrics["task"])
        expected = {
            "open": {"success", "criteria_rate"},
            "interactive": {"success", "criteria_rate", "deescalated"},
            "mcq4": {"mcq_correct"},
            "binary": {"mcq_correct"},
        }[task]
        assert measured == expected, (task, scores)
        if task in ("mcq4", "binary"):
            assert scores["mcq_correct"] == float(record.metrics["mcq_correct"] is True)


def test_rebuild_is_byte_identical_and_planted_markup_is_text(run: Path, tmp_path: Path) -> None:
    """`simrun report` rewrites report.html byte for byte; markup in a reply or a case's type stays text."""
    copy = Path(shutil.copytree(run, tmp_path / "run"))
    before = (copy / REPORT_HTML).read_bytes()
    assert main(["report", str(copy)]) == 0
    assert (copy / REPORT_HTML).read_bytes() == before
    lines = (copy / "episodes.jsonl").read_bytes().splitlines()
    index = next(i for i, line in enumerate(lines) if orjson.loads(line)["metrics"]["task"] == "open")
    record = orjson.loads(lines[index])
    record["turns"][record["metrics"]["response_turn"]]["text"] = f"{PLANTED} I would sit beside her."
    record["meta"]["challenge_type"] = PLANTED  # a dataset string: a new row in the plots and tables
    lines[index] = orjson.dumps(record)
    (copy / "episodes.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert main(["report", str(copy)]) == 0
    html = (copy / REPORT_HTML).read_text(encoding="utf-8")
    assert PLANTED not in html and "<script>alert" not in html and "<img" not in html
    assert html.count(ESCAPED) >= 4  # success and criteria tables, transcript, filter
    assert len(re.findall(r"<script\b", html)) == 1
    svg_text = re.findall(r"<text[^>]*>([^<]*pwned[^<]*)</text>", html)
    assert svg_text and all("&lt;script&gt;" in t for t in svg_text)  # axis labels in the plots, escaped


def _empty(**rows: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tutor": "sim/tutor",
        "challenge_types": ["task_resistance"],
        "success": [],
        "criteria": [],
        "mcq": [],
        "reference_gain": [],
        "deescalation": [],
        "diversity": [],
        "skipped": {"mcq4": 2},
    }
    return {**data, **rows}


def test_missing_tasks_say_why_instead_of_plotting() -> None:
    """A run of one task only (e.g. `design.tasks=[mcq4]`) renders the other sections as explanations."""
    html = str(CasesSummarizer().render_html({"cases": _empty()}))
    assert "plot-svg" not in html
    for reason in ("the open task did not run", "No multiple-choice task ran", "design.reference: false"):
        assert reason in html
    assert "Skipped (the case lacks the material for the task): mcq4 2." in html
