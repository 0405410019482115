"""Shared fixtures: seed-data location, a small offline scenario, hermetic logging, hypothesis profiles."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Generator, Iterator
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Keep the call phase's outcome on the item, for `_collect_what_a_failure_left_open`."""
    outcome = yield
    if call.when == "call":
        item.stash[_FAILED] = outcome.get_result().failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _collect_what_a_failure_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that fails mid-way may leave a socket or transport open. Under `filterwarnings = error` its
    ResourceWarning would be raised when the garbage collector finds it, in whichever later test is running,
    and fail that test too (tests/test_conftest.py). After a failure, free it here, where the warning is noise."""
    yield
    if request.node.stash.get(_FAILED, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            for name in ("last_type", "last_value", "last_traceback", "last_exc"):  # pytest keeps the failed
                if hasattr(sys, name):  # test's frames here until the next test runs: free them now
                    delattr(sys, name)
            gc.collect()


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
