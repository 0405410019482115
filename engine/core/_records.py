"""The episode record: one JSON line per finished episode, the single source of truth of a run.

Fields may be added freely; renaming or dropping one needs a bump of `RECORD_VERSION`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("RECORD_VERSION", "EpisodeRecord", "ErrorInfo", "Judgment", "Turn", "Usage")

RECORD_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class Usage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Turn(_Record):
    index: int
    role: Literal["tutor", "student"]
    text: str
    visible_to_tutor: bool = True
    """False for a backtracked exchange: kept in the record, hidden from the tutor from then on."""
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0


class Judgment(_Record):
    judge: str
    metric: str
    target: int | Literal["conversation"]
    """The judged turn's index, or the whole conversation."""
    value: bool | float | int | str | None
    votes: list[Any] = Field(default_factory=list)
    rationale: str | None = None


class ErrorInfo(_Record):
    type: str
    message: str


class EpisodeRecord(_Record):
    record_version: int = RECORD_VERSION
    id: str
    scenario: str
    scenario_hash: str | None = None
    """The hash of the scenario that wrote it, so a reader can refuse records from another run's plan."""
    item_id: str
    condition: dict[str, str]
    replicate: int
    seed: int
    tutor: str | None = None
    """The tutor's label in a study of several tutors; absent from the line of a one-tutor run."""
    status: Literal["ok", "error"]
    error: ErrorInfo | None = None
    turns: list[Turn] = Field(default_factory=list)
    judgments: list[Judgment] = Field(default_factory=list)
    metrics: dict[str, float | int | bool | str | None] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    """Per-episode facts a summariser needs (domain, target sub-risk, backtracks, ...)."""
    usage: Usage = Field(default_factory=Usage)
    started_at: str
    finished_at: str

    def judgment(self, metric: str, target: int | str) -> Judgment | None:
        for judgment in self.judgments:
            if judgment.metric == metric and judgment.target == target:
                return judgment
        return None
