"""Challenging-behaviour cases as data (after TutorCaseBench), their loaders, and the item sources that serve them.

A case is one student at one difficult moment: who the student is, the one-sentence minimal context a tutor
sees, the full context only the judge sees, a dialogue prefix that ends in the challenging behaviour, the
hidden strategies documented to work (now, and over weeks) or to backfire, and a checklist rubric per
response type. The team's own cases live in `cases.yaml` (written for simrun; see its header). Users who hold
the public TutorCaseBench release read it with the `tutorcasebench` item source; that layout has no hidden
strategies, so they are recovered from its multiple-choice items (the correct option of a 4-option item is an
effective strategy, the wrong option of a binary item an ineffective one) and its MCQs are kept as given.

Each case becomes one `Item`: `domain` is the challenge type (so records carry it as `meta.domain`),
`question` the minimal context, and `data` the validated case plus its retrieved neighbours (see
`personas.case_retrieval`), which the reference-based prompts and the 4-option distractors use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import ITEM_SOURCES, CountedItems, Intake, Item, ScenarioError

from .case_model import (
    BUILTIN_FILE,
    CHALLENGE_TYPES,
    RESPONSE_TYPES,
    Case,
    CaseFile,
    ChallengeType,
    Criterion,
    DialogueTurn,
    FixedMCQ,
    FullContext,
    ResponseType,
    Strategies,
    StudentPersona,
    builtin_cases,
    load_cases,
    validation_problems,
)
from .case_retrieval import RETRIEVAL_METHODS, case_text, neighbours
from .tutorcasebench import load_tutorcasebench, normalise_challenge

__all__ = (
    "CHALLENGE_TYPES",
    "RESPONSE_TYPES",
    "Case",
    "CaseFile",
    "CaseSource",
    "CaseSourceOptions",
    "ChallengeType",
    "Criterion",
    "DialogueTurn",
    "FixedMCQ",
    "FullContext",
    "ResponseType",
    "Strategies",
    "StudentPersona",
    "TutorCaseBenchSource",
    "builtin_cases",
    "case_items",
    "case_of",
    "load_cases",
    "load_tutorcasebench",
    "normalise_challenge",
)


class CaseSourceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    challenge_types: list[ChallengeType] | None = None
    """Keep only cases of these challenge types."""
    limit: int | None = Field(default=None, ge=1)
    """Keep the first N cases of each challenge type."""
    references: int = Field(default=2, ge=0, le=10)
    """How many of the most similar other cases a reference-based prompt draws its strategies from."""
    retrieval: Literal["lexical", "embeddings"] = "lexical"
    """`lexical`: TF-IDF cosine over what the tutor sees (offline). `embeddings`: cosine of embedding vectors."""
    vectors: str | None = None
    """For `embeddings`: a JSON file `{case_id: [float, ...]}` (relative to the case file, or inside the
    TutorCaseBench folder), written by `simrun embed PATH --model SPEC -o FILE` or by any other embedder."""

    @model_validator(mode="after")
    def _vectors_given(self) -> CaseSourceOptions:
        if self.retrieval == "embeddings" and not self.vectors:
            raise ValueError(
                "retrieval: embeddings needs `vectors`: a JSON file of one vector per case id "
                "(write it with `simrun embed CASES --model SPEC -o FILE`)"
            )
        return self


def _select(cases: Iterable[Case], options: CaseSourceOptions, intake: Intake | None = None) -> list[Case]:
    kept: list[Case] = []
    per_type: dict[str, int] = {}
    intake = intake if intake is not None else Intake()
    for case in cases:
        if options.challenge_types is not None and case.challenge_type not in options.challenge_types:
            intake.skip("challenge type not selected")
            continue
        per_type[case.challenge_type] = per_type.get(case.challenge_type, 0) + 1
        if options.limit is None or per_type[case.challenge_type] <= options.limit:
            kept.append(case)
        else:
            intake.skip("past the source's limit per challenge type")
    return kept


def case_items(cases: Sequence[Case], options: CaseSourceOptions, *, base_dir: Path) -> list[Item]:
    """One item per case, each carrying its ranked neighbours (the other cases, most similar first)."""
    method = RETRIEVAL_METHODS[options.retrieval]
    vectors = base_dir / options.vectors if options.vectors else None
    ranked = neighbours(cases, method, vectors=vectors)
    items: list[Item] = []
    for case, near in zip(cases, ranked, strict=True):
        items.append(
            Item(
                id=case.id,
                domain=case.challenge_type,
                question=case.minimal_context,
                answer="",
                data={
                    "case": case.model_dump(mode="json"),
                    "neighbours": [
                        {
                            "id": other.id,
                            "similarity": round(similarity, 6),
                            "challenge_type": other.challenge_type,
                            "strategies": other.strategies.model_dump(mode="json"),
                        }
                        for other, similarity in near
                    ],
                    "references": options.references,
                    "retrieval": options.retrieval,
                },
            )
        )
    return items


def case_of(item: Item) -> Case:
    """The case an item carries (validated again: items can also be built by hand in code)."""
    try:
        return Case.model_validate(item.data["case"], strict=False)
    except (KeyError, ValidationError) as exc:
        raise ValueError(f"item {item.id!r} carries no valid case: {exc}") from None


def _options(raw: Mapping[str, Any]) -> CaseSourceOptions:
    try:
        return CaseSourceOptions.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(f"case source options: {validation_problems(exc)}") from None


class CaseSource:
    """Item source `cases`: simrun's own case file (`path: package:personas/cases.yaml` for the built-in set)."""

    Options = CaseSourceOptions

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        cases = self._cases(path)
        intake = Intake(read=len(cases))
        return CountedItems(case_items(_select(cases, chosen, intake), chosen, base_dir=path.parent), intake)

    def retrieval_texts(self, path: Path, options: Mapping[str, Any], /) -> dict[str, str]:
        """What retrieval compares, per case id (`simrun embed` embeds these; see `engine.tools._embed`)."""
        return {case.id: case_text(case) for case in _select(self._cases(path), _options(options))}

    @staticmethod
    def _cases(path: Path) -> list[Case]:
        return list(builtin_cases()) if path.resolve() == BUILTIN_FILE.resolve() else load_cases(path)


class TutorCaseBenchSource:
    """Item source `tutorcasebench`: a checkout of the public release (`path:` its root folder)."""

    Options = CaseSourceOptions

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        intake = Intake()
        cases = _select(load_tutorcasebench(path, intake), chosen, intake)
        return CountedItems(case_items(cases, chosen, base_dir=path), intake)

    def retrieval_texts(self, path: Path, options: Mapping[str, Any], /) -> dict[str, str]:
        """What retrieval compares, per case id (`simrun embed --source tutorcasebench` embeds these)."""
        return {case.id: case_text(case) for case in _select(load_tutorcasebench(path), _options(options))}


ITEM_SOURCES.add("cases", CaseSource())
ITEM_SOURCES.add("tutorcasebench", TutorCaseBenchSource())
