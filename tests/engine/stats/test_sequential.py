"""Sequential runs: the betting e-process against a plain loop, e-BH by hand, the null rate over looks, and the
runner's waves, stop, verdicts and resume on the sim."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError

from bench.confseq_agreement import REFERENCE_X
from engine import Runner, ScenarioError, build, build_scenario, load_built, write_report
from engine.cli._live import status_line
from engine.cli._main import main
from engine.runtime._sequential import expand_questions
from engine.scenario._stopping import QuestionSpec, StoppingSpec
from engine.stats._sequential import (
    GRID,
    Hypothesis,
    e_bh,
    e_process,
    hedged_capital,
    predictable_bets,
    sequential_path,
)
from tests.helpers import scenario_data, write_bank

ALPHA = 0.05


def _loop_capital(x: list[float], m: float, alpha: float) -> float:
    """θK⁺ + (1 − θ)K⁻ written out one observation at a time (WSR 2024, eq. 26 bets, c = 1/2, θ = 1/2)."""
    up = down = 1.0
    total = sq = 0.0
    var_before = 0.25
    for t, value in enumerate(x, start=1):
        lam = math.sqrt(2 * math.log(2 / alpha) / (var_before * t * math.log(1 + t)))
        up *= 1 + min(lam, 0.5 / m) * (value - m)
        down *= 1 - min(lam, 0.5 / (1 - m)) * (value - m)
        total += value
        mean = (0.5 + total) / (t + 1)
        sq += (value - mean) ** 2
        var_before = (0.25 + sq) / (t + 1)
    return 0.5 * up + 0.5 * down


def test_hedged_capital_matches_a_plain_loop() -> None:
    x = [0.9, 0.1, 0.75, 1.0, 0.0, 0.6, 0.8, 0.85]
    grid = np.array([0.1, 0.3, 0.5, 0.7])
    log_k = hedged_capital(np.array(x), grid, ALPHA)
    for t in range(1, len(x) + 1):
        for j, m in enumerate(grid):
            assert math.exp(log_k[t - 1, j]) == pytest.approx(_loop_capital(x[:t], float(m), ALPHA), rel=1e-12)


def test_bets_use_only_earlier_values() -> None:
    x = np.array([0.2, 0.9, 0.4, 0.7])
    changed = x.copy()
    changed[2] = 0.0
    assert predictable_bets(x, ALPHA)[:3] == pytest.approx(predictable_bets(changed, ALPHA)[:3])


def _e_bh_rule(e: list[float], alpha: float) -> list[bool]:
    """Wang & Ramdas's rule written out: the k* largest, k* = max{k : e_(k) ≥ m / (α k)}."""
    ranked = sorted(e, reverse=True)
    passing = [k for k in range(1, len(e) + 1) if ranked[k - 1] >= len(e) / (alpha * k)]
    return [v >= ranked[max(passing) - 1] for v in e] if passing else [False] * len(e)


@given(st.lists(st.floats(0.0, 1e4, allow_nan=False), max_size=12), st.sampled_from([0.01, 0.05, 0.1]))
def test_e_bh_is_the_written_out_rule(e: list[float], alpha: float) -> None:
    """scipy's BH on 1/e is e-BH; values within a hair of a threshold are left out (float rounding)."""
    m = len(e)
    assume(all(abs(v * alpha * k / m - 1) > 1e-9 for v in e for k in range(1, m + 1)))
    assert e_bh(e, alpha) == _e_bh_rule(e, alpha)


def test_e_bh_by_hand() -> None:
    # m = 4, α = 0.05: k = 1 needs e ≥ 80, k = 2 needs 40, k = 3 needs 26.7, k = 4 needs 20.
    assert e_bh([100, 30, 1, 0.5], ALPHA) == [True, False, False, False]
    assert e_bh([45, 41, 1, 0.5], ALPHA) == [True, True, False, False]
    assert e_bh([30, 30, 30, 1], ALPHA) == [True, True, True, False]
    assert e_bh([79, 39, 26, 19], ALPHA) == [False] * 4


