"""The ReMath section of report.html: confusion heatmaps, Task C intervals, differences; escaping and rebuilds."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import orjson
import pytest

from engine import SUMMARIZERS, load_scenario, run_sync
from engine.cli._main import main
from engine.report._rebuild import REPORT_HTML
from engine.report._sections import EpisodeScores, EpisodeVerdict
from engine.runtime._rundir import RunDir
from judges.remath_blocks import SCORES
from tests.helpers import ESCAPED, PLANTED

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "remath.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped remath scenario on 15 items (the fewest paired tests accept), replies against the reference."""
    scenario = load_scenario(SCENARIO, overrides=["items.0.limit=15", "judges.0.against=reference"])
    result = run_sync(scenario, out=tmp_path_factory.mktemp("remath"))
    assert result.exit_code == 0
    return Path(result.run_dir)


def test_report_has_confusion_heatmaps_intervals_and_differences(run: Path) -> None:
    """One heatmap per Task A/B label with its counts table, the Task C forest per condition, the differences."""
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    data = orjson.loads((run / "summary.json").read_bytes())["remath"]
    keys = [f"remath-confusion-{r['label']}" for r in data["agreement"]]
    keys += ["remath-pairs-tutor", "remath-pairs-expert", "remath-conditions", "remath-differences"]
    assert [r["label"] for r in data["agreement"]] == ["error", "strategy", "intention"]
    assert len(re.findall(r'<svg class="plot-svg"', html)) == len(keys)
    for key in keys:
        assert html.index(f'id="tbl-{key}"') > html.index(f'id="fig-{key}"')
    for row in data["agreement"]:
        # the counts table: one row per gold label, its cells the confusion counts, diagonal in bold
        table = html[html.index(f'id="tbl-remath-confusion-{row["label"]}"') :]
        table = table[: table.index("</table>")]
        body_rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
        assert len(body_rows) == len(row["labels"])
        for i, (cells, counts) in enumerate(zip(body_rows, row["confusion"], strict=True)):
            shown = [int(v) for v in re.findall(r'<td(?: class="num")?>(?:<strong>)?(\d+)(?:</strong>)?</td>', cells)]
            assert shown == [*counts, sum(counts)]
            assert (f"<strong>{counts[i]}</strong>" in cells) == bool(counts[i])
        assert sum(map(sum, row["confusion"])) == row["n"]
    for condition in data["conditions"]:
        for metric in SCORES:
            cell = condition[metric]
            assert f"{cell['mean']:+.2f} [{cell['low']:+.2f}, {cell['high']:+.2f}] (n={cell['n']})" in html
    assert 'id="tbl-remath-position-bias"' in html and "position bias (mean)" in html
    assert html.count('<tr class="violation">') == sum(1 for c in data["differences"] if c["finding"])


def test_verdicts_and_scores(run: Path) -> None:
    """Tasks A/B are right or wrong against the expert; Task C says who the judge preferred."""
    summarizer = SUMMARIZERS.get("remediation")
    assert isinstance(summarizer, EpisodeVerdict) and isinstance(summarizer, EpisodeScores)
    records = list(RunDir(run).iter_records())
    html = (run / REPORT_HTML).read_text(encoding="utf-8")
    for record in records:
        verdict = summarizer.episode_verdict(record)
        scores = summarizer.episode_scores(record)
        assert f'<option value="{verdict}">' in html
        task = record.condition["task"]
        if task == "error":
            right = record.metrics["error_pred"] == record.metrics["error_gold"]
            assert verdict == f"error {'right' if right else 'wrong'}" and scores["error_match"] == float(right)
            assert math.isnan(scores["preference"])
        elif task == "strategy":
            assert verdict.startswith("strategy ") and " · intention " in verdict
            assert not math.isnan(scores["strategy_match"]) and math.isnan(scores["error_match"])
        else:
            preference = scores["preference"]
            assert verdict == (
                "reply preferred" if preference > 0 else "baseline preferred" if preference < 0 else "tie"
            )
            assert not math.isnan(scores["overall"]) and not math.isnan(scores["answer_leak"])


def test_rebuild_is_byte_identical_and_planted_markup_is_text(run: Path, tmp_path: Path) -> None:
    """`simrun report` rewrites the page byte for byte; a planted reply and a planted label stay text."""
    copy = Path(shutil.copytree(run, tmp_path / "run"))
    before = (copy / REPORT_HTML).read_bytes()
    assert main(["report", str(copy)]) == 0
    assert (copy / REPORT_HTML).read_bytes() == before
    lines = (copy / "episodes.jsonl").read_bytes().splitlines()
    tasks = [orjson.loads(line)["condition"]["task"] for line in lines]
    reply, diagnosis = tasks.index("response"), tasks.index("error")
    record = orjson.loads(lines[reply])
    record["turns"][-1]["text"] = PLANTED
    lines[reply] = orjson.dumps(record)
    record = orjson.loads(lines[diagnosis])
    record["metrics"]["error_pred"] = PLANTED  # a label outside the set: left out of the agreement
    record["turns"][-1]["text"] = orjson.dumps({"error": PLANTED}).decode()
    lines[diagnosis] = orjson.dumps(record)
    (copy / "episodes.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert main(["report", str(copy)]) == 0
    html = (copy / REPORT_HTML).read_text(encoding="utf-8")
    assert PLANTED not in html and "<script>alert" not in html and "<img" not in html
    assert html.count(ESCAPED) >= 2
    assert len(re.findall(r"<script\b", html)) == 1
    summary = orjson.loads((copy / "summary.json").read_bytes())["remath"]
    assert next(r for r in summary["agreement"] if r["label"] == "error")["n"] == 14


def test_fig_15_counts_the_tutors_and_the_experts_strategy_intention_pairs(run: Path) -> None:
    """The pairs are counted from the Task B records, independently of the summary's code."""
    data = orjson.loads((run / "summary.json").read_bytes())["remath"]
    expected: dict[tuple[str, str, str], int] = {}
    for line in (run / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        record = orjson.loads(line)
        if record["status"] != "ok" or record["condition"].get("task") != "strategy":
            continue
        for who, suffix in (("tutor", "pred"), ("expert", "gold")):
            pair = (who, record["metrics"][f"strategy_{suffix}"], record["metrics"][f"intention_{suffix}"])
            expected[pair] = expected.get(pair, 0) + 1
    found = {(r["who"], r["strategy"], r["intention"]): r["count"] for r in data["pairings"]}
    assert found == expected and sum(v for (who, *_), v in found.items() if who == "expert") == 15
    markdown = (run / "report.md").read_text(encoding="utf-8")
    assert "## Task B: strategy–intention pairings (the paper's Fig. 15)\n\n*Provenance: ReMath Fig. 15*" in markdown
    assert "| human (expert) |" in markdown  # Tables 1–2 as the paper lays them out: the human row
