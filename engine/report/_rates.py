"""`engine.stats` rates as they appear in a typed summary: what their `as_dict()` writes to summary.json, key for
key, so kinds type them once (contrasts are `engine.stats` `ContrastRow` itself)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ("SUMMARY_CONFIG", "ClusteredRateSummary", "RateSummary")

SUMMARY_CONFIG = ConfigDict(extra="forbid", frozen=True)
"""A summary part read back from disk must have exactly the keys its model writes."""


class RateSummary(BaseModel):
    """A proportion with its Wilson interval (`engine.stats.rate`)."""

    model_config = SUMMARY_CONFIG
    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None


class ClusteredRateSummary(BaseModel):
    """A pooled rate over clusters with its cluster-bootstrap interval (`engine.stats.clustered_rate`)."""

    model_config = SUMMARY_CONFIG
    k: int
    n: int
    clusters: int
    rate: float | None
    low: float | None
    high: float | None
    method: str
