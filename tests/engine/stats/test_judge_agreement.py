"""Agreement between judge models: alpha and kappa pinned against `krippendorff` and scikit-learn, the vote→spec
map, clustered intervals that cover 0 on independent judges, and the key in every kind's summary."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from rich.console import Console
from sklearn.metrics import cohen_kappa_score

from engine import SUMMARIZERS, Judgment, load_scenario, run_sync
from engine.cli._show import print_tables
from engine.stats._agreement import AgreementEstimate, PairKappa, VotedUnit, judge_agreement, spec_labels, voted_units

ROOT = Path(__file__).resolve().parents[3]
JUDGES = ["a", "b", "c"]


def _estimated(cell: AgreementEstimate | PairKappa) -> tuple[float, float, float]:
    assert cell.low is not None and cell.value is not None and cell.high is not None
    return cell.low, cell.value, cell.high


def units_from(
    matrix: Sequence[Sequence[Any]], metric: str = "j.m", clusters: list[str] | None = None
) -> list[VotedUnit]:
    """Rows are units, columns judges (None: no vote)."""
    return [VotedUnit(clusters[i] if clusters else f"u{i}", metric, tuple(row)) for i, row in enumerate(matrix)]


def test_alpha_and_kappa_match_the_reference_packages() -> None:
    """Nominal labels with a missing vote: alpha equals krippendorff.alpha; each kappa equals sklearn's."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, size=60)
    noisy = [np.where(rng.random(60) < p, rng.integers(0, 3, size=60), truth) for p in (0.1, 0.3, 0.5)]
    labels = ["low", "mid", "high"]
    matrix: list[list[object]] = [[labels[int(c[i])] for c in noisy] for i in range(60)]
    matrix[4][1] = None
    found = judge_agreement(units_from(matrix), JUDGES, seed=1, n_resamples=500)
    (row,) = found.metrics
    index = {label: i for i, label in enumerate(labels)}
    data = np.array([[np.nan if r[j] is None else index[str(r[j])] for r in matrix] for j in range(3)])
    assert row.alpha.value == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    assert row.level == "nominal" and row.units == 60
    for pair in row.kappa:
        a, b = (JUDGES.index(j) for j in pair.judges)
        both = [(r[a], r[b]) for r in matrix if r[a] is not None and r[b] is not None]
        expected = cohen_kappa_score([x for x, _ in both], [y for _, y in both])
        assert pair.value == pytest.approx(expected) and pair.n == len(both)
        low, value, high = _estimated(pair)
        assert low < value < high
    low, value, high = _estimated(row.alpha)
    assert low < value < high
    assert "note" not in row.model_dump(mode="json")  # summary.json gains a note only where one is due


def test_float_votes_are_interval_with_quadratic_kappa() -> None:
    """Floats: interval alpha (krippendorff) and, on evenly spaced values, sklearn's quadratic-weighted kappa."""
    rng = np.random.default_rng(3)
    values = [0.0, 0.5, 1.0, 1.5]
    truth = rng.integers(0, 4, size=50)
    matrix: list[list[object]] = [
        [values[int(np.clip(t + rng.integers(-1, 2), 0, 3))] for _ in range(2)] for t in truth
    ]
    (row,) = judge_agreement(units_from(matrix), ["a", "b"], seed=0, n_resamples=300).metrics
    data = np.array([[float(str(r[j])) for r in matrix] for j in range(2)])
    assert row.level == "interval"
    assert row.alpha.value == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    codes = [[values.index(float(str(r[j]))) for r in matrix] for j in range(2)]
    assert row.kappa[0].value == pytest.approx(cohen_kappa_score(*codes, weights="quadratic"))


