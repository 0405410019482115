"""How many tutor replies of each fairness dialogue were judged: the unit EduFair's per-turn rates average over,
so a change of the dialogue's budget or opening shows here first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import EpisodeRecord

__all__ = ("judged_replies",)


def _judged(record: EpisodeRecord) -> int:
    counted = record.metrics.get("judged_tutor_turns")
    if isinstance(counted, int) and not isinstance(counted, bool):
        return counted
    return len({j.target for j in record.judgments if isinstance(j.target, int)})  # fairness judges tutor turns only


def judged_replies(records: Sequence[EpisodeRecord]) -> dict[str, Any] | None:
    """Dialogues, and the mean, fewest and most judged tutor replies per dialogue (None without dialogues)."""
    counts = [_judged(r) for r in records]
    if not counts:
        return None
    return {"dialogues": len(counts), "mean": sum(counts) / len(counts), "min": min(counts), "max": max(counts)}
