"""TutorCaseBench's case-recovery rate (its §5 and App. P): how case-specific a tutor's open responses are.

The paper takes each response's nearest response from another model (by embedding) and counts it recovered when
that neighbour answers the same case. A run has one tutor, so here the neighbour is the nearest other response of
the same response type in the run (TF-IDF cosine, offline), and it must come from another episode: recovered when
it answers the same case under another condition (with or without references, a replicate). The chance rate is
the share of candidates from the same case: what a neighbour drawn at random would score.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from engine import EpisodeRecord, rate

from .cases_model import RecoveryRow

__all__ = ("case_recovery",)


def _row(response: str, cases: Sequence[str], texts: Sequence[str]) -> RecoveryRow | None:
    import numpy as np  # loaded when a report is summarised, not when the plug-ins are

    from personas.case_retrieval import tfidf_similarity

    same = np.array([[a == b for b in cases] for a in cases])
    if len(cases) < 3 or same.sum() == len(cases):  # no case has a second response: nothing to recover
        return None
    similarity = tfidf_similarity(texts)
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.argmax(axis=1)
    recovered = sum(bool(cases[i] == cases[j]) for i, j in enumerate(nearest))
    chance = float((same.sum() - len(cases)) / (len(cases) * (len(cases) - 1)))
    return RecoveryRow(response=response, chance=chance, **dict(rate(recovered, len(cases))))


def case_recovery(records: Sequence[EpisodeRecord], text_of: Callable[[EpisodeRecord], str]) -> list[RecoveryRow]:
    """Per response type: responses, recovered, their rate with a Wilson interval, and the chance rate."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for record in records:
        text = text_of(record)
        if text:
            groups[str(record.metrics.get("response"))].append((record.item_id, text))
    rows = [_row(response, [c for c, _ in found], [t for _, t in found]) for response, found in sorted(groups.items())]
    return [row for row in rows if row is not None]
