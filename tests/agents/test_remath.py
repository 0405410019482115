"""The remediation protocol: conditions, label parsing, planted diagnosis accuracy, invalid output."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.remath import RemathDesign, parse_error_label, parse_strategy_labels, remath_messages
from engine import EpisodeContext, Utterance, build_scenario, run_sync
from engine.scenario._plan import load_items, plan_episodes
from personas.remath import BUILTIN_ITEMS, ERROR_TYPES, INTENTIONS, STRATEGIES


def remath_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "remath-test",
        "kind": "remediation",
        "seed": 5,
        "models": {
            "tutor": {"model": "sim/tutor", "params": {"diagnose_rate": 0.5, "strategy_rate": 0.3}},
            "judge": [{"model": "sim/judge", "params": {"error_rate": 0.0}}],
        },
        "judge_votes": 1,
        "items": [{"source": "remath", "path": str(BUILTIN_ITEMS)}],
        "design": {"name": "remath"},
        "tutor": {"agent": "remediation"},
        "student": {"strategy": "mistake"},
        "judges": ["remath_pairwise", "answer_leak"],
    }
    data.update(overrides)
    return data


def test_design_conditions_and_pairing(tmp_path: Path) -> None:
    scenario = build_scenario(remath_data(), base_dir=tmp_path)
    design = RemathDesign(RemathDesign.Options())
    assert design.conditions() == [
        {"task": "error", "given": "none"},
        {"task": "strategy", "given": "none"},
        *({"task": "response", "given": g} for g in ("none", "error", "strategy", "both", "predicted", "human")),
    ]
    episodes = plan_episodes(scenario, load_items(scenario))
    assert len(episodes) == 8 * len(load_items(scenario))
    seeds: dict[str, set[int]] = {e.item.id: set() for e in episodes}
    for e in episodes:
        seeds[e.item.id].add(e.seed)
    assert all(len(s) == 1 for s in seeds.values())  # every condition of an item shares its seed


def test_prompts_carry_exactly_the_given_information(tmp_path: Path) -> None:
    scenario = build_scenario(remath_data(), base_dir=tmp_path)
    episode = next(e for e in plan_episodes(scenario, load_items(scenario)) if e.item.id == "rm-03")
    texts = {g: remath_messages(episode, task="response", given=g)[0]["content"] for g in ("none", "error", "both")}
    error_text, strategy_text = ERROR_TYPES["careless"], STRATEGIES["provide_hint"]
    assert error_text not in texts["none"] and strategy_text not in texts["none"]
    assert error_text in texts["error"] and strategy_text not in texts["error"]
    assert error_text in texts["both"] and strategy_text in texts["both"]
    user = remath_messages(episode, task="error")[1]["content"]
    assert "STUDENT: 63" in user and "Adding two-digit numbers" in user


@given(st.sampled_from(list(ERROR_TYPES)), st.sampled_from(["{}", "```json\n{}\n```", "Sure! {} Hope it helps."]))
def test_error_label_parsing(label: str, wrapper: str) -> None:
    text = wrapper.replace("{}", json.dumps({"error": label.upper() if label != "N/A" else label}))
    assert parse_error_label(text) == label


@given(st.sampled_from(list(STRATEGIES)), st.sampled_from(list(INTENTIONS)), st.booleans())
def test_strategy_labels_accept_keys_and_paper_names(strategy: str, intention: str, names: bool) -> None:
    shown = (STRATEGIES[strategy], INTENTIONS[intention]) if names else (strategy, intention)
    assert parse_strategy_labels(json.dumps({"strategy": shown[0], "intention": shown[1]})) == (strategy, intention)


@given(st.text(max_size=80))
def test_garbage_is_a_value_error_never_another_exception(text: str) -> None:
    with contextlib.suppress(ValueError):
        assert parse_error_label(text) in ERROR_TYPES
    with contextlib.suppress(ValueError):
        strategy, intention = parse_strategy_labels(text)
        assert strategy in STRATEGIES and intention in INTENTIONS


@pytest.mark.parametrize("text", ['{"error": "lazy"}', '{"strategy": "ask_question"}', '{"error": 3}', "nope"])
def test_invalid_labels_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_error_label(text) if "error" in text else parse_strategy_labels(text)


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_planted_diagnosis_accuracy_is_recovered_exactly_at_the_extremes(tmp_path: Path, rate: float) -> None:
    models = {"tutor": {"model": "sim/tutor", "params": {"diagnose_rate": rate, "strategy_rate": rate}}}
    scenario = build_scenario(
        remath_data(models=models, design={"name": "remath", "tasks": ["error", "strategy"]}, judges=[]),
        base_dir=tmp_path,
    )
    result = run_sync(scenario, out=tmp_path / "runs")
    rows = {row["label"]: row for row in result.summary["remath"]["agreement"]}
    assert rows["error"]["match"] == rate and rows["strategy"]["match"] == rate
    assert rows["intention"]["match"] == rate
    assert rows["error"]["n"] == 26


def test_planted_diagnosis_accuracy_is_recovered_on_average(tmp_path: Path) -> None:
    models = {"tutor": {"model": "sim/tutor", "params": {"diagnose_rate": 0.6}}}
    scenario = build_scenario(
        remath_data(models=models, design={"name": "remath", "tasks": ["error"]}, judges=[], replicates=12),
        base_dir=tmp_path,
    )
    result = run_sync(scenario, out=tmp_path / "runs")
    (row,) = result.summary["remath"]["agreement"]
    assert row["n"] == 26 * 12
    assert row["match"] == pytest.approx(0.6, abs=0.07)
    assert row["kappa"] is not None and 0.4 < row["kappa"] < 0.65  # kappa below match: chance agreement removed


class _Garbage:
    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        return Utterance("I think the student guessed.", model="test/garbage")


def test_invalid_classifications_are_retried_then_an_error_record(tmp_path: Path) -> None:
    scenario = build_scenario(
        remath_data(design={"name": "remath", "tasks": ["error"], "min_items": 1}, judges=[], limit=2),
        base_dir=tmp_path,
    )
    result = run_sync(scenario, out=tmp_path / "runs", tutor=_Garbage())
    assert result.errors == 2 and result.exit_code == 3
    lines = [json.loads(x) for x in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    record = lines[0]
    assert record["error"]["type"] == "BadModelOutput"
    hidden = [t for t in record["turns"] if not t["visible_to_tutor"]]
    assert len(hidden) == 3  # the original attempt and two retries, kept but hidden


def test_dry_run_estimates_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli._main import main

    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(remath_data()), encoding="utf-8")
    assert main(["run", str(path), "--dry-run"]) == 0
    assert "208 episodes" in capsys.readouterr().out
