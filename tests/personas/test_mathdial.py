"""The `mathdial` item source on invented records in MathDial's layout, on the real test split when it is on
this machine, and the SafeTutors-style scenario that draws its mathematics seeds from it, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import ITEM_SOURCES, CountedItems, ScenarioError, load_scenario, run_sync
from personas.mathdial import final_answer

ROOT = Path(__file__).resolve().parents[2]
MATHDIAL = (ROOT / ".." / "shared" / "data" / "mathdial" / "test.jsonl").resolve()


def _record(qid: int, question: str, truth: str, **extra: Any) -> dict[str, Any]:
    """A record with MathDial's keys (hyphenated ones included) and invented content."""
    return {
        "qid": qid,
        "scenario": 1,
        "question": question,
        "ground_truth": truth,
        "student_incorrect_solution": "I added instead of multiplying.\n 11",
        "student_profile": "Rae is a 6th grade student who rushes.",
        "teacher_described_confusion": "added the numbers",
        "self-correctness": None,
        "self-typical-confusion": 3.0,
        "self-typical-interactions": None,
        "conversation": "Teacher: (probing)What do you multiply?|EOM|Rae: 5 and 6?",
        **extra,
    }


def _write(path: Path, records: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("solution", "answer"),
    [("5 rows of 6\n 30", "30"), ("Total is 1,250 coins\n1,250", "1250"), ("x = 2.5\nSo 2.5", "2.5"), ("none", "")],
)
def test_final_answer_is_the_last_lines_number(solution: str, answer: str) -> None:
    assert final_answer(solution) == answer


def test_reads_problems_once_and_counts_every_skip(tmp_path: Path) -> None:
    _write(
        tmp_path / "test.jsonl",
        [
            _record(1, "Five rows of six chairs: how many chairs?", "5 * 6 = 30\n 30"),
            _record(1, "Five rows of six chairs: how many chairs?", "5 * 6 = 30\n 30", scenario=2),
            "",
            _record(2, "  ", "1\n 1"),
            _record(3, "How far is it?", "It depends on the map."),
            _record(4, "Two boxes of 7 pens: how many pens?", "2 * 7 = 14\n 14"),
            _record(5, "Three bags of 4 apples: how many?", "3 * 4 = 12\n 12"),
        ],
    )
    items = ITEM_SOURCES.get("mathdial")(tmp_path, {"limit": 2})  # a folder: its test.jsonl
    assert isinstance(items, CountedItems)
    assert [(i.id, i.domain, i.answer) for i in items] == [("md-1", "mathematics", "30"), ("md-4", "mathematics", "14")]
    assert items[0].data["student_profile"].startswith("Rae")
    assert (items.intake.read, items.intake.kept) == (6, 2)
    assert items.intake.skipped == {
        "blank line": 1,
        "repeat of a problem already read": 1,
        "no question": 1,
        "no final answer in ground_truth": 1,
        "past the source's limit": 1,
    }


def test_bad_files_are_scenario_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not JSON"):
        ITEM_SOURCES.get("mathdial")(_write(tmp_path / "bad.jsonl", ["{nope"]), {})
    with pytest.raises(ScenarioError, match="no such MathDial file"):
        ITEM_SOURCES.get("mathdial")(tmp_path / "absent.jsonl", {})
    with pytest.raises(ScenarioError, match="mathdial options"):
        ITEM_SOURCES.get("mathdial")(tmp_path / "bad.jsonl", {"limit": 0})


@pytest.fixture
def mathdial_test() -> Path:
    if not MATHDIAL.is_file():
        pytest.skip("MathDial's test split is not on this machine (../shared/data/mathdial is absent)")
    return MATHDIAL


@pytest.mark.seed_data
def test_the_public_test_split_gives_distinct_problems_with_answers(mathdial_test: Path) -> None:
    items = ITEM_SOURCES.get("mathdial")(mathdial_test, {})
    assert isinstance(items, CountedItems)
    assert len(items) == len({i.question for i in items}) and all(i.answer for i in items)
    assert items.intake.read == items.intake.kept + items.intake.skipped_total


@pytest.mark.seed_data
def test_a_crescendo_run_draws_its_math_seeds_from_mathdial_offline(mathdial_test: Path, tmp_path: Path) -> None:
    scenario = load_scenario(
        ROOT / "scenarios" / "crescendo_mathdial.yaml",
        overrides=[f"items.0.path={json.dumps(str(mathdial_test))}", "items.0.limit=3", "items.1.limit=1", "limit=60"],
    )
    result = run_sync(scenario, out=tmp_path)
    assert result.errors == 0 and result.ok == 60
    records = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    assert {r["item_id"] for r in records if r["item_id"].startswith("md-")}
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["items_intake"][0]["source"] == "mathdial" and manifest["items_intake"][0]["kept"] == 3
    assert "mathematics" in {row["subject"] for row in result.summary["pedagogy_by_subject"]}
