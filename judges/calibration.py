"""Human-labelled data for `simrun calibrate`: the MRBench and Bridge layouts, and how simrun's judges read as them.

`mrbench` reads MRBench V1/V2 (`anno_llm_responses`) and the BEA 2025 dev set (`tutor_responses`): one example
per (conversation, tutor response). Its history is one string of `Tutor:` / `Student:` turns whose breaks are
newlines padded with non-breaking spaces, so it is split on a newline followed by whitespace and a speaker
tag, never on a bare newline. Dimension names and labels are normalised to one spelling (the data writes
`humanlikeness` in lower case and long `Revealing_of_the_Answer` values). The reference answer is the last line
of `Ground_Truth_Solution` ("Not Available" for Bridge items: then there is none). Options: `tutors` (keep these
response authors), `data` (MathDial or Bridge), `limit` (first N conversations).

`bridge` reads a Bridge/ReMath split: the expert's response to each mistake, labelled with the expert's own
strategy and intention (and the error type it answers). Options: `limit`.

Label maps (`MRBENCH_LABEL_MAPS`, `BRIDGE_LABEL_MAPS`, documented in the README and pinned by tests) say which
judge metric answers which dimension and how its values become the dataset's labels: `turn_quality` (EduFair's
rubric) → mistake identification, answer revealing, guidance (proxy), actionability, tone (proxy);
`answer_leak` (deterministic) → answer revealing; `conversation_stats` (deterministic: does the response ask a
question?) → actionability (proxy); `remath_strategy` → strategy and intention. A proxy row is marked in every
report. See `judges.labels` for the generic JSONL layout.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import (
    LABEL_SOURCES,
    Dimension,
    Example,
    Intake,
    Item,
    LabelMap,
    LabelSet,
    Reader,
    ScenarioError,
    read_input_bytes,
)
from personas.remath import INTENTIONS, STRATEGIES, bridge_items, to_item

__all__ = (
    "BRIDGE_DIMENSIONS",
    "BRIDGE_LABEL_MAPS",
    "BRIDGE_READERS",
    "MRBENCH_DIMENSIONS",
    "MRBENCH_LABEL_MAPS",
    "MRBENCH_READERS",
    "BridgeOptions",
    "MRBenchOptions",
    "mrbench_examples",
    "normalise_mrbench_label",
    "split_history",
)

_YES_NO = ("No", "To some extent", "Yes")
_LENIENT = {"To some extent": "Yes"}
_REVEAL_CORRECT = "Yes (and the answer is correct)"
_REVEAL_WRONG = "Yes (but the answer is incorrect)"

MRBENCH_DIMENSIONS = (
    Dimension("Mistake_Identification", _YES_NO, ordinal=True, lenient=_LENIENT),
    Dimension("Mistake_Location", _YES_NO, ordinal=True, lenient=_LENIENT),
    Dimension(
        "Revealing_of_the_Answer",
        ("No", _REVEAL_CORRECT, _REVEAL_WRONG),
        lenient={_REVEAL_CORRECT: "Yes", _REVEAL_WRONG: "Yes"},
    ),
    Dimension("Providing_Guidance", _YES_NO, ordinal=True, lenient=_LENIENT),
    Dimension("Actionability", _YES_NO, ordinal=True, lenient=_LENIENT),
    Dimension("Coherence", _YES_NO, ordinal=True, lenient=_LENIENT),
    Dimension("Tutor_Tone", ("Offensive", "Neutral", "Encouraging"), ordinal=True),
    Dimension("Humanlikeness", _YES_NO, ordinal=True, lenient=_LENIENT),
)
BRIDGE_DIMENSIONS = (
    Dimension("strategy", tuple(STRATEGIES)),
    Dimension("intention", tuple(INTENTIONS)),
)

_DIMENSION_NAMES = {re.sub(r"[^a-z]", "", d.name.lower()): d.name for d in MRBENCH_DIMENSIONS} | {
    "humanness": "Humanlikeness",
    "revealingoftheanswer": "Revealing_of_the_Answer",
}
_TURN_BREAK = re.compile(r"\n\s*(?=(?:Tutor|Student)\s*:)")
_SPEAKER = re.compile(r"^\s*(Tutor|Student)\s*:\s*", re.IGNORECASE)


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).strip().lower().split())


def normalise_mrbench_label(dimension: str, value: Any) -> tuple[str, str] | None:
    """(canonical dimension, canonical label), or None for a dimension or label outside MRBench's sets."""
    name = _DIMENSION_NAMES.get(re.sub(r"[^a-z]", "", str(dimension).lower()))
    if name is None or not isinstance(value, str):
        return None
    labels = next(d.labels for d in MRBENCH_DIMENSIONS if d.name == name)
    folded = _fold(value)
    for label in labels:
        if folded == _fold(label):
            return name, label
    return None


