"""The fairness report's sections on how the run went rather than on bias: judged tutor replies per dialogue,
why dialogues stopped, and the audit of the simulated student (a biased student can fake tutor bias)."""

from __future__ import annotations

from collections.abc import Mapping

from engine import SIMRUN_ADDITION, Block, Note, Section, Table, format_fixed, format_pct

from .fairness_model import FairnessResults, JudgedReplies
from .fairness_text import audit_label
from .student_audit import AUDIT_METRICS

__all__ = ("audit", "judged_replies", "stop_reasons")


def audit(data: FairnessResults) -> Section:
    table = Table(
        ("channel", "dimension", "level", "dialogues", *(audit_label(f) for f in AUDIT_METRICS)),
        tuple(
            (row.channel, row.dimension, row.level, row.dialogues)
            + tuple(None if (share := row.share(f)) is None else format_pct(share) for f in AUDIT_METRICS)
            for row in data.audit
        ),
        key="audit",
        console_columns=(),
    )
    note = Note("Share of dialogues where a detector flagged the student (a biased student can fake tutor bias).")
    return Section("Simulated-student audit", (note, table), key="audit", provenance=SIMRUN_ADDITION)


def stop_reasons(reasons: Mapping[str, Mapping[str, int]]) -> Section:
    names = sorted({reason for counts in reasons.values() for reason in counts})
    table = Table(
        ("condition", *names),
        tuple((condition, *(counts.get(r, 0) for r in names)) for condition, counts in reasons.items()),
        key="stop-reasons",
        console_columns=(),
    )
    return Section("Why dialogues stopped", (table,), key="stop-reasons", provenance=SIMRUN_ADDITION)


def judged_replies(replies: JudgedReplies | None) -> list[Block]:
    if replies is None:
        return []
    table = Table(
        ("dialogues", "mean", "fewest", "most", "unjudged replies"),
        ((replies.dialogues, format_fixed(replies.mean), replies.min, replies.max, replies.unjudged),),
        title="Judged tutor replies per dialogue",
        key="judged-replies",
    )
    note = Note(
        "Tutor replies a judge scored per dialogue: the turns EduFair's per-dialogue rates average over. The tutor's "
        "opening counts when the tutor model wrote it; the cap follows the student's `max_turns` and `counts`."
    )
    origin = "EduFair §3.2 (the dialogue's turn cap) and §3.3 (per-turn judging), counted by simrun"
    return [Section("Judged tutor replies per dialogue", (note, table), key="judged-replies", provenance=origin)]
