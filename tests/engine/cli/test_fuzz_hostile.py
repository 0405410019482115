"""A bounded grammar fuzz over every class of hostile input (bench/hostile_input.py holds the grammar and runs
the large version): scenarios, `--set` values, templates and damaged run directories each exit 2 with a message
or are accepted, never escape as a traceback or hang, and no file outside the directories under test changes."""

from __future__ import annotations

import random
import resource

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.hostile_input import CLASSES, HANG_S, Tally, Workspace, run_case

_MAX_PEAK_MB = 2048  # generous: only a runaway allocation trips it (the bench prints the real peak)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("hostile"))


@settings(max_examples=36, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(CLASSES)), rng=st.randoms(use_true_random=False))
def test_every_hostile_input_exits_2_or_is_accepted(workspace: Workspace, name: str, rng: random.Random) -> None:
    before = workspace.sentinel_hash()
    tally = Tally()
    case = CLASSES[name](rng, workspace)
    code, err = run_case(case, tally)
    assert tally.traceback == 0 and tally.hang == 0, (name, tally.failures)
    assert tally.slowest_s < HANG_S
    assert code in (0, 2), (name, case.label, code, err[-500:])
    if code == 2:
        assert "error:" in err, (name, case.label, err[-500:])
    assert workspace.sentinel_hash() == before, f"{name}: {case.label} wrote outside its directory"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < _MAX_PEAK_MB
