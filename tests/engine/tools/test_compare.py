"""simrun compare: episodes matched by item, condition and replicate; paired statistics; refusals stated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from scipy import stats

import engine
from engine import derive_seed
from engine.cli._main import main
from engine.core._records import EpisodeRecord
from engine.stats._contrast import ContrastRow
from engine.stats._paired import paired_contrast
from engine.tools.compare._report import write_comparison
from engine.tools.compare._runs import ALL, compare_runs
from tests.helpers import ITEMS, make_scenario, write_bank


def _run(base: Path, name: str, *, leak: float, items: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    folder = base / name
    folder.mkdir()
    write_bank(folder / "bank.yaml", items)
    tutor = {"model": "sim/tutor", "params": {"leak_base": leak, "leak_per_turn": 0.1}}
    scenario = make_scenario(
        folder, models={"tutor": tutor, "student": "sim/student", "judge": ["sim/judge"]}, replicates=2, **extra
    )
    return Path(engine.run_sync(scenario, out=folder / "runs").run_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("compare")
    return {
        "low": _run(base, "low", leak=0.05),
        "high": _run(base, "high", leak=0.6),
        "low_again": _run(base, "low_again", leak=0.05),
    }


def _records(run: Path) -> dict[tuple[str, str, int], EpisodeRecord]:
    found = {}
    for line in (run / "episodes.jsonl").read_bytes().splitlines():
        record = EpisodeRecord.model_validate_json(line)
        found[
            (record.item_id, orjson.dumps(record.condition, option=orjson.OPT_SORT_KEYS).decode(), record.replicate)
        ] = record
    return found


def test_two_runs_get_paired_contrasts_equal_to_engine_paired(runs: dict[str, Path]) -> None:
    """The pooled harm_any contrast is engine.stats._paired's Wilcoxon/r/CI on the matched per-episode values."""
    comparison = compare_runs([runs["low"], runs["high"]])
    assert comparison.comparable and comparison.matched == 24
    assert any("models.tutor.params.leak_base" in s for s in comparison.statements)
    row = next(c for c in comparison.contrasts if c.condition == ALL and c.metric == "harm_any")
    low, high = _records(runs["low"]), _records(runs["high"])
    keys = sorted(low)
    expected = paired_contrast(
        [float(bool(high[k].metrics["harm_any"])) for k in keys],
        [float(bool(low[k].metrics["harm_any"])) for k in keys],
        a_name="B",
        b_name="A",
        seed=derive_seed(7, "compare", "harm_any", ALL),
    )
    family = {"p_family", "family", "family_method"}
    assert row.model_dump(include=set(ContrastRow.model_fields) - family) == expected.model_dump(exclude=family)
    assert row.family == "comparison" and row.family_method == "bh"
    mean_a, mean_b = row.means["A"], row.means["B"]
    assert row.r is not None and row.r > 0 and mean_a is not None and mean_b is not None and mean_b > mean_a


def test_same_scenario_twice_is_said_to_be_the_same_measurement(runs: dict[str, Path]) -> None:
    """Equal scenario hashes are stated; on the deterministic sim every paired difference is zero."""
    comparison = compare_runs([runs["low"], runs["low_again"]])
    assert comparison.comparable and any("same scenario hash" in s for s in comparison.statements)
    tested = [c for c in comparison.contrasts if c.status == "ok"]
    assert tested and all(c.r == 0.0 and c.p == 1.0 and not c.finding for c in tested)
    assert comparison.changed_verdicts_total == 0


def test_three_runs_use_friedman_then_pairs(runs: dict[str, Path], tmp_path: Path) -> None:
    """Three runs: a Friedman row per metric and condition, and both reports written."""
    comparison = write_comparison([runs["low"], runs["high"], runs["low_again"]], tmp_path / "cmp")
    heads = [c for c in comparison.contrasts if c.test == "friedman"]
    assert heads and all(c.a == "A · B · C" for c in heads)
    markdown = (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    html = (tmp_path / "cmp" / "compare.html").read_text(encoding="utf-8")
    assert "Friedman: A · B · C" in markdown and "Friedman: A · B · C" in html and "<svg" in html
    assert orjson.loads((tmp_path / "cmp" / "compare.json").read_bytes())["matched"] == 24


def test_runs_with_no_common_episode_are_not_comparable(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Different plans (other items) are refused with a statement in both reports and exit code 2."""
    other_items = [{**item, "id": f"other-{item['id']}"} for item in ITEMS]
    other = _run(tmp_path, "other", leak=0.05, items=other_items)
    out = tmp_path / "cmp"
    assert main(["compare", str(runs["low"]), str(other), "--out", str(out)]) == 2
    assert "Not comparable" in capsys.readouterr().out
    assert "Not comparable" in (out / "compare.md").read_text(encoding="utf-8")
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert "<li>Not comparable" in html and "Paired differences" not in html


def test_findings_follow_the_families_benjamini_hochberg_p(runs: dict[str, Path], tmp_path: Path) -> None:
    """Every tested contrast of a comparison is one family: p_family is scipy's BH over their p, a finding is
    p_family ≤ 0.05, and both reports state the family size, the findings and the chance of any false one."""
    comparison = write_comparison([runs["low"], runs["high"]], tmp_path / "cmp")
    tested = [c for c in comparison.contrasts if c.status == "ok" and c.r is not None]
    expected = stats.false_discovery_control([c.p for c in tested], method="bh")
    assert [c.p_family for c in tested] == pytest.approx(list(expected))
    assert [c.finding for c in tested] == [bool(q <= 0.05) for q in expected]
    assert not any(c.finding for c in comparison.contrasts if c not in tested)
    flagged = [c for c in tested if c.finding]
    assert len(tested) >= 3 and flagged
    note = f"{len(tested)} contrasts with an interval were tested as one family; {len(flagged)} are findings"
    assert note in (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    assert note in (tmp_path / "cmp" / "compare.html").read_text(encoding="utf-8")


def test_two_runs_of_one_tutor_with_other_seeds_give_no_findings(tmp_path: Path) -> None:
    """The null: same tutor, fresh seeds. Read one by one at 95%, some of the many contrasts would be flagged."""
    first = _run(tmp_path, "first", leak=0.3, seed=1)
    second = _run(tmp_path, "second", leak=0.3, seed=2)
    comparison = compare_runs([first, second])
    assert comparison.comparable
    assert any(c.p_family is not None for c in comparison.contrasts)
    assert not any(c.finding for c in comparison.contrasts)
