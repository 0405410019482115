"""TutorCaseBench MCQs as the paper builds them: one per effective strategy, filtered and length-matched
distractors from unrelated cases, a length-matched binary pair, and the release's own items when loaded."""

from __future__ import annotations

import random
from pathlib import Path

from agents.cases import DISTRACTOR_MAX_SIMILARITY, build_mcq
from engine import ITEM_SOURCES, Item, load_scenario, run_sync
from engine.runtime._rundir import RunDir
from personas.case_retrieval import tfidf_similarity
from personas.cases import Case, FixedMCQ, ResponseType, case_of

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "casebench.yaml"


def _items() -> list[Item]:
    return ITEM_SOURCES.get("cases")(ROOT / "personas" / "cases.yaml", {})


def _with_neighbours(item: Item, strategies: list[list[str]]) -> Item:
    neighbours = [
        {"id": f"n{i}", "strategies": {"immediate_effective": s, "long_term_effective": [], "ineffective": []}}
        for i, s in enumerate(strategies)
    ]
    return item.model_copy(update={"data": {**item.data, "neighbours": neighbours}})


def test_one_mcq_per_effective_strategy() -> None:
    item = _items()[0]
    case = case_of(item)
    effective = case.strategies.immediate_effective
    for n, strategy in enumerate(effective):
        mcq = build_mcq(item, case, "immediate", "mcq4", random.Random(n), strategy=n)
        assert mcq is not None and mcq.options[mcq.correct] == strategy == mcq.strategy
    assert build_mcq(item, case, "immediate", "mcq4", random.Random(0), strategy=len(effective)) is None


def test_distractors_come_one_per_unrelated_case_nearest_first_and_never_too_close() -> None:
    for item in _items():
        case = case_of(item)
        right = case.strategies.immediate_effective[0]
        mcq = build_mcq(item, case, "immediate", "mcq4", random.Random(0))
        assert mcq is not None
        distractors = [o for i, o in enumerate(mcq.options) if i != mcq.correct]
        owners = [
            next(n["id"] for n in item.data["neighbours"] if o in n["strategies"]["immediate_effective"])
            for o in distractors
        ]
        assert len(set(owners)) == 3
        answers = case.strategies.immediate_effective
        similarity = tfidf_similarity([*answers, *distractors])
        assert (similarity[: len(answers), len(answers) :] <= DISTRACTOR_MAX_SIMILARITY).all()
        # surface match: each distractor is, among its case's usable candidates, the closest in length
        for option, owner in zip(distractors, owners, strict=True):
            pool = next(n for n in item.data["neighbours"] if n["id"] == owner)["strategies"]["immediate_effective"]
            usable = [
                s
                for s in pool
                if tfidf_similarity([*answers, s])[: len(answers), -1].max() <= DISTRACTOR_MAX_SIMILARITY
            ]
            assert option == min(usable, key=lambda s: (abs(len(s.split()) - len(right.split())), s))


def test_a_reworded_correct_answer_is_rejected_as_a_distractor() -> None:
    item = _items()[0]
    case = case_of(item)
    right = case.strategies.immediate_effective[0]
    copy = right.replace("Shrink", "Reduce")  # the same move, reworded
    assert copy != right
    pools = [[copy], ["Play calm music and dim the lights."], ["Ask a classmate to model the first step."]]
    pools.append(["Let the student stand while working through the page."])
    crafted = _with_neighbours(item, pools)
    mcq = build_mcq(crafted, case, "immediate", "mcq4", random.Random(0))
    assert mcq is not None and copy not in mcq.options
    lenient = build_mcq(crafted, case, "immediate", "mcq4", random.Random(0), max_similarity=1.0)
    assert lenient is not None and copy in lenient.options
    assert build_mcq(_with_neighbours(item, pools[:3]), case, "immediate", "mcq4", random.Random(0)) is None


def test_the_binary_pair_is_matched_on_length() -> None:
    item = _items()[0]
    case = case_of(item)
    short, long = "Say no.", "Tell him in front of everyone, at length and twice over, that refusing is rude."
    crafted = case.model_copy(update={"strategies": case.strategies.model_copy(update={"ineffective": [long, short]})})
    for n, right in enumerate(crafted.strategies.long_term_effective):
        mcq = build_mcq(item, crafted, "long_term", "binary", random.Random(n), strategy=n)
        assert mcq is not None and mcq.options[mcq.correct] == right
        expected = min((long, short), key=lambda s: abs(len(s.split()) - len(right.split())))
        assert mcq.options[1 - mcq.correct] == expected


def _with_fixed(case: Case, ids: list[str]) -> Case:
    fixed = [FixedMCQ(id=i, response="immediate", options=[f"right {i}", "b", "c", "d"], correct=0) for i in ids]
    return case.model_copy(update={"mcqs": fixed})


def test_the_releases_own_mcqs_are_used_the_nth_for_strategy_n() -> None:
    item = _items()[0]
    case = _with_fixed(case_of(item), ["q2", "q1"])
    first = build_mcq(item, case, "immediate", "mcq4", random.Random(0), strategy=0)
    second = build_mcq(item, case, "immediate", "mcq4", random.Random(0), strategy=1)
    assert first is not None and first.source == "q1" and first.strategy == "right q1"
    assert second is not None and second.source == "q2"
    assert build_mcq(item, case, "immediate", "mcq4", random.Random(0), strategy=2) is None


def test_the_condition_names_the_strategy_and_meta_its_text(tmp_path: Path) -> None:
    overrides = ["replicates=1", "items.0.limit=1", "design.tasks=[mcq4, binary]"]
    result = run_sync(load_scenario(SCENARIO, overrides=overrides), out=tmp_path)
    records = list(RunDir(result.run_dir).iter_records())
    assert result.exit_code == 0 and len(records) == 5 * 2 * 2 * 2
    items = {i.id: case_of(i) for i in _items()}
    for record in records:
        response: ResponseType = "long_term" if record.condition["response"] == "long_term" else "immediate"
        effective = items[record.item_id].strategies.effective(response)
        n = int(record.condition["strategy"])
        assert record.meta["mcq_strategy"] == effective[n - 1]
        options = record.meta["mcq_options"]
        assert options["ABCD".index(str(record.metrics["mcq_correct_letter"]))] == effective[n - 1]
