"""Case data: the built-in set, the public TutorCaseBench layout (own invented fixture), retrieval, item sources."""

from __future__ import annotations

import contextlib
import string
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agents.cases_sim import applies, best_criterion
from engine import ITEM_SOURCES, ScenarioError
from personas.case_retrieval import tfidf_similarity
from personas.cases import (
    CHALLENGE_TYPES,
    Case,
    builtin_cases,
    case_of,
    load_cases,
    load_tutorcasebench,
    normalise_challenge,
)

BUILTIN = Path(__file__).resolve().parents[2] / "personas" / "cases.yaml"
PUBLIC_TYPES = (
    "Task Resistance",
    "Emotional Distress",
    "Social-Interpersonal Difficulty",
    "Attention/Engagement Failure",
    "Academic Struggle",
)


def test_builtin_set_has_three_cases_per_challenge_type() -> None:
    """At least 15 cases, 3 per type, each a 6-turn prefix ending in the student's challenging turn."""
    cases = builtin_cases()
    assert len(cases) >= 15
    assert Counter(c.challenge_type for c in cases) == {t: 3 for t in CHALLENGE_TYPES}
    for case in cases:
        assert [t.speaker for t in case.dialogue] == ["tutor", "student"] * 3
        assert case.dialogue[-1].challenging and not any(t.challenging for t in case.dialogue[:-1])
        assert case.strategies.immediate_effective and case.strategies.long_term_effective
        assert case.strategies.ineffective
        assert case.rubric("immediate") and case.rubric("long_term")
        assert case.full_context.trigger and case.full_context.behavior_patterns
    assert len({c.student.subject for c in cases}) >= 6 and len({c.student.grade for c in cases}) >= 6


def test_each_effective_strategy_grounds_its_own_criterion() -> None:
    """The data is written so criterion k comes from effective strategy k (the sim judge relies on it), and no
    ineffective strategy reads as an effective one."""
    for case in builtin_cases():
        for response in ("immediate", "long_term"):
            criteria = [c.model_dump() for c in case.rubric(response)]
            effective = case.strategies.effective(response)
            assert [best_criterion(s, criteria) for s in effective] == list(range(len(effective))), case.id
        everything = [*case.strategies.immediate_effective, *case.strategies.long_term_effective]
        for bad in case.strategies.ineffective:
            assert not any(applies(bad, good) or applies(good, bad) for good in everything), (case.id, bad)


def _case_data(**changes: Any) -> dict[str, Any]:
    data = builtin_cases()[0].model_dump(mode="json")
    data.update(changes)
    return data


def test_case_shape_is_checked() -> None:
    """A prefix must alternate, open with the tutor and end with exactly one challenging student turn."""
    good = _case_data()
    Case.model_validate(good, strict=False)
    no_flag = [dict(t, challenging=False) for t in good["dialogue"]]
    twice = [dict(t) for t in good["dialogue"]]
    twice[1]["challenging"] = True
    for dialogue in (no_flag, good["dialogue"][:-1], good["dialogue"][1:], twice):
        with pytest.raises(ValidationError):
            Case.model_validate(_case_data(dialogue=dialogue), strict=False)
    with pytest.raises(ValidationError):
        Case.model_validate(_case_data(challenge_type="boredom"), strict=False)


def test_bad_case_file_is_a_scenario_error(tmp_path: Path) -> None:
    """Broken YAML or a wrong field names the file and the place, never a traceback."""
    path = tmp_path / "mine.yaml"
    path.write_text("cases: [ {id: x", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"mine.yaml:\d+: invalid YAML"):
        load_cases(path)
    path.write_text(orjson.dumps({"cases": [_case_data(minimal_context="")]}).decode(), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"mine.yaml: invalid case file: cases\.0\.minimal_context"):
        load_cases(path)


# ---- the public layout, on an invented look-alike fixture -----------------------------------------------------


