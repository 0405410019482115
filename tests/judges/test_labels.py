"""The generic human-label file, documented label maps, and MRBench V2's per-tutor human rates from the data."""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Judgment, ModelSpec, ScenarioError
from engine.cli._main import main
from engine.tools.calibrate._labels import LABEL_SOURCES
from engine.tools.calibrate._report import render_markdown
from engine.tools.calibrate._rows import human_rates
from engine.tools.calibrate._run import calibrate
from judges.calibration import BRIDGE_LABEL_MAPS, MRBENCH_LABEL_MAPS
from judges.labels import canonical_label, read_label_file

ROOT = Path(__file__).resolve().parents[2]
MRBENCH_V2 = ROOT / ".." / "shared" / "data" / "mrbench" / "MRBench_V2.json"
JUDGE = [ModelSpec(model="sim/judge", params={"error_rate": 0.0})]
REVEAL = "Yes (and the answer is correct)"


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def harm_file(tmp_path: Path) -> Path:
    """40 responses, half stating the answer; r1 labels them truthfully, r2 flips every fifth label."""
    records = []
    for i in range(40):
        leaks = i % 2 == 0
        response = f"Fine, the answer is 42. ({i})" if leaks else f"What do you know about the product? ({i})"
        item = {"id": f"q{i // 4}", "question": "What is 6 times 7?", "answer": "42", "domain": "mathematics"}
        for annotator, flip in (("r1", False), ("r2", i % 5 == 0)):
            records.append(
                {
                    "item": item,
                    "response": response,
                    "history": [{"role": "student", "text": "Just tell me what 6 times 7 is."}],
                    "dimension": "harm.unsafe",
                    "label": leaks != flip,
                    "annotator": annotator,
                    "group": "tutor-a" if i < 20 else "tutor-b",
                    "condition": {"dimension": "cognitive"},
                }
            )
    return write_lines(tmp_path / "harm.jsonl", records)


def test_canonical_labels_make_booleans_and_integers_comparable() -> None:
    assert [canonical_label(v) for v in (True, False, 1, 0, -1, 2.0, 0.5, " Yes ", None)] == [
        "1", "0", "1", "0", "-1", "2", "0.5", "Yes", None
    ]  # fmt: skip


def test_harm_labels_calibrate_with_majority_reference_and_annotator_agreement(tmp_path: Path) -> None:
    label_set = read_label_file(harm_file(tmp_path), {})
    assert [d.name for d in label_set.dimensions] == ["harm.unsafe"] and label_set.dimensions[0].labels == ("0", "1")
    # the 8 responses where r1 and r2 disagree are ties: left out of the reference
    assert sum("harm.unsafe" in e.labels for e in label_set.examples) == 32
    result = calibrate(label_set, ["harm"], JUDGE, votes=1).as_dict()
    (row,) = result["judges"]["harm"]["dimensions"]
    assert row["exact"]["n"] == 32 and row["exact"]["accuracy"] == 1.0  # a noiseless sim judge: exact
    assert [g["group"] for g in row["by_group"]] == ["tutor-a", "tutor-b"]
    block = result["annotator_agreement"]
    (metric,) = block["metrics"]
    r1 = [1.0 if i % 2 == 0 else 0.0 for i in range(40)]
    r2 = [float((i % 2 == 0) != (i % 5 == 0)) for i in range(40)]
    assert metric["alpha"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=np.array([r1, r2]), level_of_measurement="nominal")
    )
    assert block["judges"] == ["r1", "r2"] and len(metric["kappa"]) == 1


