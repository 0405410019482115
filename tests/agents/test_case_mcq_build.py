"""TutorCaseBench MCQs built by a model (`design.mcq_construction: model`): the sim's documented rule, a sim run
end to end (recorded, counted, labelled, reused from the cache), the heuristic fallback, and the model path over
real HTTP against the loopback fake (schema sent, rewritten options used, an unusable reply falling back)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

import engine
from agents.case_mcq_build import BUILD_TASK, BinaryChoice, DistractorChoice, distractor_candidates
from agents.case_mcq_sim import PLAN_WORDS, TOO_CLOSE, overlap, sim_build
from engine import ITEM_SOURCES, ChatRequest, RequestContext, load_scenario, run_sync
from engine.cli._main import main
from engine.runtime._rundir import RunDir
from personas.cases import ResponseType, case_of
from tests.fakes.openai_server import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "casebench.yaml"
MCQ_ONLY = ["design.tasks=[mcq4, binary]", "design.mcq_construction=model", "items.0.limit=2"]


def _sim(data: dict[str, Any]) -> dict[str, Any]:
    request = ChatRequest(messages=[], context=RequestContext(role="judge", task=BUILD_TASK, data=data))
    reply: dict[str, Any] = orjson.loads(sim_build(request, random.Random(0), None))
    return reply


def test_the_sim_rejects_too_close_and_impossible_candidates_and_keeps_the_order() -> None:
    correct = "Offer the student a short break at a quiet table before the next question."
    candidates = [
        "Offer the student a short break at a quiet table before the question.",  # reworded: too close
        "Hold a weekly check-in to set goals for the coming weeks.",  # a plan: impossible right now
        "Ask a classmate to read the first line aloud.",
        "Point to the worked example on the board.",
        "Let the student pick which problem to do first.",
    ]
    reply = _sim({"variant": "mcq4", "response": "immediate", "correct": correct, "candidates": candidates})
    assert overlap(candidates[0], correct) >= TOO_CLOSE and "weeks" in PLAN_WORDS
    assert reply["rejected"] == [{"index": 0, "reason": "too_close"}, {"index": 1, "reason": "impossible"}]
    assert reply["distractors"] == [2, 3, 4] and reply["forced"] == []
    assert reply["distractors_rewritten"] == candidates[2:] and reply["correct_rewritten"] == correct
    DistractorChoice.model_validate(reply)
    # a plan is no impossibility when the item asks for a plan; too few clean ones are filled up and listed
    planned = _sim({"variant": "mcq4", "response": "long_term", "correct": correct, "candidates": candidates[:3]})
    assert planned["distractors"] == [1, 2, 0] and planned["forced"] == [0]


def test_the_sim_pairs_the_ineffective_strategy_closest_in_length() -> None:
    correct = "Sit beside him and point to the first step."  # 9 words
    ineffective = [
        "Tell him to hurry.",
        "Tell him in front of the class that he is slow again.",
        "Say nothing at all now.",
    ]
    reply = _sim({"variant": "binary", "correct": correct, "candidates": ineffective})
    gaps = [abs(len(s.split()) - len(correct.split())) for s in ineffective]
    assert reply["ineffective"] == gaps.index(min(gaps)) == 1
    assert BinaryChoice.model_validate(reply).ineffective_rewritten == ineffective[1]


def _records(run_dir: Path) -> list[engine.EpisodeRecord]:
    return list(RunDir(run_dir).iter_records())


def test_a_sim_run_records_who_built_each_mcq_and_says_so_in_the_report(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO, overrides=MCQ_ONLY)
    result = run_sync(scenario, out=tmp_path)
    assert result.exit_code == 0
    loaded = ITEM_SOURCES.get("cases")(ROOT / "personas" / "cases.yaml", dict(scenario.items[0].options))
    items = {i.id: i for i in loaded}
    shown = [r for r in _records(result.run_dir) if not r.metrics.get("skipped")]
    assert shown
    by_input: dict[tuple[str, str], list[str]] = {}
    for record in shown:
        made = record.meta["mcq_construction"]
        assert made["by"] == "model: sim/judge"
        response: ResponseType = "long_term" if record.condition["response"] == "long_term" else "immediate"
        case = case_of(items[record.item_id])
        right = case.strategies.effective(response)[int(record.condition["strategy"]) - 1]
        assert made["options"][0] == right == record.meta["mcq_strategy"]  # the sim rewrites nothing
        assert sorted(made["options"]) == sorted(record.meta["mcq_options"])
        if record.condition["task"] == "mcq4":
            assert made["candidates"] == distractor_candidates(items[record.item_id], case, right, response)
            assert made["chosen"] == made["options"][1:]
        else:
            assert made["chosen"][0] in case.strategies.ineffective
        key = (record.item_id, orjson.dumps(record.condition, option=orjson.OPT_SORT_KEYS).decode())
        by_input.setdefault(key, made["options"])
        assert by_input[key] == made["options"]  # the replicates share one built MCQ
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["cases"]["mcq_construction"] == {"model: sim/judge": len(shown)}
    report = (result.run_dir / "report.md").read_text()
    assert f"options: {len(shown)} selected and rewritten by sim/judge" in report
    assert "Demographic groups (TutorCaseBench Table 5)" in report and "no region, education level" in report


def test_a_rerun_on_the_cache_reuses_the_built_mcqs(tmp_path: Path) -> None:
    overrides = [*MCQ_ONLY, f"cache={tmp_path / 'responses.sqlite3'}", "replicates=1"]
    first = run_sync(load_scenario(SCENARIO, overrides=overrides), out=tmp_path / "a")
    second = run_sync(load_scenario(SCENARIO, overrides=overrides), out=tmp_path / "b")
    built = [{r.id: r.meta["mcq_construction"] for r in _records(run.run_dir)} for run in (first, second)]
    assert built[0] == built[1] and built[0]
    manifest = orjson.loads((second.run_dir / "manifest.json").read_bytes())
    assert manifest["calls"]["requests"] == 0 and manifest["calls"]["cache_hits"] > 0


def test_without_a_judge_model_the_heuristic_builds_them_and_the_report_says_why(tmp_path: Path) -> None:
    overrides = [*MCQ_ONLY, "models.judge=[]", "judges=[]"]
    result = run_sync(load_scenario(SCENARIO, overrides=overrides), out=tmp_path)
    shown = [r for r in _records(result.run_dir) if not r.metrics.get("skipped")]
    assert shown and all(
        r.meta["mcq_construction"] | {"options": None}
        == {"by": "heuristic", "why": "no judge model configured", "options": None}
        for r in shown
    )
    report = (result.run_dir / "report.md").read_text()
    assert f"options: {len(shown)} chosen by simrun's heuristic (no judge model configured)" in report


def test_validate_says_who_will_build_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    sets = [f"--set={o}" for o in MCQ_ONLY]
    assert main(["validate", str(SCENARIO), *sets, "--set=replicates=3"]) == 0
    mcqs = 5 * 2 * 2 * 2 * 2  # 5 types x 2 cases x 2 responses x 2 strategies x 2 variants; replicates share theirs
    assert f"MCQ options: built by sim/judge, one call per MCQ ({mcqs} MCQs;" in capsys.readouterr().out
    assert main(["validate", str(SCENARIO), *sets, "--set=models.judge=[]", "--set=judges=[]"]) == 0
    assert "MCQ options: simrun's heuristic builds them, as no judge model is configured" in capsys.readouterr().out
    assert main(["validate", str(SCENARIO), "--set=design.tasks=[open]", "--set=design.mcq_construction=model"]) == 0
    assert "MCQ options" not in capsys.readouterr().out


# -- over real HTTP ----------------------------------------------------------------------------------------------

_CORRECT = re.compile(r"CORRECT OPTION \(documented to work for this student\)\n(.*?)\n\n", re.DOTALL)
_LISTED = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)


def _rewriter(body: dict[str, Any]) -> Reply:
    """A construction model that picks the first candidates and marks every option it rewrites."""
    prompt = str(body["messages"][-1]["content"])
    correct = _CORRECT.search(prompt)
    assert correct is not None
    listed = [text for _, text in _LISTED.findall(prompt.split("numbered from 0)\n", 1)[1])]
    if "INEFFECTIVE (numbered from 0)" in prompt:
        reply: dict[str, Any] = {
            "ineffective": len(listed) - 1,
            "correct_rewritten": f"In this lesson: {correct.group(1)}",
            "ineffective_rewritten": f"In this lesson: {listed[-1]}",
            "edit_level": "surface",
        }
    else:
        reply = {
            "distractors": [0, 1, 2],
            "rejected": [{"index": 3, "reason": "too_close"}] if len(listed) > 3 else [],
            "forced": [],
            "correct_rewritten": f"In this lesson: {correct.group(1)}",
            "distractors_rewritten": [f"In this lesson: {text}" for text in listed[:3]],
            "edit_level": "surface",
        }
    return Reply(content=orjson.dumps(reply).decode())


async def _http_run(tmp_path: Path, script: Any, tasks: str) -> tuple[engine.RunResult, FakeOpenAI]:
    data = yaml.safe_load(SCENARIO.read_text())
    data["design"].update(tasks=[tasks], mcq_construction="model")
    data["items"][0]["limit"] = 1
    data["replicates"] = 1
    async with FakeOpenAI(script) as fake:
        data["models"]["judge"] = [{"model": "openai/builder", "base_url": fake.base_url}]
        scenario = engine.build_scenario(data, base_dir=SCENARIO.parent)
        runner = engine.Runner(scenario, out=tmp_path / "runs", report=engine.write_report, probe=False)
        return await runner.run(), fake


@pytest.mark.parametrize("task", ["mcq4", "binary"])
async def test_the_models_rewritten_options_are_the_ones_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result, fake = await _http_run(tmp_path, _rewriter, task)
    assert result.exit_code == 0 and fake.seen
    for seen in fake.seen:
        response_format = seen.body["response_format"]
        assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == BUILD_TASK
        wanted = BinaryChoice if task == "binary" else DistractorChoice
        assert set(response_format["json_schema"]["schema"]["properties"]) == set(wanted.model_fields)
    shown = [r for r in _records(result.run_dir) if not r.metrics.get("skipped")]
    assert shown and len(fake.seen) == len(shown)  # one build call per MCQ
    for record in shown:
        made = record.meta["mcq_construction"]
        assert made["by"] == "model: openai/builder" and made["edit_level"] == "surface"
        options = record.meta["mcq_options"]
        assert all(option.startswith("In this lesson: ") for option in options)
        right = options["ABCD".index(str(record.metrics["mcq_correct_letter"]))]
        assert right == f"In this lesson: {record.meta['mcq_strategy']}"
        if task == "mcq4":
            assert made["chosen"] == made["candidates"][:3]
            assert made["rejected"] == [{"text": made["candidates"][3], "reason": "too_close"}]
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["cases"]["mcq_construction"] == {"model: openai/builder": len(shown)}


async def test_an_unusable_reply_twice_falls_back_to_the_heuristic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    wrong = orjson.dumps(
        {"ineffective": 99, "correct_rewritten": "a", "ineffective_rewritten": "b", "edit_level": "none"}
    )
    result, fake = await _http_run(tmp_path, lambda body: Reply(content=wrong.decode()), "binary")
    shown = [r for r in _records(result.run_dir) if not r.metrics.get("skipped")]
    assert shown and len(fake.seen) == 2 * len(shown)  # asked twice per MCQ
    for record in shown:
        made = record.meta["mcq_construction"]
        assert (made["by"], made["why"]) == ("heuristic", "model reply unusable twice")
        assert "outside" in made["problem"]
        assert record.meta["mcq_strategy"] in record.meta["mcq_options"]  # the heuristic's own, unrewritten
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["cases"]["mcq_construction"] == {"heuristic (model reply unusable twice)": len(shown)}
