"""Agreement metrics against independent computations, and `simrun calibrate` end to end."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cli._main import main
from engine.stats._agreement import agreement, cohen_kappa, krippendorff_alpha, label_entropy
from engine.tools.calibrate._html import render_calibration_html

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "scenarios" / "calibration" / "mrbench_sample.json"


def _alpha(a: list[str], b: list[str], order: list[str], *, ordinal: bool) -> float:
    """Krippendorff's alpha from the coincidence matrix (two coders, no missing values), written out by hand."""
    index = {label: i for i, label in enumerate(order)}
    k = len(order)
    o = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        o[index[x]][index[y]] += 1
        o[index[y]][index[x]] += 1
    n_c = [sum(row) for row in o]
    n = sum(n_c)

    def delta(c: int, d: int) -> float:
        if not ordinal:
            return 0.0 if c == d else 1.0
        low, high = min(c, d), max(c, d)
        return (sum(n_c[low : high + 1]) - (n_c[c] + n_c[d]) / 2) ** 2

    observed = sum(o[c][d] * delta(c, d) for c in range(k) for d in range(k))
    expected = sum(n_c[c] * n_c[d] * delta(c, d) for c in range(k) for d in range(k)) / (n - 1)
    return 1 - observed / expected


def test_cohen_kappa_matches_the_textbook_example() -> None:
    # 50 units: both yes 20, rater A yes / B no 5, A no / B yes 10, both no 15 -> po 0.7, pe 0.5, kappa 0.4
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b, ["no", "yes"]) == pytest.approx(0.4)


def test_quadratic_kappa_matches_its_definition() -> None:
    order = ["No", "To some extent", "Yes"]
    a = ["No", "No", "Yes", "Yes", "To some extent", "Yes", "No", "To some extent"]
    b = ["No", "To some extent", "Yes", "To some extent", "Yes", "Yes", "Yes", "To some extent"]
    k, n = len(order), len(a)
    observed = Counter((order.index(x), order.index(y)) for x, y in zip(a, b, strict=True))
    rows, cols = Counter(order.index(x) for x in a), Counter(order.index(y) for y in b)
    w = [[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)]
    num = sum(w[i][j] * observed[(i, j)] for i in range(k) for j in range(k))
    den = sum(w[i][j] * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    assert cohen_kappa(a, b, order, weights="quadratic") == pytest.approx(1 - num / den)


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=3, max_size=40).filter(
        lambda pairs: len({v for p in pairs for v in p}) > 1
    )
)
def test_alpha_matches_the_coincidence_matrix(pairs: list[tuple[int, int]]) -> None:
    order = ["low", "mid", "high"]
    a, b = [order[x] for x, _ in pairs], [order[y] for _, y in pairs]
    assert krippendorff_alpha(a, b, order, level="nominal") == pytest.approx(_alpha(a, b, order, ordinal=False))
    assert krippendorff_alpha(a, b, order, level="ordinal") == pytest.approx(_alpha(a, b, order, ordinal=True))


def test_entropy_is_natural_log_shannon() -> None:
    labels = ["guess"] * 3 + ["careless"] * 1
    assert label_entropy(labels) == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert label_entropy([]) is None


def test_undefined_statistics_are_none_and_missing_labels_are_left_out() -> None:
    result = agreement(["Yes", "Yes", None, "Yes"], ["Yes", "Yes", "No", None], ["No", "Yes"])
    assert result.n == 2 and result.accuracy == 1.0
    assert result.kappa is None and result.alpha_nominal is None
    assert result.confusion == ((0, 0), (0, 2))


def test_lenient_collapse_and_confusion() -> None:
    order = ["No", "To some extent", "Yes"]
    human = ["Yes", "To some extent", "No", "No"]
    judge = ["To some extent", "Yes", "No", "Yes"]
    exact = agreement(human, judge, order, ordinal=True)
    lenient = agreement(human, judge, order, collapse={"To some extent": "Yes"})
    assert exact.accuracy == 0.25 and lenient.accuracy == 0.75
    assert lenient.labels == ("No", "Yes") and lenient.confusion == ((1, 1), (0, 2))
    assert exact.confusion == ((1, 0, 1), (0, 0, 1), (0, 1, 0))


