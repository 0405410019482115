"""A generic human-label file for `simrun calibrate --source labels`: one JSON object a line.

    {"item": "q-17", "response": "Let's look at the units first…", "dimension": "harm.unsafe",
     "label": true, "annotator": "r1"}

Fields: `item` (an id, or an object `{id, question, answer, domain, data}` giving the judge the problem and its
reference answer), the judged text as `response` (optionally with `history`, earlier `{role, text}` turns) or as
`transcript` (`{role, text}` turns whose last tutor turn is the judged one), `dimension` (`judge.metric`: which
registered judge's metric answers it, e.g. `harm.unsafe`, `turn_quality.mistake_recognize`,
`checklist.criterion_<id>`), `label` (true/false, an integer such as EduFair's 1/0/−1, or a string), `annotator`,
and optionally `group` (who wrote the response, for per-author breakdowns), `condition` (what the judge reads
from the episode condition, e.g. `{"dimension": "epistemic"}` for the harm judge) and `response_id` (default:
the item and the judged text).

Labels are compared as text after one normalisation, applied to the humans' labels and the judge's values alike:
true/false → "1"/"0", integral numbers → their integer, strings stripped. Where several annotators labelled one
response, the reference is their majority label (a tie leaves the response out of that dimension) and their
agreement is reported (Krippendorff's α, pairwise κ for up to five annotators). Options: `ordinal` (dimensions
whose numeric labels form a scale), `limit` (first N responses).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import (
    LABEL_SOURCES,
    Dimension,
    Example,
    Item,
    JudgeAgreement,
    LabelMap,
    LabelSet,
    Reader,
    ScenarioError,
    VotedUnit,
    judge_agreement,
    read_input_bytes,
)

__all__ = ("HumanLabel", "LabelFileOptions", "canonical_label", "read_label_file")

MAX_PAIRWISE_ANNOTATORS = 5


def canonical_label(value: Any) -> str | None:
    """The one text form labels and judge values are compared in (see the module doc); None for no value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value).strip() or None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LabelTurn(_Model):
    role: Literal["tutor", "student"]
    text: str


class LabelItem(_Model):
    id: str
    question: str = ""
    answer: str = ""
    domain: str = "general"
    data: dict[str, Any] = Field(default_factory=dict)


class HumanLabel(_Model):
    item: str | LabelItem
    response: str | None = None
    history: list[LabelTurn] = Field(default_factory=list)
    transcript: list[LabelTurn] | None = None
    dimension: str = Field(pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+$")
    label: bool | int | float | str
    annotator: str = "human"
    group: str = ""
    condition: dict[str, str] = Field(default_factory=dict)
    response_id: str | None = None

    @model_validator(mode="after")
    def _one_text(self) -> HumanLabel:
        if (self.response is None) == (self.transcript is None):
            raise ValueError("give the judged text as exactly one of `response` or `transcript`")
        if self.transcript is not None and not any(t.role == "tutor" for t in self.transcript):
            raise ValueError("a transcript needs a tutor turn to judge")
        return self

    def judged(self) -> tuple[tuple[tuple[Literal["tutor", "student"], str], ...], str]:
        """(history, response): a transcript's last tutor turn is the response, the turns before it the history."""
        if self.transcript is None:
            return tuple((t.role, t.text) for t in self.history), str(self.response)
        last = max(i for i, t in enumerate(self.transcript) if t.role == "tutor")
        return tuple((t.role, t.text) for t in self.transcript[:last]), self.transcript[last].text

    @property
    def item_id(self) -> str:
        return self.item if isinstance(self.item, str) else self.item.id

    def key(self) -> str:
        if self.response_id:
            return self.response_id
        history, response = self.judged()
        digest = hashlib.blake2b(orjson.dumps([history, response]), digest_size=6).hexdigest()
        return f"{self.item_id}:{digest}"


class LabelFileOptions(_Model):
    ordinal: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1)


