"""Retrieval never hands a case its own answer key: siblings of one student (sharing its rubric) and of one
scenario family (one source paper) are never references or distractors."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from agents.cases import build_mcq, reference_strategies, task_prompt
from engine import ITEM_SOURCES, Item
from personas.case_retrieval import case_text, tfidf_similarity
from personas.cases import case_of, load_tutorcasebench
from tests.personas.test_cases import write_public_fixture

_LESSON = [
    ("Tutor", "Let's read the invented poem about rivers aloud together."),
    ("Student", "I read the first line already."),
    ("Tutor", "Now read the second line about the river bend."),
    ("Student", "No. Reading aloud about rivers is stupid. I'm not reading."),
]


def _scenario(scenario_id: int, category: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    dialogue = [{"turn_id": i + 1, "speaker": s, "message": t} for i, (s, t) in enumerate(turns)]
    dialogue[-1]["is_challenging_behavior"] = True
    return {
        "category_id": category,
        "category_title": f"Invented student {category}",
        "scenario_id": scenario_id,
        "minimal_context": f"An invented reading lesson, number {scenario_id}.",
        "dialogue": dialogue,
        "challenge_type": "Task Resistance",
    }


def _other(n: int) -> list[tuple[str, str]]:
    return [
        ("Tutor", f"Let's count invented marbles, set {n}."),
        ("Student", "Sure."),
        ("Tutor", "Now group them by colour."),
        ("Student", f"I don't want to group marbles {n}."),
    ]


_TAG = {"7-1": "kestrel", "7-2": "heron", "8-1": "falcon", "9-1": "osprey", "10-1": "plover"}
_OWN = {
    "8-1": "Turn the counting into a bead game with a visible finish line.",
    "9-1": "Pair the student with a calm buddy who counts the second half.",
    "10-1": "Set a sand timer and promise a short stretch break when it runs out.",
}


def _rubric_text(category: str) -> list[tuple[str, str]]:
    """(criterion name, check): unique wording per category, so any leak is visible."""
    tag = _TAG[category]
    return [(f"The {tag} choice", f"Uses the {tag} approach: lets the student pick which line to read.")]


def _effective(category: str) -> str:
    """Paper 7's strategies echo their rubric (the leak vector); the unrelated cases have their own."""
    return _OWN.get(category) or f"Do what the rubric says. {_rubric_text(category)[0][1]}"


def write_leaky_release(root: Path) -> Path:
    """Scenario 21 (category 7-1) has a near-twin 22 of the same student, and 23 of another student in the same
    source paper (7-2); 31, 32, 33 are unrelated. Each scenario's MCQs echo its category's rubric, as the
    release's strategies do, so a sibling reference would carry 21's answer key."""
    scenarios = [
        _scenario(21, "7-1", _LESSON),
        _scenario(22, "7-1", [(s, t.replace("first", "opening")) for s, t in _LESSON]),
        _scenario(23, "7-2", [(s, t.replace("rivers", "lakes")) for s, t in _LESSON]),
        *(_scenario(30 + n, f"{7 + n}-1", _other(n)) for n in (1, 2, 3)),
    ]
    write_public_fixture(root, scenarios)
    for data in scenarios:
        category = data["category_id"]
        for kind in ("immediate", "long_term"):
            criteria = [
                {"criterion_id": i + 1, "criterion_name": name, "rationale": "Invented.", "check": check}
                for i, (name, check) in enumerate(_rubric_text(category))
            ]
            rubric = {
                "category_id": category,
                "rubric_type": kind,
                "student_description": f"An invented student of category {category}.",
                "rubric": {"criteria": criteria},
            }
            (root / "rubric" / f"rubric_{category}_{kind}.json").write_bytes(orjson.dumps(rubric))
        check = _effective(category)
        for kind in ("immediate", "long_term"):
            mcq = {
                "mcq_id": f"{data['scenario_id']}_{kind}_0",
                "scenario_id": data["scenario_id"],
                "response_type": kind,
                "options": {"A": check, "B": "Shout.", "C": "Leave.", "D": "Ignore it."},
                "correct_answer": "A",
            }
            (root / "mcq" / f"{mcq['mcq_id']}.json").write_bytes(orjson.dumps(mcq))
        binary = {
            "mcq_id": f"{data['scenario_id']}_immediate_binary",
            "scenario_id": data["scenario_id"],
            "response_type": "immediate",
            "options": {"A": check, "B": f"Scold the {_TAG[category]} student in front of the class."},
            "correct_answer": "A",
        }
        (root / "mcq" / f"{binary['mcq_id']}.json").write_bytes(orjson.dumps(binary))
    return root


def _items(root: Path, **options: Any) -> dict[str, Item]:
    return {i.id: i for i in ITEM_SOURCES.get("tutorcasebench")(root, {"references": 5, **options})}


def test_the_loader_records_each_scenarios_student_and_family(tmp_path: Path) -> None:
    cases = {c.id: c for c in load_tutorcasebench(write_leaky_release(tmp_path / "tcb"))}
    assert cases["tcb-21"].student_key == cases["tcb-22"].student_key == "category:7-1"
    assert cases["tcb-21"].family == cases["tcb-23"].family == "paper:7"
    assert cases["tcb-23"].student_key != cases["tcb-21"].student_key
    assert cases["tcb-21"].related(cases["tcb-22"]) and cases["tcb-21"].related(cases["tcb-23"])
    assert not cases["tcb-21"].related(cases["tcb-31"])


def test_without_the_exclusion_the_twin_would_be_the_nearest_case(tmp_path: Path) -> None:
    """The control: lexically, the sibling is by far the closest, so the exclusion below is doing the work."""
    cases = load_tutorcasebench(write_leaky_release(tmp_path / "tcb"))
    similarity = tfidf_similarity([case_text(c) for c in cases])
    ids = [c.id for c in cases]
    target = ids.index("tcb-21")
    ranked = sorted((j for j in range(len(ids)) if j != target), key=lambda j: -similarity[target, j])
    assert {ids[ranked[0]], ids[ranked[1]]} == {"tcb-22", "tcb-23"}


def test_no_rubric_text_of_the_target_reaches_its_references_or_options(tmp_path: Path) -> None:
    root = write_leaky_release(tmp_path / "tcb")
    items = _items(root)
    for item in items.values():
        case = case_of(item)
        assert all(not case.related(case_of(items[n["id"]])) for n in item.data["neighbours"])
        secret = [text for criteria in case.rubrics.values() for c in criteria for text in (c.name, c.check)]
        for response in ("immediate", "long_term"):
            prompt = task_prompt(case, response, reference_strategies(item, response))
            assert "REFERENCE" in prompt
            neighbour_text = orjson.dumps(item.data["neighbours"]).decode()
            assert not any(text in prompt or text in neighbour_text for text in secret)
    assert [n["id"] for n in items["tcb-21"].data["neighbours"]] == ["tcb-31", "tcb-32", "tcb-33"]


def test_built_distractors_never_come_from_a_relative(tmp_path: Path) -> None:
    """Without the release's own MCQs, 4-option items draw on neighbours only: never the twin's strategies."""
    root = write_leaky_release(tmp_path / "tcb")
    item = _items(root)["tcb-21"]
    case = case_of(item).model_copy(update={"mcqs": []})

    mcq = build_mcq(item, case, "immediate", "mcq4", random.Random(0))
    assert mcq is not None and mcq.strategy == _effective("7-1")
    assert sorted(o for o in mcq.options if o != mcq.strategy) == sorted(_OWN.values())