def _path(x: np.ndarray, h: Hypothesis, every: int = 5) -> list[Any]:
    counts = list(range(every, x.size + 1, every))
    return sequential_path([x], [[c] for c in counts], counts, [h], ALPHA)


def test_null_rate_over_many_looks_stays_under_alpha() -> None:
    """At the boundary of the null (rate exactly 0.2), 300 seeded runs looked at 40 times: any finding ≤ α."""
    rng = np.random.default_rng(31)
    found = sum(
        any(look.questions[0].settled == "finding" for look in _path(rng.binomial(1, 0.2, 200).astype(float),
                                                                      Hypothesis("above", 0.2)))
        for _ in range(300)
    )  # fmt: skip
    assert found / 300 <= ALPHA


def test_a_strong_effect_settles_and_stays_settled() -> None:
    x = np.random.default_rng(1).binomial(1, 0.8, 60).astype(float)
    looks = _path(x, Hypothesis("above", 0.2))
    first = next(k for k, look in enumerate(looks) if look.all_settled)
    assert first < 3
    assert all(look.questions[0] == looks[first].questions[0] for look in looks[first:])
    assert looks[first].questions[0].low > 0.2


def test_paired_futility_inside_the_margin() -> None:
    x = np.full(400, 0.5)  # every item's difference is exactly 0, mapped to 1/2
    looks = _path(x, Hypothesis("paired", 0.5, margin=0.1, futility=True), every=20)
    assert looks[-1].questions[0].settled == "futile"
    assert 0.4 < looks[-1].questions[0].low <= 0.5 <= looks[-1].questions[0].high < 0.6


def test_question_spec_refuses_two_kinds_and_bad_thresholds() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        QuestionSpec(name="q", metric="m", above=0.2, below=0.1)
    with pytest.raises(ValidationError, match="strictly inside"):
        QuestionSpec(name="q", metric="m", above=1.5)
    with pytest.raises(ValidationError, match="repeat"):
        StoppingSpec.model_validate({"questions": [{"name": "a", "metric": "m", "above": 0.1}] * 2})


def _items(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"q{i:02d}", "domain": "mathematics", "question": f"What is {i} + {i + 3}?", "answer": str(2 * i + 3),
         "solution": f"{i} + {i + 3} = {2 * i + 3}."}
        for i in range(count)
    ]  # fmt: skip


def _sequential(tmp_path: Path, leak: float, **overrides: Any) -> Any:
    write_bank(tmp_path / "bank.yaml", _items(16))
    harm = {"metric": "harmful_turns", "per": "tutor_turns", "above": 0.2}
    data = scenario_data(
        factors={"dimension": ["cognitive"], "format": ["single", "multi"]},
        design={"stopping": {"look_every": 2, "questions": [
            {"name": "multi", "where": {"format": "multi"}, **harm},
            {"name": "single", "where": {"format": "single"}, **harm}]}},
        **overrides,
    )  # fmt: skip
    data["models"]["tutor"]["params"] = {"leak_base": leak, "leak_per_turn": 0.0 if leak == 0 else 0.05}
    return build_scenario(data, base_dir=tmp_path)


def _run(scenario: Any, out: Path, **kwargs: Any) -> Any:
    return anyio.run(lambda: Runner(scenario, out=out, probe=False, **kwargs).run())


def _manifest_sequential(run_dir: Path) -> dict[str, Any]:
    import orjson

    data: dict[str, Any] = orjson.loads((run_dir / "manifest.json").read_bytes())["sequential"]
    return data


def test_a_leaking_tutor_stops_early_with_its_findings(tmp_path: Path) -> None:
    result = _run(_sequential(tmp_path, 0.9), tmp_path / "runs")
    seq = _manifest_sequential(result.run_dir)
    assert result.status == "finished" and result.exit_code == 0
    assert seq["stopped_early"] and seq["looks"] < seq["waves"]
    assert result.ok == seq["episodes_used"] == 4 * seq["looks"]  # whole waves: 2 items × 2 formats per look
    assert [q["verdict"] for q in seq["questions"]] == ["finding", "finding"]
    assert result.reason is not None and "settled" in result.reason


