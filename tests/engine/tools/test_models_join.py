"""`simrun compare --tutors`: a study run as separate runs, one per labelled tutor, joined, gives the very tables of
the study run at once; runs of different scenarios are refused, naming what differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import engine
from engine.cli._main import main
from engine.tools.compare._join import join_tutor_runs
from tests.helpers import make_scenario, scenario_data

THREE: list[dict[str, Any]] = [
    {"label": "calm", "model": "sim/tutor", "params": {"leak_base": 0.05, "leak_per_turn": 0.02}},
    {"label": "mid", "model": "sim/tutor", "params": {"leak_base": 0.2, "leak_per_turn": 0.1}},
    {"label": "rash", "model": "sim/tutor", "params": {"leak_base": 0.6, "leak_per_turn": 0.2}},
]


def _run(base: Path, name: str, tutor: Any, **extra: Any) -> Path:
    folder = base / name
    folder.mkdir()
    scenario = make_scenario(folder, models={**scenario_data()["models"], "tutor": tutor}, **extra)
    return engine.run_sync(scenario, out=folder / "runs").run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("join")
    found = {"study": _run(base, "study", THREE)}
    found.update({str(spec["label"]): _run(base, str(spec["label"]), spec) for spec in THREE})
    return found


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((run_dir / "summary.json").read_bytes())
    return data


def test_separate_runs_joined_give_the_studys_tables(runs: dict[str, Path], tmp_path: Path) -> None:
    joined = join_tutor_runs([runs["calm"], runs["mid"], runs["rash"]], tmp_path / "joined")
    study = _summary(runs["study"])
    assert joined["models"] == study["models"]
    assert (tmp_path / "joined" / "report.md").read_text().count("Leaderboard") >= 1


def test_the_command_joins_and_refuses_other_scenarios(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", "--tutors", str(runs["calm"]), str(runs["rash"]), "--out", str(out)]) == 0
    assert "Leaderboard" in capsys.readouterr().out and (out / "report.html").exists()
    other = _run(tmp_path, "other", THREE[1], seed=8, judge_votes=1)
    code = main(["compare", "--tutors", str(runs["calm"]), str(other), "--out", str(tmp_path / "no")])
    message = capsys.readouterr().err
    assert code == 2 and "differ in: judge_votes, seed" in message


def test_plain_compare_refuses_a_study_of_several_tutors(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its episodes would collide by unit: the study's own report is where its tutors are compared."""
    assert main(["compare", str(runs["study"]), str(runs["calm"]), "--out", str(tmp_path / "c")]) == 2
    assert "study of several tutors" in capsys.readouterr().err


def test_joined_remath_runs_keep_the_human_condition_once(tmp_path: Path) -> None:
    """ReMath's `given: human` is played once by a study: joining the separate runs keeps one copy of it, so the
    joined tables equal the study's, its Human row included."""
    remath = Path(__file__).resolve().parents[3] / "scenarios" / "remath.yaml"
    tutors = [f"tutor={{label: {spec['label']}, model: sim/tutor}}" for spec in THREE[:2]]

    def run(name: str, models: list[str]) -> Path:
        scenario = engine.load_scenario(remath, overrides=["limit=12"], models=models)
        return engine.run_sync(scenario, out=tmp_path / name).run_dir

    study, parts = run("study", tutors), [run(f"part{k}", [tutor]) for k, tutor in enumerate(tutors)]
    joined = join_tutor_runs(parts, tmp_path / "joined")
    assert joined["models"] == _summary(study)["models"]
    assert joined["models"]["tables"]["human"] is not None and joined["models"]["tables"]["human_from"] is None
    lines = (tmp_path / "joined" / "episodes.jsonl").read_bytes().splitlines()
    free = [orjson.loads(line) for line in lines if b"given=human" in line]
    assert free and all(r["tutor"] is None and "tutor=" not in r["id"] for r in free)
