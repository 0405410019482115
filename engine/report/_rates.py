"""`engine.stats` rates and `engine.paired` contrasts as they appear in a typed summary: what their
`as_dict()` writes to summary.json, key for key, so kinds type them once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ("SUMMARY_CONFIG", "ClusteredRateSummary", "ContrastSummary", "RateSummary")

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


class ContrastSummary(BaseModel):
    """A paired contrast (`engine.paired.Contrast.as_dict()`); `correct_family` adds `p_family` after it."""

    model_config = SUMMARY_CONFIG
    a: str
    b: str
    n: int
    status: str
    r: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    p_adjusted: float | None
    mean_diff: float | None
    meaningful: bool
    violation: bool
    estimate: float | None = None
    """Hodges–Lehmann estimate of a − b, the signed-rank test's own location (`engine.stats.hodges_lehmann`)."""
    differing: int = 0
    ci_method: str | None = None
    degenerate: bool = False
    direction_disagrees: bool = False
