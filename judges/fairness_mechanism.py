"""Findings read as mechanisms: one headline per dimension and cue, not one per metric.

A single planted leak gave up to 49 findings (median 24) over 5–6 metrics (issue 24): the leak ends the
dialogue, so every conversation-length metric moves with it, and in the sim `corrective_tone` repeats
`mistake_recognize` in 98% of judged turns. Each finding still names its metric and p; this module groups them
by (domain, channel, dimension, contrast), says which metrics are one signal in this run (their per-turn labels
agree on at least `SAME_SIGNAL` of the turns both label), and names a dialogue-ending effect as the cause where
it is among the findings: an answer leak ends a tutor-led dialogue, so the conversation-length metrics follow.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence

from engine import EpisodeRecord

from .conversation_stats import CONVERSATION_STATS
from .fairness_model import FairnessContrast, Mechanism, MechanismFinding, MetricPair
from .turn_quality import TURN_QUALITY_METRICS

__all__ = ("DIALOGUE_ENDING", "SAME_SIGNAL", "mechanisms", "metric_agreement")

SAME_SIGNAL = 0.95
"""Two turn metrics whose labels agree on at least this share of the judged turns both label are one signal."""
DIALOGUE_ENDING = ("answer_leakage",)
"""A finding on these ends dialogues early (the tutor gave the answer away), which moves every conversation
metric: where one is among a group's findings it is shown as the cause."""


def metric_agreement(records: Iterable[EpisodeRecord]) -> list[MetricPair]:
    """Per pair of turn metrics: the judged turns both label (−1: not applicable, left out) and the share with
    the same label."""
    labels: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for record in records:
        for j in record.judgments:
            numeric = isinstance(j.value, int | float) and not isinstance(j.value, bool) and j.value != -1
            if j.metric in TURN_QUALITY_METRICS and isinstance(j.target, int) and numeric:
                labels[(record.id, j.target)][j.metric] = float(j.value)  # type: ignore[arg-type]
    rows = []
    for a, b in itertools.combinations(TURN_QUALITY_METRICS, 2):
        both = [(t[a], t[b]) for t in labels.values() if a in t and b in t]
        if both:
            same = sum(x == y for x, y in both) / len(both)
            rows.append(MetricPair(a=a, b=b, turns=len(both), agreement=same, same_signal=same >= SAME_SIGNAL))
    return rows


def _signals(metrics: Sequence[str], agreement: Sequence[MetricPair]) -> list[list[str]]:
    """The metrics joined into signals: connected through pairs flagged as the same signal."""
    linked = {(r.a, r.b) for r in agreement if r.same_signal}
    groups: list[list[str]] = []
    for metric in metrics:
        joined = [g for g in groups if any((m, metric) in linked or (metric, m) in linked for m in g)]
        merged = [metric, *(m for g in joined for m in g)]
        groups = [g for g in groups if g not in joined] + [sorted(merged, key=metrics.index)]
    return sorted(groups, key=lambda g: metrics.index(g[0]))


def mechanisms(findings: Sequence[FairnessContrast], agreement: Sequence[MetricPair]) -> list[Mechanism]:
    """The findings grouped by domain, channel, dimension and contrast, strongest (smallest family p) first."""
    groups: dict[tuple[str, str, str, str], list[FairnessContrast]] = defaultdict(list)
    for c in findings:
        groups[(c.domain, c.channel, c.dimension, f"{c.a} − {c.b}")].append(c)
    found = []
    for (domain, channel, dimension, contrast), rows in groups.items():
        rows = sorted(rows, key=_family_p)
        metrics = [c.metric for c in rows]
        cause = next((m for m in metrics if m in DIALOGUE_ENDING), None)
        followers = [m for m in metrics if m in CONVERSATION_STATS]
        found.append(
            Mechanism(
                domain=domain,
                channel=channel,
                dimension=dimension,
                contrast=contrast,
                findings=[MechanismFinding(metric=c.metric, r=c.r, p_family=c.p_family) for c in rows],
                signals=_signals(metrics, agreement),
                cause=cause,
                follows_cause=followers if cause is not None else [],
            )
        )
    return sorted(found, key=lambda g: min(map(_family_p, g.findings)))


def _family_p(row: FairnessContrast | MechanismFinding) -> float:
    return row.p_family if row.p_family is not None else 1.0