def _scenario(
    scenario_id: int, category: int, challenge: str, turns: list[tuple[str, str]], *, full: bool = True, flag: int = -1
) -> dict[str, Any]:
    dialogue = [{"turn_id": i + 1, "speaker": speaker, "message": text} for i, (speaker, text) in enumerate(turns)]
    dialogue[flag]["is_challenging_behavior"] = True
    data: dict[str, Any] = {
        "category_id": category,
        "category_title": f"Invented student {category}",
        "scenario_id": scenario_id,
        "scenario_title": f"Invented scenario {scenario_id}",
        "minimal_context": f"A made-up lesson number {scenario_id}.",
        "dialogue": dialogue,
        "dialogue_combined": "\n".join(text for _, text in turns),
        "immediate_dialogue_prompt": "(prompt)",
        "long_term_dialogue_prompt": "(prompt)",
        "challenge_type": challenge,
    }
    if full:
        data["full_context"] = {
            "scenario_id": scenario_id,
            "content": {
                "task": "Sort invented shapes.",
                "context": "An invented classroom.",
                "challenging_behavior_trigger": "Being asked twice.",
                "behavior_patterns": ["Sighs loudly."],
            },
        }
    return data


def _rubric(category: int, kind: str) -> dict[str, Any]:
    return {
        "category_id": category,
        "rubric_type": kind,
        "student_description": f"An invented student of category {category}.",
        "rubric": {
            "criteria": [
                {
                    "criterion_id": 1,
                    "criterion_name": "Offer a choice",
                    "rationale": "Made up.",
                    "check": "Gives a choice.",
                },
                {
                    "criterion_id": 2,
                    "criterion_name": "Shorten it",
                    "rationale": "Made up.",
                    "check": "Shortens the task.",
                },
            ]
        },
        "challenge_type": "Task Resistance",
    }


