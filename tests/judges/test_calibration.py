"""Label sources for calibration (MRBench, Bridge layouts) and a planted judge accuracy recovered end to end."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.remath_sim import STRATEGIES, strategy_of
from engine import Item, ModelSpec, ScenarioError
from engine.tools.calibrate._labels import LABEL_SOURCES, Dimension, Example, LabelSet
from engine.tools.calibrate._run import calibrate
from judges.calibration import BRIDGE_READERS, normalise_mrbench_label, split_history

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "scenarios" / "calibration" / "mrbench_sample.json"

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=30).filter(
    lambda t: t.strip() and ":" not in t
)


@given(
    st.lists(st.tuples(st.sampled_from(["Tutor", "Student"]), _TEXT), min_size=1, max_size=6),
    st.lists(st.sampled_from(["\u00a0\n\u00a0", "\n\u00a0", " \n ", "\n"]), min_size=6, max_size=6),
)
def test_history_split_recovers_turns_whatever_the_break(turns: list[tuple[str, str]], breaks: list[str]) -> None:
    text = "".join((breaks[i - 1] if i else "") + f"{role}: {body}" for i, (role, body) in enumerate(turns))
    parsed = split_history(text)
    assert [role for role, _ in parsed] == [role.lower() for role, _ in turns]
    assert [body for _, body in parsed] == [" ".join(body.replace("\u00a0", " ").split()) for _, body in turns]


def test_a_bare_newline_inside_a_turn_does_not_split_it() -> None:
    assert split_history("Tutor: line one\nline two\u00a0\n\u00a0Student: 5") == [
        ("tutor", "line one line two"),
        ("student", "5"),
    ]


@pytest.mark.parametrize(
    ("dimension", "value", "expected"),
    [
        ("humanlikeness", "yes", ("Humanlikeness", "Yes")),
        ("Humanness", "To some extent", ("Humanlikeness", "To some extent")),
        (
            "Revealing_of_the_Answer",
            "Yes (and the answer is correct)",
            ("Revealing_of_the_Answer", "Yes (and the answer is correct)"),
        ),
        ("Revealing_of_the_Answer", "Yes", None),
        ("Tutor_Tone", " Encouraging ", ("Tutor_Tone", "Encouraging")),
        ("Made_Up", "Yes", None),
    ],
)
def test_mrbench_spellings_are_normalised(dimension: str, value: str, expected: tuple[str, str] | None) -> None:
    assert normalise_mrbench_label(dimension, value) == expected


def test_mrbench_source_reads_the_shipped_fixture() -> None:
    labels = LABEL_SOURCES.get("mrbench")(FIXTURE, {})
    assert len(labels.examples) == 32
    example = next(e for e in labels.examples if e.id == "fx-001:Expert")
    assert example.history[-1][0] == "student" and example.item.answer == "24"
    assert example.labels["Humanlikeness"] == "Yes" and len(example.labels) == 8
    bridge = next(e for e in labels.examples if e.id == "fx-004:Novice")
    assert bridge.item.answer == ""  # "Not Available"
    assert len(LABEL_SOURCES.get("mrbench")(FIXTURE, {"tutors": ["Expert"], "data": "Bridge"}).examples) == 2
    assert len(LABEL_SOURCES.get("mrbench")(FIXTURE, {"limit": 1}).examples) == 4


@pytest.mark.parametrize("content", ["[]x", '[{"conversation_id": 1}]', '{"a": 1}'])
def test_bad_mrbench_files_are_scenario_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ScenarioError):
        LABEL_SOURCES.get("mrbench")(path, {})


def test_bridge_labels_are_the_expert_response_with_its_strategy(tmp_path: Path) -> None:
    from tests.personas.test_remath import bridge_record

    path = tmp_path / "validation.json"
    path.write_text(json.dumps([bridge_record("1_1", "guess", "provide_strategy", "support_thinking")]))
    labels = LABEL_SOURCES.get("bridge")(path, {})
    (example,) = labels.examples
    assert example.response.startswith("Nice try") and dict(example.labels) == {
        "strategy": "provide_strategy",
        "intention": "support_thinking",
    }


def _strategy_set(n: int, seed: int) -> LabelSet:
    """Responses whose strategy the sim's keyword rules read exactly, labelled with that strategy."""
    from agents.remath_sim import _REPLIES

    rng = random.Random(seed)
    examples = []
    for i in range(n):
        strategy = rng.choice([s for s in STRATEGIES if s != "other"])
        text = _REPLIES[strategy]
        assert strategy_of(text)[0] == strategy
        item = Item(id=f"s{i}", domain="mathematics", question="q", answer="")
        examples.append(Example(f"s{i}", item, (("student", "is it 9?"),), text, {"strategy": strategy}))
    dimension = Dimension("strategy", STRATEGIES)
    return LabelSet("planted", (dimension,), tuple(examples), {"remath_strategy": BRIDGE_READERS["remath_strategy"]})


@pytest.mark.parametrize("error_rate", [0.0, 0.3, 0.6])
def test_calibration_recovers_a_planted_judge_accuracy(error_rate: float) -> None:
    labels = _strategy_set(400, seed=3)
    spec = ModelSpec.model_validate({"model": "sim/judge", "params": {"error_rate": error_rate}})
    result = calibrate(labels, ["remath_strategy"], [spec], votes=1, seed=11)
    (row,) = result.judges["remath_strategy"]["dimensions"]
    expected = (1 - error_rate) + error_rate / len(STRATEGIES)  # a noisy draw can land on the truth
    assert row["exact"]["n"] == 400
    assert row["exact"]["accuracy"] == pytest.approx(expected, abs=0.06)
    assert result.calls["requests"] == 400


def test_a_judge_error_leaves_the_example_out() -> None:
    labels = _strategy_set(20, seed=1)
    spec = ModelSpec.model_validate({"model": "sim/judge", "params": {"invalid_rate": 1.0}})
    result = calibrate(labels, ["remath_strategy"], [spec], votes=1)
    assert result.judges["remath_strategy"]["errors"] == 20
    assert result.judges["remath_strategy"]["dimensions"][0]["exact"]["n"] == 0


@pytest.mark.seed_data
@pytest.mark.parametrize(("name", "responses"), [("MRBench_V1.json", 1589), ("MRBench_V2.json", 1655)])
def test_mrbench_source_on_the_public_files(seed_data: Path, name: str, responses: int) -> None:
    labels = LABEL_SOURCES.get("mrbench")(seed_data / "mrbench" / name, {})
    assert len(labels.examples) == responses
    assert all(e.history for e in labels.examples)
    human = [e.labels.get("Humanlikeness") for e in labels.examples]
    counts: Mapping[str, Any] = {label: human.count(label) for label in ("Yes", "To some extent", "No")}
    assert sum(counts.values()) == responses  # every lower-case `humanlikeness` label was read


@pytest.mark.seed_data
def test_mrbench_v3_layout_and_deterministic_baseline(seed_data: Path) -> None:
    labels = LABEL_SOURCES.get("mrbench")(seed_data / "mrbench" / "mrbench_v3_devset.json", {"limit": 40})
    assert labels.examples and {"Mistake_Identification", "Actionability"} <= set(labels.examples[0].labels)
    result = calibrate(labels, ["conversation_stats"], [])
    assert result.judges["conversation_stats"]["dimensions"][0]["exact"]["n"] > 0
