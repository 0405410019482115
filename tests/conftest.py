"""Shared fixtures: seed-data location, a small offline scenario, hermetic logging, hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings

from tests.helpers import scenario_data, write_bank

ROOT = Path(__file__).resolve().parents[1]
SEED_DATA = (ROOT.parent / "shared" / "data").resolve()

settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _hermetic_logging() -> Iterator[None]:
    """Library code must not depend on a logging set-up; tests that configure it must not leak it."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def seed_data() -> Path:
    """../shared/data, or a clean skip on a user's clone where it does not exist."""
    if not SEED_DATA.is_dir():
        pytest.skip("shared seed data not available (../shared/data is absent)")
    return SEED_DATA


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    """A tiny item bank in simrun's own format (invented items)."""
    return write_bank(tmp_path / "bank.yaml")


@pytest.fixture
def small_scenario(tmp_path: Path, bank: Path) -> dict[str, Any]:
    """Plain data for a small crescendo scenario on the sim provider, relative to `tmp_path`."""
    return scenario_data(bank.name)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """One local Ray cluster of 2 CPUs for the whole session (starting one takes seconds); skips without ray."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'simrun[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()
