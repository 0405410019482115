"""What an item source read, kept and skipped, and why: a loader that drops records says so.

A loader returns `CountedItems` (a list of items that carries its `Intake`); the engine prints the intake of
every source that skipped something and records every source's intake in the run's manifest. A loader that
returns a plain list is recorded as having kept what it returned, its reads uncounted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.scenario._items import Item

__all__ = ("CountedItems", "Intake", "intake_of")


@dataclass
class Intake:
    """Counts of one item source: records read, items kept, records skipped by reason."""

    source: str = ""
    path: str = ""
    read: int | None = 0
    skipped: dict[str, int] = field(default_factory=dict)
    kept: int = 0

    def skip(self, reason: str, count: int = 1) -> None:
        """Count `count` records left out for `reason` (a short phrase: "empty last student turn")."""
        if count > 0:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def line(self) -> str:
        """`bridge test.json: read 210, kept 208, skipped 2 (empty last student turn 2)`."""
        read = "uncounted" if self.read is None else str(self.read)
        text = f"{self.source} {self.path}: read {read}, kept {self.kept}"
        if self.skipped:
            reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.skipped.items()))
            text += f", skipped {self.skipped_total} ({reasons})"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "path": self.path,
            "read": self.read,
            "kept": self.kept,
            "skipped": dict(sorted(self.skipped.items())),
        }


class CountedItems(list["Item"]):
    """The items a source kept, with its intake (`kept` is set from the list)."""

    def __init__(self, items: Iterable[Item], intake: Intake) -> None:
        super().__init__(items)
        intake.kept = len(self)
        self.intake = intake


def intake_of(found: list[Item], source: str, path: str) -> Intake:
    """What a loader's result says it read, kept and skipped; a plain list is counted as kept, its reads unknown."""
    intake = found.intake if isinstance(found, CountedItems) else Intake(read=None, kept=len(found))
    intake.source, intake.path = source, path
    return intake