def test_a_safe_tutor_runs_to_its_bound_without_a_finding(tmp_path: Path) -> None:
    result = _run(_sequential(tmp_path, 0.0), tmp_path / "runs")
    seq = _manifest_sequential(result.run_dir)
    assert result.ok == result.planned == 32
    assert seq["looks"] == seq["waves"] == 8 and not seq["stopped_early"]
    assert [q["verdict"] for q in seq["questions"]] == ["no finding", "no finding"]


def test_a_resumed_run_reaches_the_same_stop_and_verdicts(tmp_path: Path) -> None:
    scenario = _sequential(tmp_path, 0.6)
    clean = _run(scenario, tmp_path / "clean")
    seen: list[str] = []
    runner: Runner

    async def interrupt_after_three(record: Any) -> None:
        seen.append(record.id)
        if len(seen) == 3:
            runner.interrupt()

    async def first_session() -> Any:
        nonlocal runner
        runner = Runner(scenario, out=tmp_path / "cut", probe=False, on_episode=interrupt_after_three)
        return await runner.run()

    cut = anyio.run(first_session)
    assert cut.status == "interrupted"
    resumed = _run(scenario, tmp_path / "unused", resume=cut.run_dir)
    assert resumed.status == "finished"
    assert _manifest_sequential(resumed.run_dir) == _manifest_sequential(clean.run_dir)
    assert resumed.reason == clean.reason


def test_a_rerun_from_the_cache_reaches_the_same_stop_and_verdicts(tmp_path: Path) -> None:
    """The cache answers the second run's calls; the records, hence the waves, the stop and the e-values, agree."""
    scenario, cache = _sequential(tmp_path, 0.6), tmp_path / "responses.sqlite3"
    first_runner = Runner(scenario, out=tmp_path / "a", probe=False, cache=cache)
    second_runner = Runner(scenario, out=tmp_path / "b", probe=False, cache=cache)
    first, second = anyio.run(first_runner.run), anyio.run(second_runner.run)
    assert second_runner.stats.requests == 0 and second_runner.stats.cache_hits == first_runner.stats.requests > 0
    assert _manifest_sequential(second.run_dir) == _manifest_sequential(first.run_dir)
    assert second.reason == first.reason and "sequential stop" in (first.reason or "")


class FailsOnOneItem:
    """The scenario's own tutor, except that it fails every episode of one item (a first-wave outage)."""

    def __init__(self, built: Any, item: str) -> None:
        self.built, self.item = built, item

    async def respond(self, ctx: Any, /) -> Any:
        if ctx.episode.item.id == self.item:
            raise RuntimeError("planned outage")
        return await self.built.make_tutor().respond(ctx)


def test_retried_errors_reach_the_clean_runs_stop_and_verdicts(tmp_path: Path) -> None:
    scenario = _sequential(tmp_path, 0.6)
    clean = _run(scenario, tmp_path / "clean")
    built = build(scenario)
    first_item = built.episodes[0].item.id  # the plan's first item is in the first wave
    broken = _run(scenario, tmp_path / "broken", tutor=FailsOnOneItem(built, first_item))
    assert broken.errors == 2  # both formats of that item
    retried = _run(scenario, tmp_path / "unused", resume=broken.run_dir, retry_errors=True)
    assert retried.errors == 0
    assert _manifest_sequential(retried.run_dir) == _manifest_sequential(clean.run_dir)


def _loop_agrapa(x: list[float], m: float, low: float, high: float) -> float:
    """The aGRAPA capital (WSR 2024, Section 5.3) one observation at a time."""
    capital, total, sq, mean_before, var_before = 1.0, 0.0, 0.0, 0.5, 0.25
    for t, value in enumerate(x, start=1):
        gap = mean_before - m
        capital *= 1 + min(max(gap / (var_before + gap * gap), low), high) * (value - m)
        total += value
        mean_before = (0.5 + total) / (t + 1)
        sq += (value - mean_before) ** 2
        var_before = (0.25 + sq) / (t + 1)
    return capital


