"""A study of several tutors: the spec, the command line's `--model tutor=...`, and the plan they make."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import ScenarioError, build, load_built
from engine.cli._main import main
from engine.scenario._items import Item
from engine.scenario._load import apply_overrides
from engine.scenario._plan import Episode, interleave_tutors
from engine.scenario._spec import measured
from tests.helpers import make_scenario, scenario_data, write_bank

TWO = [
    {"label": "calm", "model": "sim/tutor", "params": {"leak_base": 0.05}},
    {"label": "rash", "model": "sim/tutor", "params": {"leak_base": 0.5}},
]


def _models(tutor: Any) -> dict[str, Any]:
    return {**scenario_data()["models"], "tutor": tutor}


def test_one_tutor_keeps_its_ids_seeds_and_hash(tmp_path: Path) -> None:
    """The same study with one tutor and with two: each tutor's ids are the one-tutor ids plus its label, the
    seeds and the unit order are the same, and a one-tutor scenario's hash has no trace of labels."""
    one = build(make_scenario(tmp_path))
    two = build(make_scenario(tmp_path, models=_models(TWO)))
    assert not any("tutor=" in e.id for e in one.episodes) and all(e.tutor is None for e in one.episodes)
    assert "label" not in str(measured(one.scenario.resolved()))
    for label in ("calm", "rash"):
        mine = [e for e in two.episodes if e.tutor == label]
        assert [e.id for e in mine] == [f"{e.id}|tutor={label}" for e in one.episodes]
        assert [e.seed for e in mine] == [e.seed for e in one.episodes]
    assert len(two.episodes) == 2 * len(one.episodes)


def test_only_the_tutors_own_calls_are_keyed_by_the_tutor(tmp_path: Path) -> None:
    built = build(make_scenario(tmp_path, models=_models(TWO)))
    rash = next(e for e in built.episodes if e.tutor == "rash")
    calm = next(e for e in built.episodes if e.id == rash.id.replace("tutor=rash", "tutor=calm"))
    for parts in (("student", 3, 0), ("attacker", 1, 0), ("budget",), ("harm", 2, 0, 0)):
        assert calm.seed_for(*parts) == rash.seed_for(*parts)
    assert calm.seed_for("tutor", 2) != rash.seed_for("tutor", 2)


def build_episode(n: int) -> Episode:
    return Episode(f"i{n}||r0", Item(id=f"i{n}", domain="d", question="q", answer="1"), {}, 0, n)


@settings(max_examples=60, deadline=None)
@given(units=st.integers(1, 30), tutors=st.integers(1, 6), stop=st.integers(0, 200))
def test_any_prefix_of_an_interleaved_plan_is_balanced(units: int, tutors: int, stop: int) -> None:
    """Admission follows the plan, so a run stopped anywhere has every tutor within one episode of the others."""
    labels = tuple(f"t{k}" for k in range(tutors))
    plan = interleave_tutors([build_episode(n) for n in range(units)], labels)
    assert len(plan) == units * tutors and len({e.id for e in plan}) == len(plan)
    counts = Counter(e.tutor for e in plan[:stop])
    shown = [counts.get(label, 0) for label in labels]
    assert max(shown) - min(shown) <= 1


def test_repeated_model_flags_make_a_tutor_list_and_one_keeps_a_spec() -> None:
    data = scenario_data()
    one = apply_overrides(data, models=["tutor=sim/tutor"])
    assert one["models"]["tutor"] == "sim/tutor"
    many = apply_overrides(data, models=["tutor={model: sim/tutor, label: a}", "tutor={model: sim/tutor, label: b}"])
    assert many["models"]["tutor"] == [{"model": "sim/tutor", "label": "a"}, {"model": "sim/tutor", "label": "b"}]


@pytest.mark.parametrize(
    ("tutor", "expected"),
    [
        ([{"model": "sim/tutor"}, {"model": "sim/tutor"}], "tutors share the label 'tutor'"),
        ([{"model": "sim/tutor", "label": "a b"}], "models.tutor.0.label"),
        ([], "needs at least one model"),
    ],
)
def test_bad_tutor_lists_are_refused_clearly(tmp_path: Path, tutor: Any, expected: str) -> None:
    write_bank(tmp_path / "bank.yaml")
    with pytest.raises(ScenarioError, match=expected.replace(".", r"\.")):
        make_scenario(tmp_path, models=_models(tutor))


def test_the_cap_counts_every_tutor(tmp_path: Path) -> None:
    one = build(make_scenario(tmp_path))
    with pytest.raises(ScenarioError, match="over the limit"):
        build(make_scenario(tmp_path, models=_models(TWO), max_episodes=len(one.episodes) * 2 - 1))


def test_the_estimate_is_per_tutor(tmp_path: Path) -> None:
    totals = build(make_scenario(tmp_path, models=_models(TWO))).estimate()
    assert {"tutor calm", "tutor rash", "student", "judge"} <= set(totals) and "tutor" not in totals
    assert totals["tutor calm"].calls == totals["tutor rash"].calls > 0


REMATH = Path(__file__).resolve().parents[3] / "scenarios" / "remath.yaml"
TWO_FLAGS = [f"tutor={{label: {spec['label']}, model: sim/tutor}}" for spec in TWO]


def test_a_tutor_free_condition_is_planned_once_per_study(capsys: pytest.CaptureFixture[str]) -> None:
    """ReMath's design declares `given: human` tutor-free: a 2-tutor study plays it as often as one tutor does,
    with the one-tutor ids and seeds; the rest is played by each tutor, and the cap and estimate count it once."""
    one = load_built(REMATH, check_credentials=False)
    two = load_built(REMATH, models=TWO_FLAGS, check_credentials=False)
    free = [e for e in one.episodes if e.condition.get("given") == "human"]
    shared = [e for e in two.episodes if e.tutor is None]
    assert free and [(e.id, e.seed) for e in shared] == [(e.id, e.seed) for e in free]
    assert all(e.condition.get("given") == "human" for e in shared)
    assert not any("tutor=" in e.id for e in one.episodes) and all(e.tutor is None for e in one.episodes)
    for label in ("calm", "rash"):
        mine = [(e.id, e.seed) for e in two.episodes if e.tutor == label]
        assert mine == [(f"{e.id}|tutor={label}", e.seed) for e in one.episodes if e not in free]
    assert len(two.episodes) == 2 * len(one.episodes) - len(free)
    load_built(REMATH, models=TWO_FLAGS, overrides=[f"max_episodes={len(two.episodes)}"], check_credentials=False)
    with pytest.raises(ScenarioError, match="over the limit"):
        load_built(REMATH, models=TWO_FLAGS, overrides=[f"max_episodes={len(two.episodes) - 1}"])
    alone, both = one.estimate(), two.estimate()
    assert "tutor" not in both and both["tutor calm"] == both["tutor rash"] == alone["tutor"]
    assert both["judge"].calls == 2 * alone["judge"].calls - sum(
        one.protocol.estimate(one, e)["judge"].calls for e in free
    )
    flags = [part for flag in TWO_FLAGS for part in ("--model", flag)]
    assert main([str(REMATH), "--dry-run", *flags]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert f"{len(two.episodes)} episodes = " in said and f"the {len(free)} tutor-free ones are played once" in said