def split_history(text: str) -> list[tuple[Literal["tutor", "student"], str]]:
    """Turns of an MRBench history string (see the module doc); text before any speaker tag is the tutor's."""
    turns: list[tuple[Literal["tutor", "student"], str]] = []
    for chunk in _TURN_BREAK.split(text):
        match = _SPEAKER.match(chunk)
        role: Literal["tutor", "student"] = "student" if match and match.group(1).lower() == "student" else "tutor"
        body = chunk[match.end() :] if match else chunk
        body = " ".join(body.replace("\u00a0", " ").split())
        if body:
            turns.append((role, body))
    return turns


def _answer(solution: Any) -> str:
    if not isinstance(solution, str) or _fold(solution) in ("", "not available", "n/a"):
        return ""
    last = solution.strip().splitlines()[-1].strip().replace(",", "")
    return last if re.fullmatch(r"-?\d+(?:\.\d+)?", last) else ""


class MRBenchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tutors: list[str] | None = None
    """Keep only responses by these tutors (e.g. [Expert, GPT4])."""
    data: str | None = None
    """Keep only conversations from this origin (MathDial or Bridge; V1/V2 only)."""
    limit: int | None = Field(default=None, ge=1)
    """Keep the first N conversations."""


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(read_input_bytes(path, "label file"))
    except orjson.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON ({exc})") from None


def mrbench_examples(records: Any, options: MRBenchOptions, intake: Intake | None = None) -> list[Example]:
    """Examples from parsed MRBench JSON, what was left out counted in `intake` (conversations, then tutor
    responses); `ValueError` when the layout is not MRBench's."""
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError("expected a JSON list of conversations")
    intake = intake if intake is not None else Intake()
    intake.read = len(records)
    examples: list[Example] = []
    kept = 0
    for record in records:
        responses = record.get("anno_llm_responses", record.get("tutor_responses"))
        if not isinstance(responses, dict) or "conversation_history" not in record:
            raise ValueError("a conversation lacks conversation_history or anno_llm_responses/tutor_responses")
        if options.data is not None and _fold(str(record.get("Data", ""))) != _fold(options.data):
            intake.skip("conversation of another data set")
            continue
        if options.limit is not None and kept >= options.limit:
            intake.skip("conversation past the source's limit")
            continue
        kept += 1
        conversation = str(record.get("conversation_id", kept))
        history = split_history(str(record["conversation_history"]))
        if not history:
            intake.skip("conversation with an empty history")
            continue
        item = Item(
            id=conversation,
            domain="mathematics",
            question=history[0][1],
            answer=_answer(record.get("Ground_Truth_Solution")),
            data={"topic": str(record.get("Topic", ""))},
        )
        for tutor, entry in responses.items():
            if options.tutors is not None and tutor not in options.tutors:
                intake.skip("response of a tutor not selected")
                continue
            if not isinstance(entry, dict) or not isinstance(entry.get("response"), str):
                intake.skip("response without text")
                continue
            annotation = entry.get("annotation") or {}
            labels = dict(
                found
                for key, value in (annotation.items() if isinstance(annotation, dict) else ())
                if (found := normalise_mrbench_label(key, value)) is not None
            )
            examples.append(
                Example(
                    id=f"{conversation}:{tutor}",
                    item=item,
                    history=tuple(history),
                    response=entry["response"],
                    labels=labels,
                    group=tutor,
                )
            )
    return examples


_NO_MISTAKE_SEEN = "judge says no mistake is present (−1) → No"


def _binary(metric: str, yes: str, no: str, na: str | None, proxy: str | None = None) -> LabelMap:
    return LabelMap(metric, ((1, yes), (0, no), (-1, na), (True, yes), (False, no)), proxy=proxy)


