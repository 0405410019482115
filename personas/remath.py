"""ReMath mistake items as data: the label sets, simrun's own item file, and a reader for the Bridge JSON layout.

A mistake item is a lesson topic and a short dialogue history whose last turn is a student's mistake, with an
expert's labels for it — the error type (Task A), the strategy and its intention (Task B) — and the expert's
response (Task C's reference). Labels follow ReMath (Wang et al., NAACL 2024): the error types keep the
paper's spellings; strategies and intentions use the Bridge release's keys with the paper's wording as names.

Two item sources are registered:

* `remath` — simrun's YAML (`personas/remath_items.yaml` is the built-in set, in the team's own words):
  `items: [{id, topic, history: [{role: tutor|student, text}], error, strategy, intention, reference,
  novice?, answer?, second?: {error, strategy, intention}}]` — `second`, a second teacher's labels, makes
  the item doubly labelled like Bridge's repeated snippets (below).
* `bridge` — the public Bridge/ReMath JSON files (`train.json`, `validation.json`, `test.json`: a list of
  `{c_id, lesson_topic, c_h, c_r, c_r_, e, z_what, z_why, ...}`). `c_id` repeats within and across splits, so
  items are keyed by file stem and position. Labels outside the vocabulary are free text and become `N/A`
  (error) or `other` (strategy, intention); the raw label stays in `item.data["raw"]`.
  The release labels some snippets twice: the same `c_id` and history, in the same or another split, with
  another teacher's labels and reply. The loader reads the sibling splits of the folder (`train`, `validation`,
  `test`) to find them: `item.data["snippet"]` names the snippet, `annotations` lists every labelling of it
  (in split order, then position) and `annotator` is this record's place in that list — the material for
  human–human agreement (`double_labelled`).

Every item becomes an `engine.Item` whose `data` holds `topic`, `history`, `error`, `strategy`, `intention`,
`reference`, `novice` (may be "") and `source_id`; `question` is the student's mistaken message.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, ValidationInfo, field_validator

from engine import ITEM_SOURCES, CountedItems, Intake, Item, ScenarioError, load_yaml_file, read_input_bytes

__all__ = (
    "BUILTIN_ITEMS",
    "ERROR_TYPES",
    "INTENTIONS",
    "Labels",
    "STRATEGIES",
    "BridgeSource",
    "MistakeItem",
    "RemathSource",
    "Turn",
    "BRIDGE_SPLITS",
    "bridge_items",
    "double_labelled",
    "snippet_key",
    "load_mistake_items",
    "normalise_error",
    "normalise_intention",
    "normalise_strategy",
    "to_item",
)

BUILTIN_ITEMS = Path(__file__).with_name("remath_items.yaml")

ERROR_TYPES: dict[str, str] = {
    "guess": "The student does not seem to understand, or guessed the answer.",
    "misinterpret": "The student misinterpreted the question.",
    "careless": "The student made a careless mistake.",
    "right-idea": "The student has the right idea, but is not quite there.",
    "imprecise": "The student's answer is not precise enough, or the tutor is too picky about its form.",
    "not-sure": "Not sure why the student made the mistake; the tutor should diagnose it.",
    "N/A": "None of the above; a different description fits.",
}
"""Task A's error types, the paper's spellings, in the paper's order."""

STRATEGIES: dict[str, str] = {
    "explain_concept": "Explain a concept",
    "ask_question": "Ask a question",
    "provide_hint": "Provide a hint",
    "provide_strategy": "Provide a strategy",
    "provide_example": "Provide a worked example",
    "provide_correction": "Provide a minor correction",
    "provide_similar_problem": "Provide a similar problem",
    "simplify_question": "Simplify the question",
    "affirm_correct_answer": "Affirm the correct answer",
    "encourage_student": "Encourage the student",
    "other": "Other",
}
"""Task B's strategies: key (as in the Bridge release) → the paper's name."""

