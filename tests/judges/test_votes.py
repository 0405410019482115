"""judges.votes: combining several judges' votes into one value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judges.votes import majority, median_score, most_common, unanimous


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([True], True),
        ([False], False),
        ([True, True, False], True),
        ([True, False, False], False),
        ([False, False, False, False, True], False),
        ([True, True, True, False, False], True),
    ],
)
def test_majority_odd_counts(votes: list[bool], expected: bool) -> None:
    """With an odd number of votes the larger side wins."""
    assert majority(votes) is expected


@pytest.mark.parametrize(
    "votes", [[True, False], [False, True], [True, True, False, False], [False, True, False, True]]
)
def test_majority_even_tie_is_true(votes: list[bool]) -> None:
    """An even split is read conservatively: True (harm) wins the tie."""
    assert majority(votes) is True


def test_majority_even_without_tie() -> None:
    """An even number of votes without a tie follows the larger side."""
    assert majority([False, False, True, False]) is False
    assert majority([True, True, True, False]) is True


def test_majority_of_no_votes_raises() -> None:
    """Combining no votes is an error, not a silent False."""
    with pytest.raises(ValueError, match="no votes"):
        majority([])


@pytest.mark.parametrize(
    ("votes", "expected"),
    [([3], 3.0), ([1, 5, 2], 2.0), ([4, 2, 5, 1], 3.0), ([2, 3], 2.5), ([5, 5, 1], 5.0)],
)
def test_median_score(votes: list[float], expected: float) -> None:
    """median_score is the median as a float (the mean of the middle two for an even count)."""
    found = median_score(votes)
    assert isinstance(found, float)
    assert found == expected


def test_median_score_of_no_votes_raises() -> None:
    """A median of no votes is an error."""
    with pytest.raises(ValueError, match="no votes"):
        median_score([])


def test_most_common_picks_the_most_frequent_label() -> None:
    """The label given by most votes wins."""
    assert most_common(["a", "b", "b"]) == "b"


def test_most_common_ignores_none() -> None:
    """None votes are ignored, even when they are the majority."""
    assert most_common([None, None, "x"]) == "x"
    assert most_common([None, "y", None, "x", "y"]) == "y"


def test_most_common_only_none_is_none() -> None:
    """With no labels at all (only None, or no votes) the result is None."""
    assert most_common([None, None]) is None
    assert most_common([]) is None


def test_most_common_tie_goes_to_first_seen() -> None:
    """In a tie, the label seen first wins."""
    assert most_common(["b", "a", "a", "b"]) == "b"
    assert most_common([None, "a", "b"]) == "a"
    assert most_common(["c", "d"]) == "c"


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([], True),
        ([True], True),
        ([True, True, True], True),
        ([False, False], True),
        ([None, None], True),
        (["a", "a"], True),
        ([True, False, True], False),
        (["a", "b"], False),
        ([None, "a"], False),
        ([3, 3, 4], False),
    ],
)
def test_unanimous(votes: list[object], expected: bool) -> None:
    """unanimous is True exactly when every vote is the same (trivially for zero or one vote)."""
    assert unanimous(votes) is expected


@given(st.lists(st.booleans(), min_size=1, max_size=50))
def test_majority_is_at_least_half_true(votes: list[bool]) -> None:
    """majority(votes) equals (number of True votes ≥ half of the votes)."""
    assert majority(votes) == (votes.count(True) >= len(votes) / 2)


@given(st.lists(st.booleans(), min_size=1, max_size=50).flatmap(lambda v: st.tuples(st.just(v), st.permutations(v))))
def test_majority_ignores_vote_order(pair: tuple[list[bool], list[bool]]) -> None:
    """A list of votes and any permutation of it combine to the same majority."""
    votes, shuffled = pair
    assert majority(votes) == majority(shuffled)


@given(st.lists(st.booleans(), min_size=1, max_size=20))
def test_unanimous_booleans_means_one_distinct_value(votes: list[bool]) -> None:
    """For booleans, unanimous means all True or all False."""
    assert unanimous(votes) == (all(votes) or not any(votes))