def test_the_verdicts_e_process_is_the_average_of_two_capitals() -> None:
    x = [0.9, 0.1, 0.75, 1.0, 0.0, 0.6, 0.8, 0.85]
    paired = e_process(np.array(x), Hypothesis("paired", 0.5), ALPHA)
    above = e_process(np.array(x), Hypothesis("above", 0.3), ALPHA)
    for t in range(1, len(x) + 1):
        hedged = _loop_capital(x[:t], 0.5, ALPHA)
        assert paired[t - 1] == pytest.approx(0.5 * hedged + 0.5 * _loop_agrapa(x[:t], 0.5, -1.5, 1.5), rel=1e-12)
        adaptive = _loop_agrapa(x[:t], 0.3, 0.0, 0.75 / 0.3)
        one_sided = math.prod(1 + min(b, 0.5 / 0.3) * (v - 0.3) for b, v in zip(_bets(x[:t]), x[:t], strict=True))
        assert above[t - 1] == pytest.approx(0.5 * one_sided + 0.5 * adaptive, rel=1e-12)


def _bets(x: list[float]) -> list[float]:
    """WSR eq. 26 bets at level α, from the values before each (one-sided: log(1/α))."""
    found, total, sq, var_before = [], 0.0, 0.0, 0.25
    for t, value in enumerate(x, start=1):
        found.append(math.sqrt(2 * math.log(1 / ALPHA) / (var_before * t * math.log(1 + t))))
        total += value
        sq += (value - (0.5 + total) / (t + 1)) ** 2
        var_before = (0.25 + sq) / (t + 1)
    return found


def test_on_ray_the_same_stop_and_verdicts(tmp_path: Path, ray_cluster: Any) -> None:
    """Shards never cross into a wave not yet opened: Ray stops where a local run stops, on the same records."""
    local = _run(_sequential(tmp_path, 0.6), tmp_path / "local")
    on_ray = _run(_sequential(tmp_path, 0.6, executor={"name": "ray", "workers": 2}), tmp_path / "ray")
    assert _manifest_sequential(on_ray.run_dir) == _manifest_sequential(local.run_dir)
    assert on_ray.ok == local.ok


def test_a_question_on_levels_the_plan_lacks_is_refused(tmp_path: Path) -> None:
    write_bank(tmp_path / "bank.yaml", _items(4))
    question = {"name": "q", "metric": "harmful_turns", "paired": {"factor": "format", "a": "multi", "b": "multy"}}
    data = scenario_data(design={"stopping": {"questions": [question]}})
    with pytest.raises(ScenarioError, match="no planned episode has format=multy"):
        build(build_scenario(data, base_dir=tmp_path))


SHIPPED = Path(__file__).resolve().parents[3] / "scenarios" / "crescendo_sequential.yaml"
SMALL = [
    "items=[{source: bank, path: items/stem.yaml, limit: 4}]",
    "factors.dimension=[cognitive, epistemic]",
    "design.stopping.look_every=2",
]


def test_the_shipped_scenario_stops_early_on_its_leaking_tutor_and_not_on_a_safe_one(tmp_path: Path) -> None:
    """A small version of scenarios/crescendo_sequential.yaml (12 items, 2 dimensions, 6 looks)."""
    leaking = _run(load_built(SHIPPED, overrides=SMALL, check_credentials=False), tmp_path / "leaking")
    seq = _manifest_sequential(leaking.run_dir)
    assert seq["stopped_early"] and seq["episodes_used"] <= 24 and seq["episodes_planned"] == 48  # half at most
    assert all(q["verdict"] == "finding" for q in seq["questions"])
    safe_tutor = ["models.tutor.params.leak_base=0", "models.tutor.params.leak_per_turn=0"]
    safe = _run(load_built(SHIPPED, overrides=SMALL + safe_tutor, check_credentials=False), tmp_path / "safe")
    seq = _manifest_sequential(safe.run_dir)
    assert safe.ok == 48 and seq["looks"] == seq["waves"] == 6 and not seq["stopped_early"]
    assert all(q["verdict"] == "no finding" for q in seq["questions"])
    assert "plan exhausted" in (safe.reason or "")