MRBENCH_LABEL_MAPS: dict[str, dict[str, LabelMap]] = {
    "turn_quality": {
        # EduFair's mistake_recognize is -1 when the judge sees no mistake at all: read as "No" (not identified)
        "Mistake_Identification": _binary("mistake_recognize", "Yes", "No", "No"),
        # the judge says whether the answer was revealed, not whether it was correct: a reveal reads as correct
        "Revealing_of_the_Answer": _binary("answer_leakage", _REVEAL_CORRECT, "No", None),
        "Providing_Guidance": _binary(
            "step_scaffolded",
            "Yes",
            "No",
            None,
            proxy="scaffolds the next step (asks a question without revealing), not MRBench's 'offers guidance'",
        ),
        "Actionability": _binary("actionability", "Yes", "No", None),
        "Tutor_Tone": _binary(
            "corrective_tone",
            "Encouraging",
            "Neutral",
            None,
            proxy="encouraging correction of a mistake, not tone in general; the judge decides which responses "
            "it scores (−1 when it sees no mistake: no verdict, dropped), so κ's sample differs between judges",
        ),
    },
    "answer_leak": {
        "Revealing_of_the_Answer": LabelMap("answer_leak", ((True, _REVEAL_CORRECT), (False, "No"))),
    },
    "conversation_stats": {
        "Actionability": LabelMap(
            "tutor_question_rate",
            ((True, "Yes"), (False, "No")),
            proxy="the response asks the student a question, a deterministic stand-in for 'tells the student "
            "what to do next'",
            key=lambda rate: rate > 0 if isinstance(rate, int | float) and not isinstance(rate, bool) else None,
            key_text="tutor_question_rate > 0",
        ),
    },
}
"""MRBench dimension ← judge metric, and judge value → MRBench label (README: "Label maps")."""
MRBENCH_READERS: dict[str, dict[str, Reader]] = {judge: dict(maps) for judge, maps in MRBENCH_LABEL_MAPS.items()}
BRIDGE_LABEL_MAPS: dict[str, dict[str, LabelMap]] = {
    "remath_strategy": {
        "strategy": LabelMap("used_strategy", passthrough=True),
        "intention": LabelMap("used_intention", passthrough=True),
    },
}
BRIDGE_READERS: dict[str, dict[str, Reader]] = {judge: dict(maps) for judge, maps in BRIDGE_LABEL_MAPS.items()}


def _mrbench(path: Path, options: Mapping[str, Any], /) -> LabelSet:
    try:
        chosen = MRBenchOptions.model_validate(dict(options))
    except ValidationError as exc:
        raise ScenarioError(f"mrbench options: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    intake = Intake(source="mrbench", path=path.name)
    try:
        examples = mrbench_examples(_read_json(path), chosen, intake)
    except ValueError as exc:
        raise ScenarioError(f"{path}: not the MRBench layout: {exc}") from None
    intake.kept = len(examples)
    return LabelSet("mrbench", MRBENCH_DIMENSIONS, tuple(examples), MRBENCH_READERS, intake=intake)


class BridgeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    limit: int | None = Field(default=None, ge=1)


def _bridge(path: Path, options: Mapping[str, Any], /) -> LabelSet:
    try:
        chosen = BridgeOptions.model_validate(dict(options))
    except ValidationError as exc:
        raise ScenarioError(f"bridge options: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    intake = Intake(source="bridge", path=path.name)
    try:
        mistakes = bridge_items(_read_json(path), split=path.stem, intake=intake)
    except (ValueError, ValidationError) as exc:
        raise ScenarioError(f"{path}: not the Bridge layout: {exc}") from None
    if chosen.limit is not None:
        intake.skip("past the source's limit", len(mistakes) - chosen.limit)
    intake.kept = len(mistakes[: chosen.limit])
    examples = []
    for mistake in mistakes[: chosen.limit]:
        item = to_item(mistake)
        examples.append(
            Example(
                id=mistake.id,
                item=item,
                history=tuple((t.role, t.text) for t in mistake.history),
                response=mistake.reference,
                labels={"strategy": mistake.strategy, "intention": mistake.intention},
                group="expert",
            )
        )
    return LabelSet("bridge", BRIDGE_DIMENSIONS, tuple(examples), BRIDGE_READERS, intake=intake)


_SOURCES: dict[str, Callable[[Path, Mapping[str, Any]], LabelSet]] = {"mrbench": _mrbench, "bridge": _bridge}
for _name, _source in _SOURCES.items():
    LABEL_SOURCES.add(_name, _source)
