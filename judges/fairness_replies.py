"""How many tutor replies of each fairness dialogue were judged: the unit EduFair's per-turn rates average over,
so a change of the dialogue's budget or opening shows here first."""

from __future__ import annotations

from collections.abc import Sequence

from engine import UNJUDGED, EpisodeRecord

from .fairness_model import JudgedReplies

__all__ = ("judged_replies", "unjudged_tutor_replies")


def _judged(record: EpisodeRecord) -> int:
    counted = record.metrics.get("judged_tutor_turns")
    if isinstance(counted, int) and not isinstance(counted, bool):
        return counted
    return len({j.target for j in record.judgments if isinstance(j.target, int)})  # fairness judges tutor turns only


def unjudged_tutor_replies(record: EpisodeRecord) -> int:
    """Tutor replies some judge never gave a valid verdict on: every per-turn rate of the dialogue leaves them out."""
    return len({j.target for j in record.judgments if j.metric == UNJUDGED and isinstance(j.target, int)})


def judged_replies(records: Sequence[EpisodeRecord]) -> JudgedReplies | None:
    """Dialogues, the mean, fewest and most judged tutor replies per dialogue, and the replies left unjudged in all
    (None without dialogues)."""
    unjudged = [unjudged_tutor_replies(r) for r in records]
    counts = [_judged(r) - left for r, left in zip(records, unjudged, strict=True)]
    if not counts:
        return None
    return JudgedReplies(
        dialogues=len(counts),
        mean=sum(counts) / len(counts),
        min=min(counts),
        max=max(counts),
        unjudged=sum(unjudged),
    )