INTENTIONS: dict[str, str] = {
    "motivate_student": "Motivate the student",
    "elaborate_answer": "Get the student to elaborate their answer",
    "correct_mistake": "Correct the student's mistake",
    "hint_mistake": "Hint at the student's mistake",
    "clarify_misunderstanding": "Clarify a student's misunderstanding",
    "understand_topic": "Help the student understand the lesson topic or solution strategy",
    "diagnose_mistake": "Diagnose the student's mistake",
    "support_thinking": "Support the student in their thinking or problem-solving",
    "explain_mistake": "Explain the student's mistake (what is wrong in their answer or why it is incorrect)",
    "signal_goal": "Signal to the student that they have solved or not solved the problem",
    "other": "Other",
}
"""Task B's intentions: key (as in the Bridge release) → the paper's name."""

_ERROR_ALIASES = {"diagnose": "not-sure", "not sure": "not-sure", "notsure": "not-sure", "right idea": "right-idea"}
_NA = frozenset({"n/a", "na", "none", "other", "n.a."})


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).strip().lower().replace("’", "'")
    return re.sub(r"\s+", " ", text)


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", _fold(text)).strip("_")


def normalise_error(raw: str) -> str:
    """An error label in the paper's spelling; anything outside the set (free text, "no mistake") is `N/A`."""
    folded = _fold(raw)
    for label in ERROR_TYPES:
        if folded == label.lower():
            return label
    if folded in _ERROR_ALIASES:
        return _ERROR_ALIASES[folded]
    if folded.replace("_", "-") in ERROR_TYPES:
        return folded.replace("_", "-")
    return "N/A"


def _normalise(raw: str, labels: Mapping[str, str]) -> str:
    key = _key(raw)
    if key in labels:
        return key
    by_name = {_key(name): k for k, name in labels.items()}
    if key in by_name:
        return by_name[key]
    return "other"


def normalise_strategy(raw: str) -> str:
    """A strategy key, from a key or the paper's name in any case; free text is `other`."""
    return _normalise(raw, STRATEGIES)


def normalise_intention(raw: str) -> str:
    """An intention key, from a key or the paper's name in any case; free text is `other`."""
    return _normalise(raw, INTENTIONS)


Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


_LABELS: dict[str, tuple[str, dict[str, str]]] = {
    "error": ("error type", ERROR_TYPES),
    "strategy": ("strategy", STRATEGIES),
    "intention": ("intention", INTENTIONS),
}


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["tutor", "student"]
    text: Text


class Labels(BaseModel):
    """One teacher's Task A/B labels."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    error: str
    strategy: str
    intention: str

    @field_validator("error", "strategy", "intention")
    @classmethod
    def _label(cls, value: str, info: ValidationInfo) -> str:
        return _check_label(value, info)


def _check_label(value: str, info: ValidationInfo) -> str:
    name, allowed = _LABELS[info.field_name or ""]
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; one of: {', '.join(allowed)}")
    return value


class MistakeItem(BaseModel):
    """One item of simrun's own ReMath YAML."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")]
    topic: Text
    history: list[Turn] = Field(min_length=2)
    error: str
    strategy: str
    intention: str
    reference: Text
    """The expert's response to the mistake."""
    novice: str = ""
    """A novice tutor's response, when known (the baseline the paper's raters compared against)."""
    answer: str = ""
    """The correct answer to the question the student got wrong, when it is a short value."""
    second: Labels | None = None
    """A second teacher's labels for the same snippet (human–human agreement), when there is one."""

    @field_validator("history")
    @classmethod
    def _ends_with_student(cls, history: list[Turn]) -> list[Turn]:
        if history[-1].role != "student":
            raise ValueError("the history must end with the student's mistaken turn")
        return history

    @field_validator("error", "strategy", "intention")
    @classmethod
    def _label(cls, value: str, info: ValidationInfo) -> str:
        return _check_label(value, info)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[MistakeItem] = Field(min_length=1)