def write_public_fixture(root: Path, scenarios: list[dict[str, Any]] | None = None) -> Path:
    """An invented release in the public TutorCaseBench layout (the real one has no licence to copy)."""
    folders = {name: root / name for name in ("dialogue", "dialogue_full_context", "rubric", "mcq")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    scenarios = scenarios or [
        _scenario(
            11,
            1,
            "Task Resistance",
            [
                ("Tutor", "Let's sort the shapes."),
                ("Student", "Okay."),
                ("Tutor", "Now the blue ones."),
                ("Student", "No. I won't."),
            ],
        ),
        _scenario(
            12,
            2,
            "Social-Interpersonal Difficulty",
            [
                ("tutor", "Work with Ana."),
                ("student", "Fine."),
                ("tutor", "Share the glue."),
                ("student", "She never shares. I'm leaving."),
                ("tutor", "(extra turn after the flag)"),
            ],
            flag=3,
        ),
    ]
    for data in scenarios:
        name = f"scenario_{data['scenario_id']}.json"
        (folders["dialogue_full_context"] / name).write_bytes(orjson.dumps(data))
        (folders["dialogue"] / name).write_bytes(orjson.dumps({k: v for k, v in data.items() if k != "full_context"}))
        for kind in ("immediate", "long_term"):
            (folders["rubric"] / f"rubric_{data['category_id']}_{kind}.json").write_bytes(
                orjson.dumps(_rubric(data["category_id"], kind))
            )
    mcqs: list[dict[str, Any]] = [
        {
            "mcq_id": "11_immediate_0",
            "scenario_id": 11,
            "response_type": "immediate",
            "options": {"A": "Shout.", "B": "Offer a choice of shapes.", "C": "Ignore it.", "D": "Leave."},
            "correct_answer": "B",
            "challenge_type": "Task Resistance",
        },
        {
            "mcq_id": "11_long_term_binary",
            "scenario_id": 11,
            "response_type": "long-term",
            "options": {"A": "Plan short sorting rounds.", "B": "Punish refusals."},
            "correct_answer": "A",
            "challenge_type": "Task Resistance",
        },
        {"mcq_id": "99_orphan", "options": {"A": "x", "B": "y"}, "correct_answer": "A", "challenge_type": "?"},
    ]
    for mcq in mcqs:
        (folders["mcq"] / f"{mcq['mcq_id']}.json").write_bytes(orjson.dumps(mcq))
    return root


def test_public_layout_loader_reads_the_fixture(tmp_path: Path) -> None:
    """Dialogue cut at the flagged turn, types normalised, strategies recovered from MCQs, MCQs kept."""
    cases = {c.id: c for c in load_tutorcasebench(write_public_fixture(tmp_path / "tcb"))}
    assert set(cases) == {"tcb-11", "tcb-12"}
    first, second = cases["tcb-11"], cases["tcb-12"]
    assert first.challenge_type == "task_resistance" and second.challenge_type == "social_interpersonal"
    assert [t.speaker for t in second.dialogue] == ["tutor", "student", "tutor", "student"]
    assert second.dialogue[-1].text == "She never shares. I'm leaving." and second.dialogue[-1].challenging
    assert first.full_context.trigger == "Being asked twice."
    assert first.strategies.immediate_effective == ["Offer a choice of shapes."]
    assert first.strategies.long_term_effective == ["Plan short sorting rounds."]
    assert first.strategies.ineffective == ["Punish refusals."]
    assert sorted((m.response, m.variant, m.options[m.correct]) for m in first.mcqs) == [
        ("immediate", "mcq4", "Offer a choice of shapes."),
        ("long_term", "binary", "Plan short sorting rounds."),
    ]
    assert [c.id for c in first.rubric("long_term")] == [1, 2]
    assert first.student.description == "An invented student of category 1."


def test_public_layout_reads_latin1_and_rejects_garbage(tmp_path: Path) -> None:
    """The release mixes encodings: a cp1252 file is read; broken JSON or a wrong shape is a ScenarioError."""
    root = write_public_fixture(tmp_path / "tcb")
    path = root / "dialogue_full_context" / "scenario_11.json"
    data = orjson.loads(path.read_bytes())
    data["minimal_context"] = "Un café à l’école."
    path.write_bytes(orjson.dumps(data).decode().encode("cp1252"))
    assert {c.minimal_context for c in load_tutorcasebench(root)} >= {"Un café à l’école."}
    path.write_bytes(b"{not json")
    with pytest.raises(ScenarioError, match="scenario_11.json: not valid JSON"):
        load_tutorcasebench(root)
    path.write_bytes(orjson.dumps({"scenario_id": 1}))
    with pytest.raises(ScenarioError, match="not a TutorCaseBench scenario"):
        load_tutorcasebench(root)
    with pytest.raises(ScenarioError, match="not a TutorCaseBench checkout"):
        load_tutorcasebench(tmp_path)


_text = st.text(alphabet=string.ascii_letters + " .,'’éü?!", min_size=1, max_size=40).filter(str.strip)


@settings(max_examples=60)
@given(
    challenge=st.sampled_from(PUBLIC_TYPES),
    messages=st.lists(_text, min_size=2, max_size=8),
    casing=st.sampled_from([str.lower, str.title, str.upper]),
)
def test_public_dialogues_parse_to_valid_cases(
    tmp_path_factory: pytest.TempPathFactory, challenge: str, messages: list[str], casing: Any
) -> None:
    """Any alternating public dialogue becomes a valid case ending in its flagged student turn."""
    turns = [(casing("tutor" if i % 2 == 0 else "student"), m) for i, m in enumerate(messages)]
    if turns[-1][0].lower() != "student":
        turns.append((casing("student"), "No."))
    root = write_public_fixture(tmp_path_factory.mktemp("tcb"), [_scenario(5, 3, challenge, turns)])
    (case,) = load_tutorcasebench(root)
    assert case.challenge_type == normalise_challenge(challenge)
    assert [t.text for t in case.dialogue] == [m.strip() for _, m in turns]
    assert case.dialogue[-1].speaker == "student" and case.dialogue[-1].challenging


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_FIELDS = ("category_id", "scenario_id", "minimal_context", "dialogue", "challenge_type", "full_context")


@settings(max_examples=60)
@given(field=st.sampled_from((*_FIELDS, None)), value=_json)
def test_any_json_in_a_scenario_file_fails_cleanly(
    tmp_path_factory: pytest.TempPathFactory, field: str | None, value: Any
) -> None:
    """Whatever a scenario file holds (one field replaced, or the whole document), loading yields cases or a
    ScenarioError, never another exception."""
    root = write_public_fixture(tmp_path_factory.mktemp("tcb"))
    path = root / "dialogue_full_context" / "scenario_11.json"
    data = orjson.loads(path.read_bytes())
    if field is None:
        data = value
    else:
        data[field] = value
    path.write_bytes(orjson.dumps(data))
    with contextlib.suppress(ScenarioError):
        load_tutorcasebench(root)


@pytest.mark.seed_data
def test_public_release_when_present(seed_data: Path) -> None:
    """The real release, if a copy sits in ../shared/data/tutorcasebench (it has no licence, so usually not)."""
    root = seed_data / "tutorcasebench"
    if not root.is_dir():
        pytest.skip("no TutorCaseBench copy in ../shared/data")
    cases = load_tutorcasebench(root)
    assert cases and all(case.dialogue[-1].challenging for case in cases)


# ---- retrieval and item sources -------------------------------------------------------------------------------


def test_tfidf_similarity_is_a_cosine() -> None:
    similarity = tfidf_similarity(["quiet reading corner", "quiet reading corner", "loud football match"])
    assert similarity[0, 1] == pytest.approx(1.0) and similarity[0, 2] == pytest.approx(0.0)
    assert (similarity == similarity.T).all()


def test_case_source_ranks_other_cases(tmp_path: Path) -> None:
    """Each item carries every other case, most similar first, and never itself; options filter the set."""
    source = ITEM_SOURCES.get("cases")
    items = source(BUILTIN, {})
    assert len(items) == 15
    for item in items:
        near = item.data["neighbours"]
        assert len(near) == 14 and item.id not in {n["id"] for n in near}
        assert [n["similarity"] for n in near] == sorted((n["similarity"] for n in near), reverse=True)
        assert case_of(item).id == item.id and item.domain == case_of(item).challenge_type
    chosen = source(BUILTIN, {"challenge_types": ["emotional_distress"], "limit": 2})
    assert [i.domain for i in chosen] == ["emotional_distress"] * 2
    with pytest.raises(ScenarioError, match="references"):
        source(BUILTIN, {"references": -1})


def test_embedding_vectors_drive_the_ranking(tmp_path: Path) -> None:
    """With `retrieval: embeddings` the neighbours follow the user's vectors (here: a planted nearest case)."""
    ids = [c.id for c in builtin_cases()]
    vectors = {case_id: [1.0, float(i), 0.0] for i, case_id in enumerate(ids)}
    vectors[ids[7]] = [0.0, 0.0, 1.0]
    vectors[ids[3]] = [0.0, 0.1, 1.0]
    cases_file = tmp_path / "cases.yaml"
    cases_file.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "vectors.json").write_bytes(orjson.dumps(vectors))
    items = ITEM_SOURCES.get("cases")(cases_file, {"retrieval": "embeddings", "vectors": "vectors.json"})
    assert next(i for i in items if i.id == ids[7]).data["neighbours"][0]["id"] == ids[3]
    (tmp_path / "vectors.json").write_bytes(orjson.dumps({ids[0]: [1.0]}))
    with pytest.raises(ScenarioError, match="no vector for case"):
        ITEM_SOURCES.get("cases")(cases_file, {"retrieval": "embeddings", "vectors": "vectors.json"})
    with pytest.raises(ScenarioError, match="needs `vectors`"):
        ITEM_SOURCES.get("cases")(cases_file, {"retrieval": "embeddings"})


def test_public_source_builds_items(tmp_path: Path) -> None:
    items = ITEM_SOURCES.get("tutorcasebench")(write_public_fixture(tmp_path / "tcb"), {})
    assert [i.id for i in items] == ["tcb-11", "tcb-12"]
    assert items[0].data["neighbours"][0]["id"] == "tcb-12"
