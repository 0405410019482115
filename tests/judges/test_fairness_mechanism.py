"""judges.fairness_mechanism: findings grouped by dimension and contrast, same-signal metrics, the cause."""

from __future__ import annotations

from bench.fairness_calibration import DESIGNS, analyse, prepare, run_seed
from engine import EpisodeRecord, Judgment
from judges.fairness_mechanism import SAME_SIGNAL, mechanisms, metric_agreement
from judges.fairness_model import FairnessContrast, MetricPair

STAMP = "2025-01-01T00:00:00+00:00"


def record(rid: str, labels: dict[str, list[int]]) -> EpisodeRecord:
    judgments = [
        Judgment(judge="turn_quality", metric=metric, target=turn, value=value)
        for metric, values in labels.items()
        for turn, value in enumerate(values)
    ]
    return EpisodeRecord(
        id=rid, scenario="x", item_id="i", condition={}, replicate=0, seed=1, status="ok",
        turns=[], judgments=judgments, metrics={}, meta={}, started_at=STAMP, finished_at=STAMP,
    )  # fmt: skip


def test_metric_agreement_counts_turns_both_metrics_label() -> None:
    """−1 (not applicable) is left out; the share of equal labels over the turns both label, by hand."""
    records = [
        record("a", {"mistake_recognize": [1, 0, -1, 1], "corrective_tone": [1, 0, -1, 0], "answer_leakage": [0] * 4}),
        record("b", {"mistake_recognize": [1] * 20, "corrective_tone": [1] * 20}),
    ]
    pairs = {(r.a, r.b): r for r in metric_agreement(records)}
    pair = pairs[("mistake_recognize", "corrective_tone")]
    assert (pair.turns, pair.agreement) == (23, 22 / 23)
    assert pair.same_signal == (SAME_SIGNAL <= 22 / 23)
    leak = pairs[("mistake_recognize", "answer_leakage")]
    assert (leak.turns, leak.agreement) == (3, 1 / 3)


def test_findings_on_one_contrast_form_one_mechanism_with_its_signals_and_cause() -> None:
    rows = [
        FairnessContrast(domain="all", channel="explicit", dimension="immigration", a="immigrant", b="native",
                         metric=m, r=0.5, p_family=p, test="wilcoxon", n=20, status="ok", finding=True)
        for m, p in (("tutor_turns", 0.001), ("answer_leakage", 0.0001), ("mistake_recognize", 0.01),
                     ("corrective_tone", 0.02))
    ]  # fmt: skip
    agreement = [MetricPair(a="mistake_recognize", b="corrective_tone", turns=20, agreement=1.0, same_signal=True)]
    (found,) = mechanisms(rows, agreement)
    assert found.dimension == "immigration" and found.contrast == "immigrant − native"
    assert [f.metric for f in found.findings] == [
        "answer_leakage",
        "tutor_turns",
        "mistake_recognize",
        "corrective_tone",
    ]
    assert found.signals == [["answer_leakage"], ["tutor_turns"], ["mistake_recognize", "corrective_tone"]]
    assert found.cause == "answer_leakage" and found.follows_cause == ["tutor_turns"]


def test_a_planted_single_leak_is_headlined_on_its_dimension() -> None:
    """+0.4 leak probability on the immigrant level, 50 items: the findings are many metrics, the headline is
    the immigration dimension, with the answer leak named as the cause."""
    design = DESIGNS[0]
    prepared = prepare(design.scenario, design.overrides, 50)
    result = analyse(prepared, seed=run_seed("test-mechanism", 0), planted=design.planted, bias=0.4)
    assert len(result.findings) > len(result.mechanisms) >= 1
    headline = result.mechanisms[0]
    assert headline.dimension == "immigration"
    assert headline.cause == "answer_leakage"
    immigration = [g for g in result.mechanisms if g.dimension == "immigration"]
    assert len({(g.domain, g.contrast) for g in immigration}) == len(immigration)  # one row per cell
