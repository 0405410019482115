"""ReMath Fig. 15: which strategy the tutor pairs with which intention in Task B, beside the expert's pairs.

A model that names a plausible strategy but the wrong reason for it shows here where a per-label match cannot:
the paper compares each model's strategy × intention counts with the teachers'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from engine import Block, EpisodeRecord, Heatmap, Note, Section, Table

from .remath_model import Pairing

__all__ = ("pairing_blocks", "pairings")

WHO = (("tutor", "pred"), ("expert", "gold"))


def pairings(records: Sequence[EpisodeRecord]) -> list[Pairing]:
    """Counts of (strategy, intention) pairs per source ("tutor": the Task B answers, "expert": the gold)."""
    rows: list[Pairing] = []
    for who, suffix in WHO:
        found: Counter[tuple[str, str]] = Counter()
        for r in records:
            if r.condition.get("task") != "strategy":
                continue
            strategy, intention = r.metrics.get(f"strategy_{suffix}"), r.metrics.get(f"intention_{suffix}")
            if isinstance(strategy, str) and isinstance(intention, str):
                found[(strategy, intention)] += 1
        rows += [Pairing(who=who, strategy=s, intention=i, count=n) for (s, i), n in sorted(found.items())]
    return rows


def _heatmap(who: str, rows: Sequence[Pairing], strategies: list[str], intentions: list[str]) -> Heatmap:
    counts = {(r.strategy, r.intention): r.count for r in rows if r.who == who}
    values = tuple(tuple(float(counts.get((s, i), 0)) for i in intentions) for s in strategies)
    table = Table(
        ("strategy ↓ / intention →", *intentions),
        tuple((s, *(counts.get((s, i), 0) for i in intentions)) for s in strategies),
        caption=f"{who}: Task B answers per strategy × intention pair",
        key=f"remath-pairs-{who}",
        console_columns=(),
    )
    return Heatmap(
        tuple(strategies),
        tuple(intentions),
        values,
        (table,),
        key=f"remath-pairs-{who}",
        caption=f"Strategy × intention pairs chosen by the {who} (ReMath Fig. 15)",
        xlabel="intention",
        ylabel="strategy",
        colorbar="answers",
    )


def pairing_blocks(rows: Sequence[Pairing]) -> list[Block]:
    """A heatmap per source, on shared axes (the labels that occur in either)."""
    if not rows:
        return []
    strategies = sorted({r.strategy for r in rows})
    intentions = sorted({r.intention for r in rows})
    note = Note(
        "Counts of the strategy and intention named together in each Task B answer: the tutor's, then the expert's."
    )
    maps = [_heatmap(who, rows, strategies, intentions) for who, _ in WHO if any(r.who == who for r in rows)]
    title = "Task B: strategy–intention pairings (the paper's Fig. 15)"
    return [Section(title, (note, *maps), key="remath-pairings", provenance="ReMath Fig. 15")]