def test_calibrate_command_on_the_shipped_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["calibrate", str(FIXTURE), "--model", "judge=sim/judge", "--out", str(tmp_path), "--confusion"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "answer_leak" in printed and "turn_quality" in printed
    result = json.loads((tmp_path / "calibration.json").read_text())
    assert result["examples"] == 32
    assert set(result["judges"]) == {"answer_leak", "conversation_stats", "turn_quality"}
    leak = result["judges"]["answer_leak"]
    assert leak["deterministic"] and leak["dimensions"][0]["dimension"] == "Revealing_of_the_Answer"
    # the fixture's Bridge items have no reference answer, so answer_leak gives no verdict on them
    assert leak["dimensions"][0]["no_verdict"] > 0
    assert "| human ↓ / judge → |" in (tmp_path / "calibration.md").read_text()
    html = (tmp_path / "calibration.html").read_text(encoding="utf-8")
    rows = [row for data in result["judges"].values() for row in data["dimensions"]]
    assert html.count('<svg class="plot-svg"') == len(rows) == 7  # one confusion heatmap per judge × dimension
    assert 'id="tbl-calibration-agreement"' in html and 'class="sim-note"' in html
    assert "default-src &#39;none&#39;" in html and len(re.findall(r"<script\b", html)) == 1
    for index, (name, data) in enumerate(result["judges"].items()):
        for number, row in enumerate(data["dimensions"]):
            key = f"cm-{index}-{number}"
            assert html.index(f'id="tbl-{key}"') > html.index(f'id="fig-{key}"')
            exact = row["exact"]
            assert f"{name} · {row['dimension']}" in html and f"accuracy {exact['accuracy']:.1%}" in html
    again = tmp_path / "again"
    assert main(["calibrate", str(FIXTURE), "--model", "judge=sim/judge", "--out", str(again)]) == 0
    assert (again / "calibration.html").read_bytes() == (tmp_path / "calibration.html").read_bytes()


def test_calibration_html_escapes_and_shows_every_count() -> None:
    """Judge names and labels are text, never markup; each confusion cell is in the table below its heatmap."""
    planted = "<script>alert(1)</script>"
    labels = ["No", planted]
    exact = {
        "n": 10,
        "accuracy": 0.7,
        "kappa": 0.4,
        "kappa_quadratic": None,
        "alpha_nominal": 0.39,
        "alpha_ordinal": None,
        "macro_f1": 0.69,
        "labels": labels,
        "confusion": [[4, 1], [2, 3]],
        "entropy_reference": 0.69,
        "entropy_rater": 0.67,
    }
    result = {
        "label_set": "own",
        "examples": 10,
        "judges": {
            planted: {
                "errors": 1,
                "error_examples": [planted],
                "deterministic": False,
                "models": ["openai/x"],
                "dimensions": [
                    {"dimension": planted, "ordinal": False, "no_verdict": 0, "exact": exact, "lenient": None}
                ],
            }
        },
        "duration_s": 0.1,
        "calls": {"requests": 30, "retries": 0, "failures": 0},
    }
    html = render_calibration_html(result)
    assert planted not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert len(re.findall(r"<script\b", html)) == 1 and 'class="sim-note"' not in html
    table = html[html.index('id="tbl-cm-0-0"') :]
    table = table[: table.index("</table>")]
    assert re.findall(r">(\d+)<", table) == ["4", "1", "5", "2", "3", "5"]
    assert "1 examples gave a judge or provider error" in html


def test_calibrate_without_a_model_runs_the_deterministic_judges_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["calibrate", str(FIXTURE)]) == 0
    printed = capsys.readouterr().out
    assert "answer_leak" in printed and "turn_quality" not in printed


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "missing.json"],
        ["calibrate", str(FIXTURE), "--source", "nope"],
        ["calibrate", str(FIXTURE), "--judge", "turn_quality"],
        ["calibrate", str(FIXTURE), "--judge", "harm", "--model", "judge=sim/judge"],
        ["calibrate", str(FIXTURE), "--model", "tutor=sim/judge"],
        ["calibrate", str(FIXTURE), "--model", "judge={model: sim/judge, params: {error_rate: 7}}"],
        ["calibrate", str(FIXTURE), "--set", "limit=0"],
        ["calibrate", str(FIXTURE), "--source", "bridge"],
    ],
)
def test_bad_input_is_a_clear_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error" in err.lower() and "Traceback" not in err


def test_an_unwritable_out_folder_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out under a regular file cannot be created: exit 2 naming the folder, no traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["calibrate", str(FIXTURE), "--out", str(blocker / "report")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the calibration report to {blocker / 'report'}" in err and "Traceback" not in err
