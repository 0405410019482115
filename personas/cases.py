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
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from engine import ITEM_SOURCES, Item, ScenarioError, load_yaml_file

from .case_retrieval import RETRIEVAL_METHODS, case_text, neighbours

__all__ = (
    "CHALLENGE_TYPES",
    "RESPONSE_TYPES",
    "Case",
    "CaseFile",
    "CaseSourceOptions",
    "ChallengeType",
    "Criterion",
    "DialogueTurn",
    "FixedMCQ",
    "FullContext",
    "ResponseType",
    "Strategies",
    "StudentPersona",
    "builtin_cases",
    "case_items",
    "case_of",
    "load_cases",
    "load_tutorcasebench",
    "normalise_challenge",
)

CHALLENGE_TYPES = (
    "task_resistance",
    "emotional_distress",
    "social_interpersonal",
    "attention_engagement",
    "academic_struggle",
)
RESPONSE_TYPES = ("immediate", "long_term")
ChallengeType = Literal[
    "task_resistance", "emotional_distress", "social_interpersonal", "attention_engagement", "academic_struggle"
]
ResponseType = Literal["immediate", "long_term"]

_BUILTIN_FILE = Path(__file__).with_name("cases.yaml")
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Key = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True)


class StudentPersona(_Model):
    grade: str = ""
    """School level, e.g. "grade 4" or "year 10"; empty when the source does not say."""
    subject: str = ""
    description: Text
    """Recurring patterns, triggers, what tends to help and what backfires — the simulated student's brief."""


class FullContext(_Model):
    """What the judge sees and the tutor does not (TutorCaseBench's `full_context.content`)."""

    task: str = ""
    context: str = ""
    trigger: str = ""
    """What set off the challenging behaviour in the last student turn."""
    behavior_patterns: list[str] = Field(default_factory=list)


class DialogueTurn(_Model):
    speaker: Literal["tutor", "student"]
    text: Text
    challenging: bool = False
    """True on the student turn that shows the challenging behaviour (the last turn of the prefix)."""


class Strategies(_Model):
    """The hidden answer key: never shown to the tutor except as references drawn from *other* cases."""

    immediate_effective: list[Text] = Field(default_factory=list)
    long_term_effective: list[Text] = Field(default_factory=list)
    ineffective: list[Text] = Field(default_factory=list)

    def effective(self, response: ResponseType) -> list[str]:
        return list(self.immediate_effective if response == "immediate" else self.long_term_effective)


class Criterion(_Model):
    id: int = Field(ge=0)
    name: Text
    rationale: Text
    check: Text
    """What must be present (or absent) in the tutor's response to earn the point."""


class FixedMCQ(_Model):
    """A multiple-choice item given by a dataset (options in its order; simrun reshuffles them per episode)."""

    id: str
    response: ResponseType
    options: list[Text] = Field(min_length=2, max_length=4)
    correct: int = Field(ge=0)

    @property
    def variant(self) -> Literal["mcq4", "binary"]:
        return "binary" if len(self.options) == 2 else "mcq4"

    @model_validator(mode="after")
    def _correct_in_range(self) -> FixedMCQ:
        if self.correct >= len(self.options):
            raise ValueError(f"correct option {self.correct} is not one of the {len(self.options)} options")
        return self


class Case(_Model):
    id: Key
    title: Text
    challenge_type: ChallengeType
    student: StudentPersona
    minimal_context: Text
    """The one sentence the tutor is given: task and setting only, the student's needs left to infer."""
    full_context: FullContext
    dialogue: list[DialogueTurn] = Field(min_length=2)
    strategies: Strategies
    rubrics: dict[ResponseType, list[Criterion]]
    mcqs: list[FixedMCQ] = Field(default_factory=list)
    source: str = "simrun"
    student_key: str = ""
    """Who the student is, across cases: cases of one student share their rubric (empty: this case alone)."""
    family: str = ""
    """The scenario family (for the release: the source paper) — siblings never serve as each other's references
    or distractors (empty: this case alone)."""

    def related(self, other: Case) -> bool:
        """Whether `other` is this case, or shares its student or scenario family (and so its answer key)."""
        if other.id == self.id:
            return True
        same_student = bool(self.student_key) and self.student_key == other.student_key
        return same_student or (bool(self.family) and self.family == other.family)

    @model_validator(mode="after")
    def _shape(self) -> Case:
        if self.dialogue[0].speaker != "tutor":
            raise ValueError("the dialogue must open with the tutor")
        for before, after in zip(self.dialogue, self.dialogue[1:], strict=False):
            if before.speaker == after.speaker:
                raise ValueError("tutor and student turns must alternate")
        last = self.dialogue[-1]
        if last.speaker != "student" or not last.challenging:
            raise ValueError("the dialogue must end with the student's challenging turn (`challenging: true`)")
        if sum(turn.challenging for turn in self.dialogue) != 1:
            raise ValueError("exactly one turn, the last, is the challenging behaviour")
        for response, criteria in self.rubrics.items():
            ids = [c.id for c in criteria]
            if len(set(ids)) != len(ids):
                raise ValueError(f"rubric {response!r} repeats a criterion id")
        return self

    def rubric(self, response: ResponseType) -> list[Criterion]:
        return list(self.rubrics.get(response, []))

    def transcript(self) -> str:
        return "\n".join(f"{turn.speaker.upper()}: {turn.text}" for turn in self.dialogue)