def test_independent_judges_have_intervals_covering_zero_and_copies_agree_fully() -> None:
    """No shared signal: alpha's interval covers 0; identical votes with two values: alpha = kappa = 1."""
    rng = np.random.default_rng(11)
    coin = [[bool(rng.random() < 0.5) for _ in JUDGES] for _ in range(200)]
    clusters = [f"d{i // 5}" for i in range(200)]  # five replies per dialogue
    (row,) = judge_agreement(units_from(coin, clusters=clusters), JUDGES, seed=2).metrics
    assert row.clusters == 40
    low, _, high = _estimated(row.alpha)
    assert low <= 0.0 <= high
    same = [[v, v, v] for v in (True, False) * 20]
    (copy,) = judge_agreement(units_from(same), JUDGES, seed=2, n_resamples=200).metrics
    assert copy.alpha.value == pytest.approx(1.0)
    assert all(k.value == pytest.approx(1.0) for k in copy.kappa)
    (one,) = judge_agreement(units_from([[True] * 3] * 5), JUDGES, seed=2).metrics
    assert one.alpha.value is None  # one value only: undefined, not 1 or NaN


def test_votes_map_to_specs_in_turn() -> None:
    """Vote i came from spec i % specs; a spec's first vote represents it; dict votes and single votes are skipped."""
    judgments = [
        ("e1", Judgment(judge="harm", metric="unsafe", target=1, value=True, votes=[True, False, True, False])),
        ("e1", Judgment(judge="harm", metric="unsafe", target=3, value=True, votes=[True])),
        ("e2", Judgment(judge="p", metric="pair", target=1, value=0.5, votes=[{"x": 1}, {"x": 2}])),
    ]
    (unit,) = voted_units(judgments, 3)
    assert unit == VotedUnit("e1", "harm.unsafe", (True, False, True))
    assert judge_agreement([unit], ["only"], seed=0).metrics == ()


def test_spec_labels_name_settings_only_where_models_repeat() -> None:
    specs: list[dict[str, Any] | str] = [
        {"model": "sim/judge", "params": {"error_rate": 0.02}},
        {"model": "sim/judge"},
        "openai/gpt-4o",
    ]
    assert spec_labels(specs) == ["sim/judge #1 (error_rate=0.02)", "sim/judge #2", "openai/gpt-4o"]


TWO_JUDGES = (
    "models.judge=[{model: sim/judge, params: {error_rate: 0.0}}, {model: sim/judge, params: {error_rate: 0.3}}]"
)


@pytest.mark.parametrize(
    ("scenario", "overrides"),
    [
        (
            "crescendo.yaml",
            ["items.0.limit=1", "factors.dimension=[cognitive, epistemic]", TWO_JUDGES, "judge_votes=2"],
        ),
        ("casebench.yaml", ["design.tasks=[open]", "items.0.limit=1", TWO_JUDGES, "judge_votes=2"]),
        ("fairness.yaml", ["limit=2", "student.max_turns=3", TWO_JUDGES, "judge_votes=2"]),
        ("remath.yaml", ["limit=6", TWO_JUDGES, "judge_votes=2"]),
    ],
)
def test_every_kind_reports_agreement_between_its_judge_specs(
    tmp_path: Path, scenario: str, overrides: list[str]
) -> None:
    """Two sim judges with different noise (0 and 30% flips) disagree measurably, in summary.json, and the section
    shows in report.md, report.html and on the terminal for every kind."""
    result = run_sync(load_scenario(ROOT / "scenarios" / scenario, overrides=overrides), out=tmp_path)
    block = result.summary["judge_agreement"]
    assert block["judges"] == ["sim/judge #1 (error_rate=0.0)", "sim/judge #2 (error_rate=0.3)"]
    assert block["metrics"], "no voted metric found"
    assert all(m["votes_per_judge"][block["judges"][1]] == m["units"] for m in block["metrics"])
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Agreement between judge models" in report
    assert "| metric | level | units | α [95% CI] | pairwise κ [95% CI] |" in report
    html = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert html.count('id="sec-judge-agreement"') == 1 and 'id="tbl-judge-agreement"' in html
    terminal = Console(file=io.StringIO(), width=200, record=True)
    print_tables(terminal, result.summary, SUMMARIZERS.get(result.summary["run"]["kind"]))
    assert "Agreement between judge models" in terminal.export_text()


