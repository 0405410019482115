"""What judge calibration reads: a *label source* turns a human-labelled file into a `LabelSet`.

A label source (registry `LABEL_SOURCES`, e.g. `mrbench`, `bridge`) reads examples (a dialogue history, the tutor
response that humans labelled, and their label per dimension), the dimensions with their label order (ordinal or
not, and a lenient collapse such as BEA 2025's "Yes + To some extent"), and *readers* that turn a registered
judge's judgments into a label of a dimension. Judges and label sources are resolved by name, so the engine
imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from engine.core._records import Judgment
from engine.core._registry import Registry
from engine.scenario._intake import Intake
from engine.scenario._items import Item
from engine.stats._agreement import JudgeAgreement

__all__ = (
    "LABEL_SOURCES",
    "CalibrationResult",
    "Dimension",
    "Example",
    "LabelMap",
    "LabelSet",
    "LabelSource",
    "Reader",
)

Reader = Callable[[Sequence[Judgment]], str | None]
"""Reads one dimension's label from a judge's judgments on one example (None: the judge gave no verdict)."""


@dataclass(frozen=True)
class LabelMap:
    """A documented reader: which judge metric answers a dimension, and how its values become the dataset's labels.

    `values` pairs each judge value (after `key`, e.g. "rate > 0") with a dataset label; a value mapped to None,
    or not listed, is no verdict and the unit is dropped. `proxy` says why the metric is not the dataset's own
    question (None: it is); reports mark such rows. With `passthrough`, a string value is the label itself.
    """

    metric: str
    values: tuple[tuple[Any, str | None], ...] = ()
    proxy: str | None = None
    key: Callable[[Any], Any] | None = None
    key_text: str | None = None
    """How `key` reads the value, for the documented table (e.g. "tutor_question_rate > 0")."""
    passthrough: bool = False

    def __call__(self, judgments: Sequence[Judgment], /) -> str | None:
        value = next((j.value for j in judgments if j.metric == self.metric), None)
        if value is None:
            return None
        if self.passthrough:
            return value if isinstance(value, str) else None
        if self.key is not None:
            value = self.key(value)
        for judge_value, label in self.values:
            if type(judge_value) is type(value) and judge_value == value:
                return label
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "metric": self.key_text or self.metric,
            "values": "label as given" if self.passthrough else [[v, label] for v, label in self.values],
            "proxy": self.proxy,
        }


@dataclass(frozen=True)
class Dimension:
    name: str
    labels: tuple[str, ...]
    """Every label, lowest first when `ordinal`."""
    ordinal: bool = False
    lenient: Mapping[str, str] | None = None
    """Collapse for the lenient view (e.g. "To some extent" → "Yes"); None: no lenient view."""


@dataclass(frozen=True)
class Example:
    id: str
    item: Item
    """What a judge may read besides the dialogue: the problem and its reference answer (may be empty)."""
    history: tuple[tuple[Literal["tutor", "student"], str], ...]
    response: str
    labels: Mapping[str, str]
    """Human label per dimension (a dimension may be missing)."""
    group: str = ""
    """Who wrote the response (e.g. the MRBench tutor), for breakdowns."""
    condition: Mapping[str, str] = field(default_factory=dict)
    """The episode condition a judge reads (e.g. the SafeTutors risk dimension for `harm`)."""


@dataclass(frozen=True)
class LabelSet:
    name: str
    dimensions: tuple[Dimension, ...]
    examples: tuple[Example, ...]
    readers: Mapping[str, Mapping[str, Reader]]
    """Judge name → dimension → reader: which of a judge's metrics answer which dimension."""
    annotator_agreement: JudgeAgreement | None = None
    """Agreement between the human annotators, where several labelled one item (generic label files)."""
    intake: Intake | None = None
    """What the source read, kept and skipped (with why), printed when it skipped something."""


class LabelSource(Protocol):
    """Reads a human-labelled file; bad input raises `ScenarioError`. `options` are the source's own."""

    def __call__(self, path: Path, options: Mapping[str, Any], /) -> LabelSet: ...


LABEL_SOURCES: Registry[LabelSource] = Registry("label source", "label_sources")


@dataclass
class CalibrationResult:
    label_set: str
    examples: int
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Judge name → {"errors": n, "models": [...], "dimensions": [row, ...]}."""
    duration_s: float = 0.0
    calls: dict[str, Any] = field(default_factory=dict)
    human_rates: dict[str, Any] = field(default_factory=dict)
    """Dimension → group (e.g. MRBench tutor) → {n, shares}: the human labels as the data has them."""
    annotator_agreement: JudgeAgreement | None = None

    @property
    def errors(self) -> int:
        return sum(int(data["errors"]) for data in self.judges.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "label_set": self.label_set,
            "examples": self.examples,
            "judges": self.judges,
            "duration_s": self.duration_s,
            "calls": self.calls,
            "human_rates": self.human_rates,
            "annotator_agreement": None
            if self.annotator_agreement is None
            else self.annotator_agreement.model_dump(mode="json"),
        }
