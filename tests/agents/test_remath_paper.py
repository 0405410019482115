"""ReMath as the paper ran it: the novice baseline, the Human row, `given: predicted`, the one-sentence default,
human–human agreement from doubly-labelled Bridge snippets, and Table 8's automated metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

from agents.remath import remath_messages
from engine import ITEM_SOURCES, EpisodeRecord, build_scenario, load_scenario, run_sync
from engine.runtime._rundir import RunDir
from engine.scenario._plan import load_items, plan_episodes
from judges.remath_metrics import reply_scores, self_bleu, word_entropy
from judges.remath_summary import RemathSummarizer
from judges.remediation import PairwiseOptions
from personas.remath import ERROR_TYPES, INTENTIONS, STRATEGIES, double_labelled
from tests.agents.test_remath import remath_data
from tests.personas.test_remath import bridge_record

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "remath.yaml"


def _run(tmp_path: Path, **overrides: Any) -> tuple[dict[str, Any], list[EpisodeRecord]]:
    result = run_sync(build_scenario(remath_data(**overrides), base_dir=tmp_path), out=tmp_path / "runs")
    assert result.errors == 0
    return result.summary["remath"], list(RunDir(result.run_dir).iter_records())


def test_the_novice_reply_is_the_default_baseline_and_the_report_names_it(tmp_path: Path) -> None:
    assert PairwiseOptions().against == "novice"
    design = {"name": "remath", "tasks": ["response"], "given": ["none", "both"], "min_items": 1}
    summary, records = _run(tmp_path / "novice", design=design)
    assert summary["against"] == ["novice"] and all(row["against"] == "novice" for row in summary["conditions"])
    judged = [j for r in records for j in r.judgments if j.metric == "pairwise_against"]
    assert judged and {j.value for j in judged} == {"novice"}
    markdown = RemathSummarizer().render_markdown({"remath": summary})
    assert "replies against the novice tutor's reply" in markdown
    # `against: reference` stays, given in YAML as a mapping of the plug-in
    text = yaml.safe_dump(remath_data(design=design, judges=[{"name": "remath_pairwise", "against": "reference"}]))
    (tmp_path / "ref.yaml").write_text(text, encoding="utf-8")
    result = run_sync(load_scenario(tmp_path / "ref.yaml"), out=tmp_path / "ref")
    assert result.summary["remath"]["against"] == ["reference"]
    assert "against the expert's reference reply" in RemathSummarizer().render_markdown(result.summary)


def test_the_human_row_replays_the_expert_reply_without_a_model(tmp_path: Path) -> None:
    design = {"name": "remath", "tasks": ["response"], "given": ["human", "none"], "min_items": 1}
    summary, records = _run(tmp_path, design=design)
    human = [r for r in records if r.condition["given"] == "human"]
    items = {item.id: item for item in load_items(build_scenario(remath_data(), base_dir=tmp_path))}
    assert len(human) == len(items)
    for record in human:
        reply = [t for t in record.turns if t.role == "tutor" and t.model is not None]
        assert [t.text for t in reply] == [items[record.item_id].data["reference"]]
        assert (
            reply[0].model == "human/expert" and reply[0].usage.prompt_tokens == reply[0].usage.completion_tokens == 0
        )
        assert record.judgment("pairwise_preference", reply[0].index) is not None
    assert [row["given"] for row in summary["conditions"]] == ["human", "none"]
    # the Human row is a reference, not a condition to test against the tutor's
    assert all("human" not in (c["a"], c.get("b")) for c in summary["differences"])
    automated = {row["given"]: row for row in summary["automated"]}
    assert automated["human"]["rouge1"] == pytest.approx(1.0) and automated["human"]["bleu"] == pytest.approx(1.0)
    assert automated["original"]["n"] == len(items)


def test_given_predicted_asks_tasks_a_and_b_first_then_replies_on_its_own_labels(tmp_path: Path) -> None:
    design = {"name": "remath", "tasks": ["response"], "given": ["none", "both", "predicted"], "min_items": 1}
    summary, records = _run(tmp_path, design=design)
    predicted = [r for r in records if r.condition["given"] == "predicted"]
    assert predicted
    for record in predicted:
        tutor = [t for t in record.turns if t.role == "tutor" and t.model is not None]
        assert len(tutor) == 3 and [t.visible_to_tutor for t in tutor] == [False, False, True]
        assert record.metrics["error_pred"] in ERROR_TYPES
        assert record.metrics["strategy_pred"] in STRATEGIES and record.metrics["intention_pred"] in INTENTIONS
        assert json.loads(tutor[0].text)["error"] == record.metrics["error_pred"]
        assert record.judgment("pairwise_preference", tutor[2].index) is not None
    contrasts = {(c["a"], c.get("b")) for c in summary["differences"] if c["test"] != "friedman"}
    assert ("predicted", "none") in contrasts and ("predicted", "both") in contrasts
    assert next(c for c in summary["differences"] if c["a"] == "predicted")["n"] == 26  # paired per item


def test_the_predicted_prompt_carries_the_tutors_labels_not_the_experts(tmp_path: Path) -> None:
    scenario = build_scenario(remath_data(), base_dir=tmp_path)
    episode = next(e for e in plan_episodes(scenario, load_items(scenario)) if e.item.id == "rm-03")
    gold = episode.item.data
    own = {
        "error": next(e for e in ERROR_TYPES if e != gold["error"]),
        "strategy": next(s for s in STRATEGIES if s != gold["strategy"]),
        "intention": next(i for i in INTENTIONS if i != gold["intention"]),
    }
    system = remath_messages(episode, task="response", given="predicted", predicted=own)[0]["content"]
    assert ERROR_TYPES[own["error"]] in system and STRATEGIES[own["strategy"]] in system
    assert INTENTIONS[own["intention"]] in system
    assert ERROR_TYPES[gold["error"]] not in system and STRATEGIES[gold["strategy"]] not in system


def test_the_paper_scenario_asks_for_one_sentence_and_length_stays_configurable(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    assert scenario.tutor.options["length"] == "in one sentence at most"
    episode = plan_episodes(scenario, load_items(scenario))[0]
    system = remath_messages(episode, task="response", length=scenario.tutor.options["length"])[0]["content"]
    assert "in one sentence at most" in system
    longer = load_scenario(SCENARIO, overrides=["tutor.length=in three sentences at most"])
    assert longer.tutor.options["length"] == "in three sentences at most"


def test_automated_metrics_against_hand_counts() -> None:
    scores = reply_scores("the cat sat", "the cat ran")
    # 2 of 3 unigrams shared each way: P = R = F1 = 2/3; the longest common subsequence is "the cat"
    assert scores["rouge1"] == pytest.approx(2 / 3) and scores["rougeL"] == pytest.approx(2 / 3)
    assert scores["length"] == 3.0
    assert reply_scores("one two three four five", "one two three four five")["bleu"] == pytest.approx(1.0)
    assert reply_scores("alpha beta gamma", "delta epsilon zeta")["bleu"] == pytest.approx(0.0)
    assert word_entropy("a a b b") == pytest.approx(math.log(2)) and word_entropy("") == 0.0
    assert self_bleu(["we count on from seven", "we count on from seven"]) == pytest.approx(1.0)
    assert self_bleu(["alpha beta", "gamma delta"]) == pytest.approx(0.0) and self_bleu(["one reply"]) is None


def _bridge_folder(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """train + test splits with invented content: snippets A-F labelled twice across or within splits."""
    pairs = [
        ("guess", "guess"),
        ("careless", "guess"),
        ("right-idea", "right-idea"),
        ("diagnose", "careless"),
        ("misinterpret", "misinterpret"),
        ("imprecise", "guess"),
    ]
    train: list[dict[str, Any]] = []
    test: list[dict[str, Any]] = []
    for n, (first, second) in enumerate(pairs):
        mistake = f"is it {20 + n}?"
        train.append(bridge_record(f"s{n}", first, "ask_question", "elaborate_answer", mistake=mistake))
        (test if n % 2 == 0 else train).append(
            bridge_record(f"s{n}", second, "provide_hint", "hint_mistake", mistake=mistake)
        )
    test.append(bridge_record("lone", "guess", "ask_question", "elaborate_answer", mistake="is it 99?"))
    folder = tmp_path / "bridge"
    folder.mkdir()
    (folder / "train.json").write_text(json.dumps(train), encoding="utf-8")
    (folder / "test.json").write_text(json.dumps(test), encoding="utf-8")
    return folder, pairs


def test_doubly_labelled_snippets_are_found_across_splits_and_numbered(tmp_path: Path) -> None:
    folder, pairs = _bridge_folder(tmp_path)
    found = double_labelled(folder)
    doubles = [v for v in found.values() if len(v) == 2]
    assert len(doubles) == len(pairs) and sum(len(v) == 1 for v in found.values()) == 1
    items = ITEM_SOURCES.get("bridge")(folder / "test.json", {})
    annotated = [i for i in items if "annotations" in i.data]
    assert len(annotated) == 3 and all(i.data["annotator"] == 1 for i in annotated)  # teacher 1 is in train
    for item in annotated:
        assert item.data["annotations"][1]["error"] == item.data["error"]
    lone = next(i for i in items if i.data["source_id"] == "lone")
    assert "annotations" not in lone.data


def test_human_human_agreement_sits_next_to_the_tutor_rows(tmp_path: Path) -> None:
    folder, pairs = _bridge_folder(tmp_path)
    data = remath_data(
        items=[{"source": "bridge", "path": str(folder / "train.json")}],
        design={"name": "remath", "tasks": ["error"], "min_items": 1},
    )
    result = run_sync(build_scenario(data, base_dir=tmp_path), out=tmp_path / "runs")
    assert result.errors == 0
    row = result.summary["remath"]["agreement"][0]
    first = ["not-sure" if a == "diagnose" else a for a, _ in pairs]
    second = ["not-sure" if b == "diagnose" else b for _, b in pairs]
    human = row["human"]
    assert human["n"] == len(pairs)
    assert human["match"] == pytest.approx(sum(a == b for a, b in zip(first, second, strict=True)) / len(pairs))
    assert human["kappa"] == pytest.approx(cohen_kappa_score(first, second))
    # the tutor against each teacher separately, then averaged (the paper's match and IRR)
    records = [r for r in RunDir(result.run_dir).iter_records() if "error_a1" in r.metrics]
    pred = [str(r.metrics["error_pred"]) for r in records]
    per = [cohen_kappa_score([str(r.metrics[f"error_a{n}"]) for r in records], pred) for n in (1, 2)]
    assert row["per_annotator"]["kappa"] == pytest.approx(sum(per) / 2)
    assert row["per_annotator"]["n"] == len(records) == 9  # 3 pairs inside train, twice each, plus 3 across
    markdown = RemathSummarizer().render_markdown(result.summary)
    assert "| error | human–human | 6 |" in markdown
    assert "human–human" in str(RemathSummarizer().render_html(result.summary))


@pytest.mark.seed_data
def test_bridge_release_has_241_doubly_labelled_snippets(seed_data: Path) -> None:
    folder = seed_data / "remath-bridge"
    if not (folder / "test.json").is_file():
        pytest.skip("the Bridge release is absent")
    found = double_labelled(folder)
    assert sum(len(v) == 2 for v in found.values()) == 241 and max(len(v) for v in found.values()) == 2
    items = ITEM_SOURCES.get("bridge")(folder / "test.json", {})
    annotated = [i for i in items if "annotations" in i.data]
    assert annotated and all(i.data["annotations"][i.data["annotator"]]["error"] == i.data["error"] for i in annotated)


def test_the_builtin_set_gives_an_offline_human_human_row(tmp_path: Path) -> None:
    items = load_items(build_scenario(remath_data(), base_dir=tmp_path))
    doubled = [i for i in items if "annotations" in i.data]
    assert len(doubled) == 14 and all(i.data["annotator"] == 0 for i in doubled)
    summary, _ = _run(tmp_path, design={"name": "remath", "tasks": ["error"], "min_items": 1})
    first = [i.data["annotations"][0]["error"] for i in doubled]
    second = [i.data["annotations"][1]["error"] for i in doubled]
    human = summary["agreement"][0]["human"]
    assert human["n"] == 14 and human["kappa"] == pytest.approx(cohen_kappa_score(first, second))