class CaseFile(_Model):
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> CaseFile:
        ids = [case.id for case in self.cases]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"case ids must be unique; repeated: {', '.join(repeated)}")
        return self


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
    )


def load_cases(path: Path) -> list[Case]:
    """simrun's own case file (`cases: [...]`, the layout of `personas/cases.yaml`)."""
    data = load_yaml_file(path, "case file")
    try:
        return list(CaseFile.model_validate(data, strict=False).cases)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: invalid case file: {_problems(exc)}") from None


@cache
def builtin_cases() -> tuple[Case, ...]:
    """The team's own cases (`personas/cases.yaml`), read once per process."""
    return tuple(load_cases(_BUILTIN_FILE))


# ---- the public TutorCaseBench layout -------------------------------------------------------------------------


def normalise_challenge(label: str) -> ChallengeType:
    """TutorCaseBench's spelled-out challenge types ("Social-Interpersonal Difficulty") → simrun's keys."""
    text = label.strip().lower()
    for needle, key in (
        ("resist", "task_resistance"),
        ("emotion", "emotional_distress"),
        ("social", "social_interpersonal"),
        ("attention", "attention_engagement"),
        ("engage", "attention_engagement"),
        ("academic", "academic_struggle"),
    ):
        if needle in text:
            return key  # type: ignore[return-value]
    raise ValueError(f"unknown challenge type {label!r}; expected one of {', '.join(CHALLENGE_TYPES)}")


def _response(label: str) -> ResponseType | None:
    text = label.strip().lower().replace("-", "_").replace(" ", "_")
    if "long" in text:
        return "long_term"
    if "immediate" in text:
        return "immediate"
    return None


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _PublicTurn(_Loose):
    speaker: str
    message: str
    is_challenging_behavior: bool = False


class _PublicContent(_Loose):
    task: str = ""
    context: str = ""
    challenging_behavior_trigger: str = ""
    behavior_patterns: list[str] = Field(default_factory=list)


class _PublicFull(_Loose):
    content: _PublicContent = Field(default_factory=_PublicContent)


class _PublicScenario(_Loose):
    category_id: str | int
    category_title: str = ""
    paper_id: str | int | None = None
    scenario_id: str | int
    scenario_title: str = ""
    minimal_context: str
    dialogue: list[_PublicTurn] = Field(min_length=2)
    challenge_type: str
    full_context: _PublicFull | None = None


class _PublicCriterion(_Loose):
    criterion_id: int
    criterion_name: str
    rationale: str = ""
    check: str


class _PublicRubricBody(_Loose):
    criteria: list[_PublicCriterion] = Field(min_length=1)


class _PublicRubric(_Loose):
    category_id: str | int
    rubric_type: str
    student_description: str = ""
    rubric: _PublicRubricBody
    challenge_type: str = ""


class _PublicMCQ(_Loose):
    mcq_id: str | int
    scenario_id: str | int | None = None
    options: dict[str, str] = Field(min_length=2, max_length=4)
    correct_answer: str
    challenge_type: str = ""
    response_type: str | None = None
    rubric_type: str | None = None
    mcq_type: str | None = None


def _read_json(path: Path) -> Any:
    raw = path.read_bytes()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    for encoding in ("cp1252", "latin-1"):  # the release mixes encodings (see ../shared/data/README.md)
        try:
            return orjson.loads(raw.decode(encoding).encode("utf-8"))
        except (UnicodeDecodeError, orjson.JSONDecodeError):
            continue
    raise ScenarioError(f"{path}: not valid JSON")


