"""Spending limits: counted per model, checked before each episode, stopping a run the way Ctrl-C does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import engine
from engine import ScenarioError
from engine.cli._main import main
from engine.runtime._rundir import RunDir
from engine.scenario._budget import Budget, Price, price_of, price_source
from tests.helpers import make_scenario, scenario_data, write_bank


def _catalogue(model_ref: str, provider: str) -> Price:
    """The catalogue asked directly for a million tokens of each kind (base tier: a small request, scaled)."""
    from genai_prices import Usage, calc_price

    found = calc_price(Usage(input_tokens=1000, output_tokens=1000), model_ref=model_ref, provider_id=provider)
    return Price(input=float(found.input_price) * 1000, output=float(found.output_price) * 1000)


def test_prices_come_from_the_scenario_then_the_catalogue_and_sim_is_free() -> None:
    """A scenario price overrides the catalogue's list price; `sim/...` costs nothing; unknown models have none."""
    own = {"openai/gpt-4o-mini": Price(input=1.0, output=2.0)}
    assert price_of("openai/gpt-4o-mini", own) == Price(input=1.0, output=2.0)
    assert price_of("openai/gpt-4o-mini", {}) == Price(input=0.15, output=0.60)
    assert price_of("anthropic/claude-sonnet-4-5", {}) == _catalogue("claude-sonnet-4-5", "anthropic")
    assert price_of("litellm/gemini/gemini-2.0-flash", {}) == _catalogue("gemini-2.0-flash", "google")
    assert price_of("sim/tutor", {}) == Price(input=0, output=0)
    assert price_of("openai/my-finetune", {}) is None
    assert price_of("openai/Qwen2.5-7B-Instruct", {}) is None, "an openai/ name is priced from OpenAI's list only"
    assert price_of("http/gpt-4o", {}) is None, "a product has no list price"
    assert price_source().startswith("genai-prices 0.")


def test_cost_and_limits_against_hand_computed_values() -> None:
    """2M prompt + 1M completion tokens at $0.15/$0.60 per million cost $0.90."""
    usage = {"openai/gpt-4o-mini": (2_000_000, 1_000_000), "sim/judge": (5, 5)}
    budget = Budget(max_cost=1.0)
    assert budget.cost(usage, {}) == pytest.approx(0.90)
    assert budget.exceeded(usage, {}) is None
    assert "cost budget reached" in (Budget(max_cost=0.9).exceeded(usage, {}) or "")
    assert "token budget reached" in (Budget(max_tokens=3_000_010).exceeded(usage, {}) or "")
    assert Budget(max_tokens=3_000_011).exceeded(usage, {}) is None


def test_a_dollar_limit_needs_every_price() -> None:
    """Asking for --max-cost with a model of unknown price is refused up front, naming the model."""
    with pytest.raises(ScenarioError, match="openai/my-finetune"):
        Budget(max_cost=5).check_prices(["openai/my-finetune", "sim/judge"], {})
    Budget(max_tokens=5).check_prices(["openai/my-finetune"], {})  # tokens need no price


async def test_token_limit_stops_admission_and_resume_completes(tmp_path: Path) -> None:
    """A run that reaches its token limit stops like Ctrl-C (exit 130, whole records) and resumes to the end."""
    scenario = make_scenario(tmp_path, concurrency=1)
    stopped = await engine.Runner(
        scenario, out=tmp_path / "runs", budget=Budget(max_tokens=3_000), report=engine.write_report
    ).run()
    done = len(list(RunDir(stopped.run_dir).iter_records()))
    assert stopped.status == "interrupted" and stopped.exit_code == 130
    assert 1 <= done < stopped.planned
    resumed = await engine.Runner(scenario, resume=stopped.run_dir, report=engine.write_report).run()
    assert resumed.exit_code == 0 and resumed.ok == resumed.planned
    manifest = RunDir(stopped.run_dir).read_manifest()
    assert manifest["calls"]["requests"] > 0 and manifest["counts"]["ok"] == resumed.planned


def test_dry_run_shows_the_estimate_the_budget_is_checked_against(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dry-run --max-cost` prints the estimated cost next to the limit, and calls nothing."""
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_data()), encoding="utf-8")
    assert main([str(path), "--dry-run", "--max-cost", "2", "--out", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "cost ≤ (USD)" in printed and "checked before each episode against --max-cost $2.00" in printed
    assert not (tmp_path / "runs").exists()
