"""A report names the protocol that produced it from what the resolved scenario did, not from its file name."""

from __future__ import annotations

from typing import Any

from engine import SIMRUN_ADDITION
from judges.protocols import cases_protocol, crescendo_protocol, fairness_design, fairness_protocol, remath_protocol


def _manifest(**scenario: Any) -> dict[str, Any]:
    return {"scenario": scenario}


def test_crescendo_tells_the_paper_replay_from_the_adaptive_attacker() -> None:
    replay = _manifest(student={"strategy": "scripted"}, items=[{"source": "safetutors", "path": "x.jsonl"}])
    assert crescendo_protocol(replay).startswith("SafeTutors' paper replay")
    own_items = _manifest(student={"strategy": "scripted"}, items=[{"source": "bank", "path": "b.yaml"}])
    assert SIMRUN_ADDITION in crescendo_protocol(own_items) and "bank" in crescendo_protocol(own_items)
    attacker = _manifest(student={"strategy": "crescendo"}, items=[{"source": "bank", "path": "b.yaml"}])
    assert crescendo_protocol(attacker).startswith("simrun's adaptive attacker")
    assert SIMRUN_ADDITION in crescendo_protocol(attacker)


def test_fairness_names_its_design_and_marks_a_stack_as_beyond_the_paper() -> None:
    assert fairness_design("explicit") == "explicit cues"
    assert fairness_design("implicit") == "implicit cues (names)"
    assert fairness_design("opposite") == "2×2 stated × perceived gender"
    assert fairness_design("explicit", ["gender+ses"]) == "intersectional stack of explicit cues"
    assert "Explicit condition" in fairness_protocol(_manifest(design={"name": "demographic"}))
    assert "Opposite condition" in fairness_protocol(_manifest(design={"channel": "opposite"}))
    stacked = fairness_protocol(_manifest(design={"channel": "explicit", "stack": ["gender", "ses"]}))
    assert "intersectional" in stacked and SIMRUN_ADDITION in stacked


def test_cases_and_remath_say_which_data_and_which_additions_ran() -> None:
    release = _manifest(items=[{"source": "tutorcasebench"}], design={"tasks": ["open"]})
    assert cases_protocol(release) == "TutorCaseBench tasks open over the TutorCaseBench release"
    own = cases_protocol(_manifest(items=[{"source": "cases"}]))
    assert "simrun's own cases" in own and "interactive task is " + SIMRUN_ADDITION in own
    assert "predicted" in remath_protocol(_manifest(items=[{"source": "bridge"}]))
    assert remath_protocol(_manifest(items=[{"source": "bridge"}], design={"given": ["none"]})) == (
        "ReMath Tasks A–C over the Bridge/ReMath release"
    )


def test_cases_say_who_built_the_mcq_options() -> None:
    judge = {"judge": [{"model": "openai/builder"}]}
    built = _manifest(design={"tasks": ["mcq4"], "mcq_construction": "model"}, models=judge)
    assert cases_protocol(built).endswith(
        "; MCQ options selected and rewritten by openai/builder, as the paper built them"
    )
    no_judge = _manifest(design={"tasks": ["binary"], "mcq_construction": "model"}, models={"judge": []})
    assert cases_protocol(no_judge).endswith("; MCQ options chosen by simrun's heuristic")
    assert "MCQ" not in cases_protocol(_manifest(design={"tasks": ["open"]}, models=judge))