def _parse(model: type[_Loose], path: Path) -> Any:
    data = _read_json(path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(
            f"{path}: not a TutorCaseBench {model.__name__.removeprefix('_Public').lower()}: {_problems(exc)}"
        ) from None


def _speaker(label: str) -> Literal["tutor", "student"]:
    return "tutor" if label.strip().lower() in {"tutor", "teacher", "assistant", "instructor"} else "student"


def _public_dialogue(turns: Sequence[_PublicTurn]) -> list[DialogueTurn]:
    """Up to the flagged turn (or the last student turn), merging any same-speaker neighbours."""
    cut = next((i for i, t in enumerate(turns) if t.is_challenging_behavior), None)
    if cut is None:
        cut = max(i for i, t in enumerate(turns) if _speaker(t.speaker) == "student")
    merged: list[tuple[Literal["tutor", "student"], str]] = []
    for turn in turns[: cut + 1]:
        speaker, text = _speaker(turn.speaker), turn.message.strip()
        if not text:
            continue
        if merged and merged[-1][0] == speaker:
            merged[-1] = (speaker, f"{merged[-1][1]} {text}")
        else:
            merged.append((speaker, text))
    if merged and merged[0][0] == "student":
        merged.insert(0, ("tutor", "(The session begins.)"))
    return [DialogueTurn(speaker=s, text=t, challenging=i == len(merged) - 1) for i, (s, t) in enumerate(merged)]


def _mcq_response(mcq: _PublicMCQ) -> ResponseType | None:
    for label in (mcq.response_type, mcq.rubric_type, mcq.mcq_type, str(mcq.mcq_id)):
        if label:
            found = _response(label)
            if found is not None:
                return found
    return None


def _criteria(rubric: _PublicRubric) -> list[Criterion]:
    return [
        Criterion(id=c.criterion_id, name=c.criterion_name, rationale=c.rationale or "-", check=c.check)
        for c in rubric.rubric.criteria
    ]


def _family(scenario: _PublicScenario) -> str:
    """The source paper of a scenario: `paper_id` when given, else the category id up to its last `-` or `_`.

    The release numbers categories within papers (the paper id, a separator, the category's number); an id
    without a separator is its own family.
    """
    if scenario.paper_id is not None and str(scenario.paper_id).strip():
        return str(scenario.paper_id).strip()
    category = str(scenario.category_id)
    for separator in ("-", "_"):
        if separator in category:
            return category.rsplit(separator, 1)[0]
    return category


def load_tutorcasebench(root: Path) -> list[Case]:
    """Cases from a checkout of the public release: `dialogue_full_context/` (or `dialogue/`), `rubric/`, `mcq/`.

    A scenario is kept when its category has a rubric for both response types. MCQs whose scenario or response
    type cannot be told are left out; the rest become the case's `mcqs` and, through their options, its
    strategies. Every case records its student (the category: sibling scenarios share the category's rubric)
    and family (the source paper), so retrieval can keep a case's siblings out of its references.
    """
    if not root.is_dir():
        raise ScenarioError(f"{root}: expected the TutorCaseBench folder (with dialogue/, rubric/, mcq/)")
    folder = root / "dialogue_full_context"
    if not folder.is_dir():
        folder = root / "dialogue"
    if not folder.is_dir():
        raise ScenarioError(f"{root}: no dialogue_full_context/ or dialogue/ folder: not a TutorCaseBench checkout")
    rubrics: dict[tuple[str, ResponseType], _PublicRubric] = {}
    for path in sorted((root / "rubric").glob("*.json")):
        rubric = _parse(_PublicRubric, path)
        response = _response(rubric.rubric_type)
        if response is not None:
            rubrics[(str(rubric.category_id), response)] = rubric
    mcqs: dict[str, list[FixedMCQ]] = {}
    for path in sorted((root / "mcq").glob("*.json")):
        raw = _parse(_PublicMCQ, path)
        response = _mcq_response(raw)
        letters = sorted(raw.options)
        if raw.scenario_id is None or response is None or raw.correct_answer.strip() not in letters:
            continue
        mcqs.setdefault(str(raw.scenario_id), []).append(
            FixedMCQ(
                id=str(raw.mcq_id),
                response=response,
                options=[raw.options[letter].strip() or "(empty option)" for letter in letters],
                correct=letters.index(raw.correct_answer.strip()),
            )
        )
    cases: list[Case] = []
    for path in sorted(folder.glob("*.json")):
        scenario = _parse(_PublicScenario, path)
        category = str(scenario.category_id)
        immediate, long_term = rubrics.get((category, "immediate")), rubrics.get((category, "long_term"))
        if immediate is None or long_term is None:
            continue
        content = scenario.full_context.content if scenario.full_context else _PublicContent()
        fixed = mcqs.get(str(scenario.scenario_id), [])
        effective: dict[ResponseType, list[str]] = {"immediate": [], "long_term": []}
        ineffective: list[str] = []
        for mcq in fixed:
            right = mcq.options[mcq.correct]
            if right not in effective[mcq.response]:
                effective[mcq.response].append(right)
            if mcq.variant == "binary":
                wrong = mcq.options[1 - mcq.correct]
                if wrong not in ineffective:
                    ineffective.append(wrong)
        try:
            case = Case(
                id=f"tcb-{scenario.scenario_id}",
                title=scenario.scenario_title.strip()
                or scenario.category_title.strip()
                or f"case {scenario.scenario_id}",
                challenge_type=normalise_challenge(scenario.challenge_type),
                student=StudentPersona(description=immediate.student_description.strip() or "(not described)"),
                minimal_context=scenario.minimal_context,
                full_context=FullContext(
                    task=content.task,
                    context=content.context,
                    trigger=content.challenging_behavior_trigger,
                    behavior_patterns=list(content.behavior_patterns),
                ),
                dialogue=_public_dialogue(scenario.dialogue),
                strategies=Strategies(
                    immediate_effective=effective["immediate"],
                    long_term_effective=effective["long_term"],
                    ineffective=ineffective,
                ),
                rubrics={"immediate": _criteria(immediate), "long_term": _criteria(long_term)},
                mcqs=fixed,
                source="tutorcasebench",
                student_key=f"category:{category}",
                family=f"paper:{_family(scenario)}",
            )
        except (ValidationError, ValueError) as exc:
            detail = _problems(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ScenarioError(f"{path}: cannot read this scenario as a case: {detail}") from None
        cases.append(case)
    if not cases:
        raise ScenarioError(f"{root}: no scenario with rubrics for both response types was found")
    return cases


# ---- items ----------------------------------------------------------------------------------------------------


class CaseSourceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
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


def _select(cases: Iterable[Case], options: CaseSourceOptions) -> list[Case]:
    kept: list[Case] = []
    per_type: dict[str, int] = {}
    for case in cases:
        if options.challenge_types is not None and case.challenge_type not in options.challenge_types:
            continue
        per_type[case.challenge_type] = per_type.get(case.challenge_type, 0) + 1
        if options.limit is None or per_type[case.challenge_type] <= options.limit:
            kept.append(case)
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
        raise ScenarioError(f"case source options: {_problems(exc)}") from None


class CaseSource:
    """Item source `cases`: simrun's own case file (`path: ../personas/cases.yaml` for the built-in set)."""

    Options = CaseSourceOptions

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        return case_items(_select(self._cases(path), chosen), chosen, base_dir=path.parent)

    def retrieval_texts(self, path: Path, options: Mapping[str, Any], /) -> dict[str, str]:
        """What retrieval compares, per case id (`simrun embed` embeds these; see `engine.tools._embed`)."""
        return {case.id: case_text(case) for case in _select(self._cases(path), _options(options))}

    @staticmethod
    def _cases(path: Path) -> list[Case]:
        return list(builtin_cases()) if path.resolve() == _BUILTIN_FILE.resolve() else load_cases(path)


class TutorCaseBenchSource:
    """Item source `tutorcasebench`: a checkout of the public release (`path:` its root folder)."""

    Options = CaseSourceOptions

    def __call__(self, path: Path, options: dict[str, Any], /) -> list[Item]:
        chosen = _options(options)
        return case_items(_select(load_tutorcasebench(path), chosen), chosen, base_dir=path)

    def retrieval_texts(self, path: Path, options: Mapping[str, Any], /) -> dict[str, str]:
        """What retrieval compares, per case id (`simrun embed --source tutorcasebench` embeds these)."""
        return {case.id: case_text(case) for case in _select(load_tutorcasebench(path), _options(options))}


ITEM_SOURCES.add("cases", CaseSource())
ITEM_SOURCES.add("tutorcasebench", TutorCaseBenchSource())