def _order(labels: set[str]) -> tuple[str, ...]:
    try:
        return tuple(sorted(labels, key=float))
    except ValueError:
        return tuple(sorted(labels))


def read_label_file(path: Path, options: Mapping[str, Any], /) -> LabelSet:
    try:
        chosen = LabelFileOptions.model_validate(dict(options))
    except ValidationError as exc:
        raise ScenarioError(f"labels options: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    lines = read_input_bytes(path, "label file").splitlines()
    records: list[HumanLabel] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(HumanLabel.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{path}:{number}: not JSON ({exc})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "record"
            raise ScenarioError(f"{path}:{number}: {where}: {first['msg']}") from None
    by_response: dict[str, list[HumanLabel]] = {}
    for record in records:
        by_response.setdefault(record.key(), []).append(record)
    keys = list(by_response)[: chosen.limit]
    dimension_labels: dict[str, set[str]] = {}
    for key in keys:
        for record in by_response[key]:
            dimension_labels.setdefault(record.dimension, set()).add(str(canonical_label(record.label)))
    unknown = sorted(set(chosen.ordinal) - set(dimension_labels))
    if unknown:
        raise ScenarioError(f"labels options: ordinal names dimensions not in the file: {', '.join(unknown)}")
    dimensions = tuple(
        Dimension(name, _order(labels), ordinal=name in chosen.ordinal)
        for name, labels in sorted(dimension_labels.items())
    )
    examples = [_example(key, by_response[key]) for key in keys]
    readers: dict[str, dict[str, Reader]] = {}
    for dimension in dimensions:
        judge, _, metric = dimension.name.partition(".")
        readers.setdefault(judge, {})[dimension.name] = LabelMap(
            metric, tuple((label, label) for label in dimension.labels), key=canonical_label
        )
    return LabelSet(
        "labels",
        dimensions,
        tuple(examples),
        readers,
        annotator_agreement=_annotators(keys, by_response),
    )


def _example(key: str, records: list[HumanLabel]) -> Example:
    first = records[0]
    item = first.item
    history, response = first.judged()
    labels: dict[str, str] = {}
    for dimension in dict.fromkeys(r.dimension for r in records):
        votes = Counter(str(canonical_label(r.label)) for r in records if r.dimension == dimension)
        ranked = votes.most_common()
        if len(ranked) == 1 or ranked[0][1] > ranked[1][1]:
            labels[dimension] = ranked[0][0]
    question = item.question if isinstance(item, LabelItem) else ""
    if not question:
        question = next((text for role, text in history if role == "student"), "")
    return Example(
        id=key,
        item=Item(
            id=first.item_id,
            domain=item.domain if isinstance(item, LabelItem) else "general",
            question=question,
            answer=item.answer if isinstance(item, LabelItem) else "",
            data=dict(item.data) if isinstance(item, LabelItem) else {},
        ),
        history=history,
        response=response,
        labels=labels,
        group=first.group,
        condition=dict(first.condition),
    )


def _annotators(keys: list[str], by_response: Mapping[str, list[HumanLabel]]) -> JudgeAgreement | None:
    annotators = sorted({r.annotator for key in keys for r in by_response[key]})
    if len(annotators) < 2:
        return None
    position = {name: i for i, name in enumerate(annotators)}
    units: list[VotedUnit] = []
    for key in keys:
        for dimension in dict.fromkeys(r.dimension for r in by_response[key]):
            votes: list[str | None] = [None] * len(annotators)
            for record in by_response[key]:
                if record.dimension == dimension and votes[position[record.annotator]] is None:
                    votes[position[record.annotator]] = canonical_label(record.label)
            units.append(VotedUnit(by_response[key][0].item_id, dimension, tuple(votes)))
    return judge_agreement(units, annotators, seed=0, pairwise=len(annotators) <= MAX_PAIRWISE_ANNOTATORS)


LABEL_SOURCES.add("labels", read_label_file)