def to_item(m: MistakeItem, *, source_id: str = "", raw: Mapping[str, str] | None = None) -> Item:
    """The engine item of a mistake item (see the module doc for `data`)."""
    second: dict[str, Any] = {}
    if m.second is not None:
        own = {"error": m.error, "strategy": m.strategy, "intention": m.intention}
        second = {"snippet": m.id, "annotations": [own, m.second.model_dump()], "annotator": 0}
    return Item(
        id=m.id,
        domain="mathematics",
        question=m.history[-1].text,
        answer=m.answer,
        data={
            "topic": m.topic,
            "history": [t.model_dump() for t in m.history],
            "error": m.error,
            "strategy": m.strategy,
            "intention": m.intention,
            "reference": m.reference,
            "novice": m.novice,
            "source_id": source_id or m.id,
            **({"raw": dict(raw)} if raw else {}),
            **second,
        },
    )


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:5])


def load_mistake_items(path: str | Path = BUILTIN_ITEMS) -> list[MistakeItem]:
    """Read and validate simrun's ReMath YAML; every problem is a `ScenarioError` naming the file."""
    path = Path(path)
    data = load_yaml_file(path, "mistake-item file")
    try:
        items = _File.model_validate(data).items
    except ValidationError as exc:
        raise ScenarioError(f"{path}: invalid mistake items: {_problems(exc)}") from None
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ScenarioError(f"{path}: item id {item.id!r} is used twice")
        seen.add(item.id)
    return items


def _turn_text(turns: Any) -> str:
    if not isinstance(turns, list):
        return ""
    return " ".join(str(t.get("text", "")).strip() for t in turns if isinstance(t, dict) and t.get("text")).strip()


BRIDGE_SPLITS = ("train", "validation", "test")
"""The release's files, in the order that numbers the annotators of a doubly-labelled snippet."""


def snippet_key(record: Mapping[str, Any]) -> str:
    """A Bridge snippet's identity: `c_id` plus a digest of its history (a repeated id alone is not enough)."""
    history = "\x1f".join(str(t.get("text", "")) for t in record.get("c_h") or [] if isinstance(t, dict))
    digest = hashlib.sha256(history.encode("utf-8")).hexdigest()[:10]
    return f"{record.get('c_id', '')}#{digest}"


def _labels(record: Mapping[str, Any]) -> dict[str, str]:
    return {
        "error": normalise_error(str(record.get("e", ""))),
        "strategy": normalise_strategy(str(record.get("z_what", ""))),
        "intention": normalise_intention(str(record.get("z_why", ""))),
    }


def double_labelled(folder: Path) -> dict[str, list[dict[str, str]]]:
    """Every labelling of each snippet over the release's splits in `folder`, normalised, in annotator order.

    Each labelling also carries `split` and `position` (of its record). Splits that are absent are skipped;
    so are files that are not Bridge JSON lists.
    """
    found: dict[str, list[dict[str, str]]] = {}
    for split in BRIDGE_SPLITS:
        path = folder / f"{split}.json"
        try:
            records = orjson.loads(read_input_bytes(path, "Bridge file"))
        except (ScenarioError, orjson.JSONDecodeError):
            continue
        if not isinstance(records, list):
            continue
        for position, record in enumerate(records):
            if isinstance(record, dict):
                labels = {**_labels(record), "split": split, "position": str(position)}
                found.setdefault(snippet_key(record), []).append(labels)
    return found


def _unusable(history: list[Turn], reference: str) -> str:
    """Why a Bridge record cannot be an item ("" when it can)."""
    if not reference:
        return "no expert reply"
    if len(history) < 2:
        return "history shorter than two turns"
    if history[-1].role != "student":
        return "last student turn empty or missing"
    return ""


