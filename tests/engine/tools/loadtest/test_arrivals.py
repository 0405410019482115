"""Arrival schedules: absolute offsets, the right rate, reproducible by seed."""

from __future__ import annotations

import itertools
import statistics

from hypothesis import given
from hypothesis import strategies as st

from engine.tools.loadtest._arrivals import arrival_offsets, think_times

rates = st.floats(min_value=0.1, max_value=500, allow_nan=False)


@given(rate=rates, count=st.integers(1, 200))
def test_constant_offsets_are_exact_multiples_of_the_gap(rate: float, count: int) -> None:
    """Offsets are i / rate, computed from the index (never summed), so they cannot drift."""
    offsets = list(itertools.islice(arrival_offsets("constant", rate, seed=0), count))
    assert offsets == [index / rate for index in range(count)]


@given(rate=rates, seed=st.integers(0, 2**32), until=st.floats(min_value=0.01, max_value=5))
def test_poisson_offsets_increase_start_at_zero_and_stop_before_until(rate: float, seed: int, until: float) -> None:
    offsets = list(arrival_offsets("poisson", rate, seed=seed, until_s=until))
    assert offsets[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(offsets))
    assert offsets[-1] < until


@given(seed=st.integers(0, 2**32))
def test_schedules_are_reproducible_by_seed(seed: int) -> None:
    first = list(itertools.islice(arrival_offsets("poisson", 3.0, seed=seed), 50))
    assert first == list(itertools.islice(arrival_offsets("poisson", 3.0, seed=seed), 50))
    assert first != list(itertools.islice(arrival_offsets("poisson", 3.0, seed=seed + 1), 50))


def test_poisson_gaps_have_the_rate_and_spread_of_an_exponential() -> None:
    """Mean gap 1/rate and coefficient of variation 1 (a constant schedule has 0)."""
    offsets = list(itertools.islice(arrival_offsets("poisson", 4.0, seed=7), 20_001))
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    mean = statistics.fmean(gaps)
    assert abs(mean - 0.25) < 0.01
    assert abs(statistics.stdev(gaps) / mean - 1) < 0.03


@given(mean=st.floats(min_value=0, max_value=10), conversation=st.integers(0, 10_000))
def test_think_times_are_per_conversation_streams(mean: float, conversation: int) -> None:
    constant = list(itertools.islice(think_times("constant", mean, seed=1, conversation=conversation), 5))
    assert constant == [mean] * 5
    drawn = list(itertools.islice(think_times("exponential", mean, seed=1, conversation=conversation), 5))
    assert drawn == list(itertools.islice(think_times("exponential", mean, seed=1, conversation=conversation), 5))
    assert all(value >= 0 for value in drawn)