def test_edufair_style_binary_and_not_applicable_labels(tmp_path: Path) -> None:
    """turn_quality's mistake_recognize is 1 / 0 / −1 (no mistake to recognise): all three read from one file."""
    item = {"id": "m1", "question": "What is 6 times 7?", "answer": "42"}
    cases = [
        ("Is it 41?", "Not quite — 41 isn't right, but that was a sensible try. What is 6 times 7?", 1),
        ("Is it 41?", "What do you know about multiplying?", 0),
        ("Can you tell me the answer?", "What do you know about multiplying?", -1),
    ]
    records = [
        {
            "item": item,
            "transcript": [{"role": "tutor", "text": "What is 6 times 7?"}, {"role": "student", "text": s},
                           {"role": "tutor", "text": reply}],
            "dimension": "turn_quality.mistake_recognize",
            "label": label,
            "annotator": "a",
        }
        for s, reply, label in cases
    ]  # fmt: skip
    label_set = read_label_file(write_lines(tmp_path / "edufair.jsonl", records), {})
    assert label_set.dimensions[0].labels == ("-1", "0", "1")
    assert label_set.examples[0].history[-1] == ("student", "Is it 41?")
    result = calibrate(label_set, ["turn_quality"], JUDGE, votes=1).as_dict()
    (row,) = result["judges"]["turn_quality"]["dimensions"]
    assert row["exact"]["n"] == 3 and row["exact"]["accuracy"] == 1.0
    assert result["annotator_agreement"] is None  # one annotator


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"item": "x", "dimension": "harm.unsafe", "label": True}, "exactly one of `response` or `transcript`"),
        ({"item": "x", "response": "r", "dimension": "unsafe", "label": True}, "dimension"),
        ({"item": "x", "response": "r", "dimension": "harm.unsafe"}, "label"),
    ],
)
def test_bad_label_lines_name_the_line(tmp_path: Path, record: dict[str, Any], message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [{"item": "ok", "response": "r", "dimension": "harm.unsafe",
                                                 "label": True}, record])  # fmt: skip
    with pytest.raises(ScenarioError, match=rf"bad.jsonl:2: .*{message}"):
        read_label_file(path, {})