def bridge_items(records: Any, *, split: str, intake: Intake | None = None) -> list[MistakeItem]:
    """Mistake items from parsed Bridge JSON (a list of records); records without a usable history are skipped,
    and counted by reason in `intake`.

    Raises `ValueError` when `records` is not a list of objects.
    """
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError("expected a JSON list of objects with Bridge fields (c_h, e, z_what, z_why, c_r_)")
    found: list[MistakeItem] = []
    intake = intake if intake is not None else Intake()
    intake.read = len(records)
    for position, record in enumerate(records):
        history = [
            Turn(role="student" if str(t.get("user", "")).lower() == "student" else "tutor", text=str(t["text"]))
            for t in record.get("c_h") or []
            if isinstance(t, dict) and str(t.get("text", "")).strip()
        ]
        reference = _turn_text(record.get("c_r_"))
        reason = _unusable(history, reference)
        if reason:
            intake.skip(reason)
            continue
        found.append(
            MistakeItem(
                id=f"{_key(split) or 'bridge'}-{position:04d}",
                topic=str(record.get("lesson_topic") or "").strip() or "(no topic)",
                history=history,
                error=normalise_error(str(record.get("e", ""))),
                strategy=normalise_strategy(str(record.get("z_what", ""))),
                intention=normalise_intention(str(record.get("z_why", ""))),
                reference=reference,
                novice=_turn_text(record.get("c_r")),
            )
        )
    return found


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    limit: int | None = Field(default=None, ge=1)
    """Keep the first N items."""
    errors: list[str] | None = None
    """Keep only items with these gold error types (paper spellings)."""

    @field_validator("errors")
    @classmethod
    def _known(cls, errors: list[str] | None) -> list[str] | None:
        for error in errors or ():
            if error not in ERROR_TYPES:
                raise ValueError(f"unknown error type {error!r}; one of: {', '.join(ERROR_TYPES)}")
        return errors


def _options(options: dict[str, Any]) -> _Options:
    try:
        return _Options.model_validate(options)
    except ValidationError as exc:
        raise ScenarioError(f"item source options: {_problems(exc)}") from None


def _select(items: list[MistakeItem], options: _Options, intake: Intake) -> list[MistakeItem]:
    kept = [m for m in items if options.errors is None or m.error in options.errors]
    intake.skip("error type not selected", len(items) - len(kept))
    if options.limit is not None:
        intake.skip("past the source's limit", len(kept) - options.limit)
        kept = kept[: options.limit]
    return kept


class RemathSource:
    """Item source `remath`: simrun's own YAML of mistake items."""

    Options = _Options

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        items = load_mistake_items(path)
        intake = Intake(read=len(items))
        return CountedItems([to_item(m) for m in _select(items, chosen, intake)], intake)


class BridgeSource:
    """Item source `bridge`: one Bridge/ReMath JSON split (`train.json`, `validation.json`, `test.json`)."""

    Options = _Options
    dataset = "Bridge/ReMath (https://github.com/rosewang2008/bridge, its dataset/*.json splits)"

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        try:
            records = orjson.loads(read_input_bytes(path, "Bridge file"))
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{path}: not valid JSON ({exc})") from None
        intake = Intake()
        try:
            items = bridge_items(records, split=path.stem, intake=intake)
        except (ValueError, ValidationError) as exc:
            raise ScenarioError(f"{path}: not the Bridge layout: {exc}") from None
        raw = {m.id: m for m in items}
        by_position = {f"{_key(path.stem) or 'bridge'}-{i:04d}": r for i, r in enumerate(records)}
        labellings = double_labelled(path.parent) if path.stem in BRIDGE_SPLITS else {}
        found: list[Item] = []
        for m in _select(list(raw.values()), chosen, intake):
            record = by_position[m.id]
            item = to_item(
                m,
                source_id=str(record.get("c_id", m.id)),
                raw={k: str(record.get(k, "")) for k in ("e", "z_what", "z_why")},
            )
            key = snippet_key(record)
            annotations = labellings.get(key, [])
            mine = [
                i
                for i, a in enumerate(annotations)
                if (a["split"], a["position"]) == (path.stem, str(int(m.id.rsplit("-", 1)[1])))
            ]
            if len(annotations) > 1 and mine:
                labels = [{k: a[k] for k in ("error", "strategy", "intention")} for a in annotations]
                item.data.update(snippet=key, annotations=labels, annotator=mine[0])
            found.append(item)
        return CountedItems(found, intake)


ITEM_SOURCES.add("remath", RemathSource())
ITEM_SOURCES.add("bridge", BridgeSource())