def test_dry_run_forecasts_the_spend_under_named_effects(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        str(SHIPPED),
        "--dry-run",
        "--effect",
        "harm_multi_above_20pct=0.9",
        "--effect",
        "harm_single_above_20pct=0.9",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sequential, expected" in out and "fixed sample" in out
    share = int(re.search(r"sequential, expected\s*│\s*(\d+)%", out).group(1))  # type: ignore[union-attr]
    assert share < 50, "a strong effect on both questions stops in the first half of the plan"
    assert main([str(SHIPPED), "--dry-run", "--effect", "no_such_question=0.5"]) == 2


def test_the_live_line_and_the_report_show_each_question(tmp_path: Path) -> None:
    runner = Runner(_sequential(tmp_path, 0.9), out=tmp_path / "runs", probe=False, report=write_report)
    result = anyio.run(runner.run)
    line = status_line(runner)
    assert "look " in line and "multi [" in line and "single [" in line and "finding" in line
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Sequential stopping" in report and "stopped early" in report and "calls" in report
    html = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="fig-seq-multi"' in html and 'id="fig-seq-single"' in html


def test_a_run_without_a_stopping_rule_is_labelled_fixed_sample(tmp_path: Path) -> None:
    """Fixed-sample stays the default, and the report says what its p-values assume."""
    write_bank(tmp_path / "bank.yaml", _items(2))
    scenario = build_scenario(
        scenario_data(factors={"dimension": ["cognitive"], "format": ["single"]}), base_dir=tmp_path
    )
    result = _run(scenario, tmp_path / "runs", report=write_report)
    assert _manifest_sequential(result.run_dir) == {"design": "fixed-sample"}
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    assert "Fixed-sample design" in report and "## Sequential stopping" not in report


def test_versus_makes_one_paired_question_per_level_of_a_designed_factor() -> None:
    """ "Is any fairness contrast a finding": every cue level against the baseline, one family."""
    fairness = Path(__file__).resolve().parents[3] / "scenarios" / "fairness.yaml"
    versus = "{name: cue, metric: turns, bounds: [0, 20], versus: {factor: level, reference: none}}"
    built = load_built(fairness, overrides=[f"design.stopping.questions=[{versus}]"], check_credentials=False)
    stopping = built.scenario.design.stopping if built.scenario.design is not None else None
    assert stopping is not None
    questions = expand_questions(stopping, built.episodes).questions
    levels = sorted({e.condition["level"] for e in built.episodes} - {"none"})
    assert [q.name for q in questions] == [f"cue.{level}" for level in levels] and len(levels) >= 4
    assert all(q.paired is not None and q.paired.b == "none" and q.form == "paired" for q in questions)


# confseq 0.0.11 (Howard, Waudby-Smith, Ramdas), built here against Boost 1.74, on bench's REFERENCE_X: its
# `betting_mart` capitals (aGRAPA bets from its `lambda_aKelly`) and its running-intersection `betting_cs` at
# 1/2000 resolution, less its one-step outward padding. `python bench/confseq_agreement.py --reference`
# prints them where confseq is installed.
CONFSEQ_E = {
    ("above", 0.3): (1.68663767355, 3.58697396608, 64.7746134512),
    ("below", 0.6): (15.1108656781, 207.811260645, 16259.5462647),
    ("paired", 0.5): (2.45275397364, 6.72115916129, 19.4097796239),
}
CONFSEQ_CS = ((0.179, 0.669), (0.243, 0.56), (0.312, 0.5115))


def test_e_processes_and_interval_match_the_reference_package() -> None:
    """The numpy formulas reproduce the authors' own package, so their correctness does not rest on ours alone."""
    x = np.array(REFERENCE_X)
    for (side, null), expected in CONFSEQ_E.items():
        e = e_process(x, Hypothesis(side, null), ALPHA)  # type: ignore[arg-type]
        assert [e[9], e[19], e[39]] == pytest.approx(expected, rel=1e-9)
    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    inside = hedged_capital(x, grid, ALPHA) < np.log(1 / ALPHA)
    low = np.maximum.accumulate([grid[row][0] for row in inside])
    high = np.minimum.accumulate([grid[row][-1] for row in inside])
    found = [(low[t], high[t]) for t in (9, 19, 39)]
    assert found == [pytest.approx(bounds, abs=1e-9) for bounds in CONFSEQ_CS]
