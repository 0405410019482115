"""The fairness pipeline calibrated, small and deterministic: the bench's designs at a few seeds, and one real
sim run through the async runner (the bench itself prints the figures at ≥ 200 seeds per arm)."""

from __future__ import annotations

from pathlib import Path

import engine
from bench.fairness_calibration import DESIGNS, ROOT, analyse, prepare, run_seed


def test_null_runs_of_the_two_level_design_rarely_find_anything() -> None:
    """No bias, 12 independent seeds: at most one run with any finding (BH at q = 0.05 over each family)."""
    design = DESIGNS[0]
    prepared = prepare(design.scenario, design.overrides, 20)
    runs = [analyse(prepared, seed=run_seed("test-null", k), planted=design.planted, bias=0.0) for k in range(12)]
    assert all(r.correction.family_size > 0 for r in runs)
    assert sum(bool(r.findings) for r in runs) <= 1


def test_a_large_plant_is_found_where_it_was_planted_in_every_design() -> None:
    """A +0.4 leak bias on one level, 50 items: each design finds its planted contrast in most seeds."""
    for design in DESIGNS:
        prepared = prepare(design.scenario, design.overrides, 50)
        found = 0
        for k in range(3):
            result = analyse(prepared, seed=run_seed(f"test-{design.name}", k), planted=design.planted, bias=0.4)
            found += any(design.target(c) for c in result.findings)
        assert found >= 2, design.name


def test_the_real_pipeline_on_the_unbiased_sim_finds_nothing(tmp_path: Path) -> None:
    """The shipped explicit scenario, narrowed to 20 mathematics items and two dimensions, run by the engine on
    the unbiased sim tutor: the corrected family has no finding, and the report names the family."""
    scenario = engine.load_scenario(
        ROOT / "scenarios" / "fairness.yaml",
        overrides=["items.0.limit=20", "items.0.domains=[mathematics]", "design.dimensions=[immigration, gender]"],
    )
    result = engine.run_sync(scenario, out=tmp_path / "null")
    fairness = result.summary["fairness"]
    assert fairness["correction"]["method"] == "bh" and fairness["correction"]["family_size"] > 0
    assert fairness["findings"] == []
    assert "Family: " in (result.run_dir / "report.md").read_text(encoding="utf-8")