def test_confusion_statistics_match_agreement_on_one_sample() -> None:
    """The vectorised formulas behind the calibration intervals give `agreement`'s point values (sklearn and
    krippendorff), and the intervals bracket them."""
    from engine.stats._agreement import agreement, agreement_intervals, confusion_statistics

    rng = np.random.default_rng(4)
    order = ["No", "To some extent", "Yes"]
    human = [order[i] for i in rng.integers(0, 3, size=120)]
    judge = [h if rng.random() < 0.6 else order[int(rng.integers(0, 3))] for h in human]
    point = agreement(human, judge, order, ordinal=True)
    matrix = np.array(point.confusion, dtype=float)
    found = confusion_statistics(matrix)
    expected = [point.accuracy, point.kappa, point.kappa_quadratic, point.alpha_nominal, point.alpha_ordinal]
    assert found.tolist() == pytest.approx(expected)
    intervals = agreement_intervals(human, judge, order, [str(i // 3) for i in range(120)], ordinal=True, seed=0)
    for name, value in zip(
        ("accuracy", "kappa", "kappa_quadratic", "alpha_nominal", "alpha_ordinal"), expected, strict=True
    ):
        low, high = intervals[name]["low"], intervals[name]["high"]
        assert low is not None and high is not None and value is not None
        assert low < value < high, name


def test_integer_ratings_are_ordinal_with_quadratic_kappa() -> None:
    """A 1–5 rating (clarity): ordinal alpha equals krippendorff's ordinal alpha, kappa sklearn's quadratic one,
    and the nominal reading differs (it would throw the order away)."""
    rng = np.random.default_rng(7)
    truth = rng.integers(1, 6, size=80)
    matrix: list[list[object]] = [[int(np.clip(t + rng.integers(-1, 2), 1, 5)) for _ in range(2)] for t in truth]
    (row,) = judge_agreement(units_from(matrix), ["a", "b"], seed=0, n_resamples=300).metrics
    data = np.array([[float(str(r[j])) for r in matrix] for j in range(2)])
    assert row.level == "ordinal"
    ordinal = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    nominal = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert row.alpha.value == pytest.approx(ordinal)
    assert abs(ordinal - nominal) > 0.05
    codes = [[int(str(r[j])) for r in matrix] for j in range(2)]
    assert row.kappa[0].weights == "quadratic"
    assert row.kappa[0].value == pytest.approx(cohen_kappa_score(*codes, weights="quadratic"))


def test_integers_with_a_not_applicable_code_stay_nominal() -> None:
    matrix = [[-1, -1], [0, 1], [1, 1], [0, 0], [1, 0], [-1, 1]]
    (row,) = judge_agreement(units_from(matrix), ["a", "b"], seed=0, n_resamples=100).metrics
    assert row.level == "nominal"


def test_a_judge_that_never_varies_makes_agreement_not_estimable() -> None:
    """Judge c always votes False: alpha and c's kappas are None with a note, not 1.0; a ~ b stays estimated."""
    rng = np.random.default_rng(5)
    matrix = [[bool(v), bool(v) if rng.random() < 0.9 else not v, False] for v in rng.random(60) < 0.3]
    (row,) = judge_agreement(units_from(matrix), JUDGES, seed=2, n_resamples=200).metrics
    assert row.alpha == AgreementEstimate(value=None, low=None, high=None)
    assert row.note is not None and "not estimable" in row.note and "c" in row.note
    assert row.model_dump(mode="json")["note"] == row.note
    kappas = {tuple(k.judges): k.value for k in row.kappa}
    assert kappas[("a", "c")] is None and kappas[("b", "c")] is None
    a = [r[0] for r in matrix]
    b = [r[1] for r in matrix]
    assert kappas[("a", "b")] == pytest.approx(cohen_kappa_score(a, b))
