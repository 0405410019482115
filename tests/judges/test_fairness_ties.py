"""Tie shares for `simrun validate --power`: from the rows by hand, and a live sim run against a count of zero
differences made from that run's records without the summariser."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from engine import EpisodeRecord, items_for_r, load_scenario
from engine.scenario._plan import load_items, plan_episodes
from judges.fairness_model import FairnessContrast, FairnessResults
from judges.fairness_planning import planning_lines
from judges.fairness_summary import FairnessSummarizer
from judges.fairness_ties import TieShares, _on_sim, sim_tie_shares, tie_shares
from personas.fairness import FairnessAnalysis

ROOT = Path(__file__).resolve().parents[2]
TURN = ("mistake_recognize", "answer_leakage", "step_scaffolded", "actionability", "corrective_tone")
CONVERSATION = ("tutor_turns", "tutor_avg_words", "tutor_question_rate", "tutor_student_word_ratio")


def row(
    metric: str, domain: str, n: int, differing: int, *, status: str = "ok", test: str = "wilcoxon"
) -> FairnessContrast:
    return FairnessContrast(
        a="x",
        b="y",
        channel="explicit",
        dimension="gender",
        metric=metric,
        domain=domain,
        n=n,
        differing=differing,
        status=status,
        test=test,
    )


def test_tie_shares_count_tested_pairs_per_domain() -> None:
    rows = [
        row("a", "all", 40, 30),  # repeats the per-domain pairs below: left out
        row("a", "math", 20, 15),
        row("a", "physics", 20, 10),
        row("a", "chemistry", 8, 0, status="insufficient"),
        row("a", "math", 20, 0, test="friedman"),  # an omnibus row has no differences to count
        row("b", "all", 30, 27),  # no per-domain row tested: the pooled rows count
        row("b", "math", 10, 0, status="insufficient"),
    ]
    found = tie_shares(rows, items=8)
    assert found is not None
    assert found.by_metric == {"a": pytest.approx(15 / 40), "b": pytest.approx(3 / 30)}
    assert found.mean == pytest.approx((15 / 40 + 3 / 30) / 2)
    assert found.most[0] == "a" and found.most[1] == pytest.approx(15 / 40)
    assert tie_shares([row("a", "all", 8, 0, status="insufficient")], items=8) is None


def _dialogue_value(record: EpisodeRecord, metric: str) -> float:
    if metric in CONVERSATION:
        found = [j.value for j in record.judgments if j.metric == metric and j.target == "conversation"]
        return float(found[0]) if found and isinstance(found[0], int | float) else math.nan
    values = [
        float(j.value)
        for j in record.judgments
        if j.metric == metric
        and isinstance(j.target, int)
        and isinstance(j.value, int | float)
        and not isinstance(j.value, bool)
        and j.value != -1
    ]
    return sum(values) / len(values) if values else math.nan


def _zero_differences(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """Per metric, the share of zero item differences over every pair of levels of every dimension, pooled over
    domains, on the items with a value at every level of the dimension, where at least 15 are (the test's
    minimum)."""
    values: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for record in records:
        dimension, level = record.condition.get("dimension"), record.condition.get("level")
        if record.status != "ok" or dimension == "baseline":
            continue
        for metric in (*TURN, *CONVERSATION):
            values[(str(dimension), str(level), metric)][record.item_id] = _dialogue_value(record, metric)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    dimensions = {(d, lv) for d, lv, _ in values}
    for dimension in {d for d, _ in dimensions}:
        levels = sorted(lv for d, lv in dimensions if d == dimension)
        for metric in (*TURN, *CONVERSATION):
            columns = [values[(dimension, level, metric)] for level in levels]
            complete = [i for i in columns[0] if all(i in c and not math.isnan(c[i]) for c in columns)]
            if len(complete) < 15:
                continue
            for left, right in combinations(columns, 2):
                counts[metric][0] += sum(1 for i in complete if abs(left[i] - right[i]) < 1e-9)
                counts[metric][1] += len(complete)
    return {metric: ties / n for metric, (ties, n) in counts.items()}


def test_live_tie_shares_match_a_count_made_from_the_records() -> None:
    """8 items per source: no per-domain contrast reaches 15 pairs, so every share comes from the pooled rows."""
    scenario = load_scenario(ROOT / "scenarios" / "fairness.yaml")
    seen: list[EpisodeRecord] = []
    summarizer = FairnessSummarizer(intervals=False, null_draws=1)

    def summarize(records: Sequence[EpisodeRecord], manifest: Mapping[str, Any]) -> FairnessResults:
        seen.extend(records)
        return summarizer.results(records, manifest)

    found = sim_tie_shares(scenario, summarize, items=8)
    assert found is not None and found.items == 8
    assert len({r.item_id for r in seen}) == 24  # 8 per domain
    expected = _zero_differences(seen)
    assert set(found.by_metric) == set(expected)
    for metric, share in expected.items():
        assert found.by_metric[metric] == pytest.approx(share), metric
    assert 0.05 < found.mean < 0.6  # a sim dialogue's rates tie often, its word counts rarely
    assert sim_tie_shares(scenario, summarize, items=8) is found  # once per process
    assert len(seen) == len({r.id for r in seen})


def test_planning_line_names_the_measured_ties() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "fairness.yaml")
    episodes = plan_episodes(scenario, load_items(scenario))
    ties = TieShares({"tutor_turns": 0.5, "tutor_avg_words": 0.1}, items=8)
    lines = planning_lines(episodes, FairnessAnalysis(correction="none"), power_r=0.5, ties=ties)
    sizes = [items_for_r(0.5, 0.05, tie_share=t) for t in (0.0, 0.3, 0.5)]
    assert (
        f"{sizes[0]} with continuous differences, {sizes[1]} with 30% tied pairs (the mean over metrics), "
        f"{sizes[2]} with 50% (tutor_turns); tie shares from this plan run on the calibrated sim, 8 items per source"
    ) in " ".join(lines)


def test_the_measuring_run_is_the_plan_cut_and_played_by_the_sim() -> None:
    overrides = [
        'models.tutor={model: openai/qwen, base_url: "http://127.0.0.1:9/v1", params: {temperature: 0.7}}',
        "limit=5",
    ]
    scenario = load_scenario(ROOT / "scenarios" / "fairness.yaml", overrides=overrides)
    cut = _on_sim(scenario, 3)
    assert [spec.model for spec in cut.models.tutors] == ["sim/tutor"]
    assert cut.models.student is not None and cut.models.student.model == "sim/student"
    assert [j.model for j in cut.models.judge] == ["sim/judge"]
    assert [source.options["limit"] for source in cut.items] == [3]
    assert cut.limit is None and cut.design == scenario.design and cut.base_dir == scenario.base_dir
