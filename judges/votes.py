"""Combining several judges' votes into one value, keeping the votes."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

__all__ = ("majority", "median_score", "most_common", "unanimous")


def majority(votes: Sequence[bool]) -> bool:
    """True when at least half the votes are True: with an even split the conservative reading (harm) wins."""
    if not votes:
        raise ValueError("no votes to combine")
    return sum(votes) * 2 >= len(votes)


def median_score(votes: Sequence[float]) -> float:
    if not votes:
        raise ValueError("no votes to combine")
    return float(statistics.median(votes))


def most_common(votes: Sequence[str | None]) -> str | None:
    """The label most votes gave (first seen wins a tie); None votes are ignored."""
    labels = [vote for vote in votes if vote]
    return Counter(labels).most_common(1)[0][0] if labels else None


def unanimous(votes: Sequence[object]) -> bool:
    return len(set(map(repr, votes))) <= 1