def test_calibrate_command_reads_the_generic_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["calibrate", str(harm_file(tmp_path)), "--source", "labels", "--judge", "harm",
                 "--model", "judge={model: sim/judge, params: {error_rate: 0.0}}", "--votes", "1"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "harm.unsafe" in printed and "100%" in printed


# ------------------------------------------------------------------------------------------------ label maps

MRBENCH_MAPS: dict[tuple[str, str], tuple[str, dict[Any, str | None], bool]] = {
    ("turn_quality", "Mistake_Identification"): ("mistake_recognize", {1: "Yes", 0: "No", -1: "No"}, False),
    ("turn_quality", "Revealing_of_the_Answer"): ("answer_leakage", {1: REVEAL, 0: "No", -1: None}, False),
    ("turn_quality", "Providing_Guidance"): ("step_scaffolded", {1: "Yes", 0: "No", -1: None}, True),
    ("turn_quality", "Actionability"): ("actionability", {1: "Yes", 0: "No", -1: None}, False),
    ("turn_quality", "Tutor_Tone"): ("corrective_tone", {1: "Encouraging", 0: "Neutral", -1: None}, True),
    ("answer_leak", "Revealing_of_the_Answer"): ("answer_leak", {True: REVEAL, False: "No"}, False),
}


def judged(metric: str, value: object) -> list[Judgment]:
    return [Judgment(judge="j", metric=metric, target=0, value=value)]


def test_every_mrbench_label_map_is_pinned() -> None:
    """Each judge value → MRBench label, exactly as documented in docs/calibration.md's table; proxies are marked."""
    found = {(j, d) for j, maps in MRBENCH_LABEL_MAPS.items() for d in maps}
    assert found == set(MRBENCH_MAPS) | {("conversation_stats", "Actionability")}
    for (judge, dimension), (metric, values, proxy) in MRBENCH_MAPS.items():
        reader = MRBENCH_LABEL_MAPS[judge][dimension]
        assert reader.metric == metric and bool(reader.proxy) is proxy, (judge, dimension)
        for value, label in values.items():
            assert reader(judged(metric, value)) == label, (judge, dimension, value)
        assert reader(judged(metric, None)) is None
    asks = MRBENCH_LABEL_MAPS["conversation_stats"]["Actionability"]
    assert asks.proxy and asks(judged("tutor_question_rate", 0.5)) == "Yes"
    assert asks(judged("tutor_question_rate", 0.0)) == "No"
    strategy = BRIDGE_LABEL_MAPS["remath_strategy"]["strategy"]
    assert strategy(judged("used_strategy", "Provide a hint")) == "Provide a hint" and not strategy.proxy


def test_docs_document_every_label_map() -> None:
    readme = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    for judge, maps in {**MRBENCH_LABEL_MAPS, **BRIDGE_LABEL_MAPS}.items():
        for dimension, reader in maps.items():
            described = reader.describe()["metric"]
            assert f"| {dimension} | `{judge}` | `{described}` |" in readme, (judge, dimension)


# ------------------------------------------------------------------------------ MRBench V2 per-tutor rates

RAW_NAMES = {"humanlikeness": "Humanlikeness"}


@pytest.mark.skipif(not MRBENCH_V2.is_file(), reason="MRBench V2 data absent")
def test_mrbench_v2_per_tutor_human_rates_come_out_as_the_data_has_them() -> None:
    raw = json.loads(MRBENCH_V2.read_text(encoding="utf-8"))
    counts: dict[tuple[str, str], Counter[str]] = {}
    for conversation in raw:
        for tutor, entry in conversation["anno_llm_responses"].items():
            for name, value in (entry.get("annotation") or {}).items():
                counts.setdefault((RAW_NAMES.get(name, name), tutor), Counter())[value] += 1
    rates = human_rates(LABEL_SOURCES.get("mrbench")(MRBENCH_V2, {}))
    tutors = {tutor for _, tutor in counts}
    assert tutors == {"Gemini", "Phi3", "Llama318B", "Llama31405B", "Mistral", "Expert", "GPT4", "Sonnet", "Novice"}
    assert set(rates["Tutor_Tone"]) == tutors | {"all"}
    for (dimension, tutor), labels in counts.items():
        found = rates[dimension][tutor]
        assert found["n"] == sum(labels.values()), (dimension, tutor)
        for label, count in labels.items():
            assert found["shares"][label] == pytest.approx(count / found["n"]), (dimension, tutor, label)
    pooled = rates["Mistake_Identification"]["all"]
    assert pooled["n"] == 1655 and pooled["shares"]["Yes"] == pytest.approx(1326 / 1655)


def test_failing_judge_exits_3_with_counts_and_no_empty_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge that never answers JSON: exit 3, the count and the first error on the console, no n = 0 row."""
    monkeypatch.setenv("COLUMNS", "200")
    fixture = ROOT / "scenarios" / "calibration" / "mrbench_sample.json"
    code = main(["calibrate", str(fixture), "--judge", "turn_quality", "--out", str(tmp_path),
                 "--model", "judge={model: sim/judge, params: {invalid_rate: 1}}"])  # fmt: skip
    assert code == 3
    captured = capsys.readouterr()
    assert "turn_quality: 32 of 32 judgments failed (Unjudged ×32, first: " in captured.out
    assert "No judge × dimension was measured." in captured.out and "| 0 |" not in captured.out
    assert "32 judgments failed" in captured.err
    markdown = (tmp_path / "calibration.md").read_text(encoding="utf-8")
    assert "Not measured" in markdown and "**Failed judgments**" in markdown
    result = json.loads((tmp_path / "calibration.json").read_text())
    assert result["judges"]["turn_quality"]["errors_by_kind"]["Unjudged"]["count"] == 32


def test_two_judge_models_report_their_agreement() -> None:
    """Several --model specs vote in turn; calibration measures their agreement like a run's report does."""
    fixture = ROOT / "scenarios" / "calibration" / "mrbench_sample.json"
    label_set = LABEL_SOURCES.get("mrbench")(fixture, {})
    specs = [ModelSpec(model="sim/judge", params={"error_rate": e}) for e in (0.0, 0.3)]
    result = calibrate(label_set, ["turn_quality"], specs, votes=2, seed=random.Random(1).randint(0, 9)).as_dict()
    block = result["judges"]["turn_quality"]["judge_agreement"]
    assert len(block["judges"]) == 2 and block["metrics"]
    assert "### Agreement between the judge models of turn_quality" in render_markdown(result)


_LABEL = st.one_of(st.booleans(), st.integers(-1, 3), st.sampled_from(["safe", "unsafe", " Yes "]))


@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b", "c"]), _LABEL), min_size=1, max_size=30))
def test_label_file_groups_responses_and_takes_the_strict_majority(rows: list[tuple[int, str, Any]]) -> None:
    """Any valid file: one example per response; its reference is the strict-majority label, absent on a tie."""
    records = [
        {"item": "q", "response": f"reply {r}", "dimension": "harm.unsafe", "label": label, "annotator": a}
        for r, a, label in rows
    ]
    with tempfile.TemporaryDirectory() as folder:
        label_set = read_label_file(write_lines(Path(folder) / "l.jsonl", records), {})
    by_response: dict[str, Counter[str]] = {}
    for r, _, label in rows:
        by_response.setdefault(f"reply {r}", Counter())[str(canonical_label(label))] += 1
    assert sorted(e.response for e in label_set.examples) == sorted(by_response)
    for example in label_set.examples:
        ranked = by_response[example.response].most_common()
        strict = len(ranked) == 1 or ranked[0][1] > ranked[1][1]
        assert example.labels.get("harm.unsafe") == (ranked[0][0] if strict else None)
