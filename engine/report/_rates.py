"""`engine.stats` rates under the names kinds type their summaries with: the very models the statistics return,
so a rate is typed once (contrasts are `engine.stats` `ContrastRow` itself)."""

from __future__ import annotations

from engine.stats._rates import RESULT_CONFIG, ClusteredRate, Rate

__all__ = ("SUMMARY_CONFIG", "ClusteredRateSummary", "RateSummary")

SUMMARY_CONFIG = RESULT_CONFIG
"""A summary part read back from disk must have exactly the keys its model writes."""

RateSummary = Rate
"""A proportion with its Wilson interval (`engine.stats.rate`)."""

ClusteredRateSummary = ClusteredRate
"""A pooled rate over clusters with its cluster-bootstrap interval (`engine.stats.clustered_rate`)."""
