"""The public TutorCaseBench release read as cases. Its layout has no hidden strategies, so they are recovered
from its multiple-choice items: the correct option of a 4-option item is an effective strategy, the wrong
option of a binary item an ineffective one; its MCQs are kept as given."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine import Intake, ScenarioError, read_input_bytes

from .case_model import (
    CHALLENGE_TYPES,
    Case,
    ChallengeType,
    Criterion,
    DialogueTurn,
    FixedMCQ,
    FullContext,
    ResponseType,
    Strategies,
    StudentPersona,
    validation_problems,
)

__all__ = ("load_tutorcasebench", "normalise_challenge")


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


def _flat(value: Any) -> str:
    """The release writes some context fields as text and others as objects (`{"content": ..., ...}`), lists
    of quotes among them: each becomes one line of `name: value` parts, empty parts left out."""
    if isinstance(value, dict):
        parts = [(k, _flat(v)) for k, v in value.items()]
        return "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in parts if v)
    if isinstance(value, list):
        return " / ".join(text for text in map(_flat, value) if text)
    return "" if value is None else str(value).strip()


class _PublicContent(_Loose):
    task: str = ""
    context: str = ""
    challenging_behavior_trigger: str = ""
    behavior_patterns: list[str] = Field(default_factory=list)

    @field_validator("task", "context", "challenging_behavior_trigger", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return _flat(value)

    @field_validator("behavior_patterns", mode="before")
    @classmethod
    def _patterns(cls, value: Any) -> list[str]:
        items = value if isinstance(value, list) else [value]
        return [text for text in map(_flat, items) if text]


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
    raw = read_input_bytes(path, "TutorCaseBench file")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    for encoding in ("cp1252", "latin-1"):  # the release mixes encodings
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
            f"{path}: not a TutorCaseBench {model.__name__.removeprefix('_Public').lower()}: {validation_problems(exc)}"
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


def _rubrics(root: Path, intake: Intake) -> dict[tuple[str, ResponseType], _PublicRubric]:
    """Each category's rubric per response type."""
    rubrics: dict[tuple[str, ResponseType], _PublicRubric] = {}
    for path in sorted((root / "rubric").glob("*.json")):
        rubric = _parse(_PublicRubric, path)
        response = _response(rubric.rubric_type)
        if response is None:
            intake.skip("rubric of an unknown response type")
            continue
        rubrics[(_id(rubric.category_id), response)] = rubric
    return rubrics


def _id(value: str | int) -> str:
    """The release pads ids with zeros in some files and not in others: `007`, `7` and 7 are one id."""
    text = str(value).strip()
    return str(int(text)) if text.isdigit() else text


_PROMPT_FILE = re.compile(r"^dialogue_prompt_\d+_(immediate|long_term)_c[^_]+_s(.+)\.txt$")


def _prompts(root: Path) -> dict[str, dict[ResponseType, str]]:
    """The release's own open-ended prompt per scenario and response type (`dialogue_prompt/`), when shipped."""
    prompts: dict[str, dict[ResponseType, str]] = {}
    for folder in (root / "dialogue_prompt", root / "dialogue_prompts"):
        for path in sorted(folder.glob("*.txt")):
            found = _PROMPT_FILE.match(path.name)
            text = read_input_bytes(path, "TutorCaseBench prompt file").decode("utf-8", errors="replace").strip()
            if found and text:
                response: ResponseType = "immediate" if found.group(1) == "immediate" else "long_term"
                prompts.setdefault(_id(found.group(2)), {})[response] = text
    return prompts


def _mcq_problem(raw: _PublicMCQ, response: ResponseType | None) -> str:
    if raw.scenario_id is None:
        return "MCQ without a scenario"
    if response is None:
        return "MCQ of an unknown response type"
    if raw.correct_answer.strip() not in raw.options:
        return "MCQ whose answer is not an option"
    return ""


def _mcqs(root: Path, intake: Intake) -> dict[str, list[FixedMCQ]]:
    """Each scenario's MCQs, leaving out (and counting) those whose scenario, response type or answer cannot be
    told."""
    mcqs: dict[str, list[FixedMCQ]] = {}
    for path in sorted((root / "mcq").glob("*.json")):
        raw = _parse(_PublicMCQ, path)
        response = _mcq_response(raw)
        letters = sorted(raw.options)
        problem = _mcq_problem(raw, response)
        if problem or response is None:
            intake.skip(problem)
            continue
        mcqs.setdefault(_id(str(raw.scenario_id)), []).append(
            FixedMCQ(
                id=str(raw.mcq_id),
                response=response,
                options=[raw.options[letter].strip() or "(empty option)" for letter in letters],
                correct=letters.index(raw.correct_answer.strip()),
            )
        )
    return mcqs


def _strategies(fixed: Sequence[FixedMCQ]) -> Strategies:
    """The right option of every MCQ is effective; the wrong one of a binary MCQ is ineffective."""
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
    return Strategies(
        immediate_effective=effective["immediate"],
        long_term_effective=effective["long_term"],
        ineffective=ineffective,
    )


def _case(
    scenario: _PublicScenario,
    rubrics: dict[ResponseType, _PublicRubric],
    fixed: list[FixedMCQ],
    prompts: dict[ResponseType, str],
) -> Case:
    content = scenario.full_context.content if scenario.full_context else _PublicContent()
    described = next((r.student_description.strip() for r in rubrics.values() if r.student_description.strip()), "")
    return Case(
        id=f"tcb-{scenario.scenario_id}",
        title=scenario.scenario_title.strip() or scenario.category_title.strip() or f"case {scenario.scenario_id}",
        challenge_type=normalise_challenge(scenario.challenge_type),
        student=StudentPersona(description=described or "(not described)"),
        minimal_context=scenario.minimal_context,
        full_context=FullContext(
            task=content.task,
            context=content.context,
            trigger=content.challenging_behavior_trigger,
            behavior_patterns=list(content.behavior_patterns),
        ),
        dialogue=_public_dialogue(scenario.dialogue),
        strategies=_strategies(fixed),
        rubrics={response: _criteria(rubric) for response, rubric in rubrics.items()},
        mcqs=fixed,
        prompts=prompts,
        source="tutorcasebench",
        student_key=f"category:{scenario.category_id}",
        family=f"paper:{_family(scenario)}",
    )


def load_tutorcasebench(root: Path, intake: Intake | None = None) -> list[Case]:
    """Cases from a checkout of the public release: `dialogue_full_context/` (or `dialogue/`), `rubric/`, `mcq/`,
    and `dialogue_prompt/` when present.

    A scenario is kept when its category has a rubric for at least one response type (a response type without
    one is skipped by the open task); the release's own prompt for a scenario and response type, when shipped,
    is what the tutor reads. MCQs whose scenario or response type cannot be told are left out; the rest become
    the case's `mcqs` and, through their options, its strategies. Everything left out is counted by reason in
    `intake`. Every case records its student (the category: sibling scenarios share the category's rubric)
    and family (the source paper), so retrieval can keep a case's siblings out of its references.
    """
    if not root.is_dir():
        raise ScenarioError(f"{root}: expected the TutorCaseBench folder (with dialogue/, rubric/, mcq/)")
    folder = root / "dialogue_full_context"
    if not folder.is_dir():
        folder = root / "dialogue"
    if not folder.is_dir():
        raise ScenarioError(f"{root}: no dialogue_full_context/ or dialogue/ folder: not a TutorCaseBench checkout")
    intake = intake if intake is not None else Intake()
    rubrics, mcqs, prompts = _rubrics(root, intake), _mcqs(root, intake), _prompts(root)
    cases: list[Case] = []
    for path in sorted(folder.glob("*.json")):
        scenario = _parse(_PublicScenario, path)
        intake.read = (intake.read or 0) + 1
        category = _id(scenario.category_id)
        found = {r: rubrics[(category, r)] for r in get_args(ResponseType) if (category, r) in rubrics}
        if not found:
            intake.skip("scenario whose category has no rubric")
            continue
        key = _id(scenario.scenario_id)
        try:
            cases.append(_case(scenario, found, mcqs.get(key, []), prompts.get(key, {})))
        except (ValidationError, ValueError) as exc:
            detail = validation_problems(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ScenarioError(f"{path}: cannot read this scenario as a case: {detail}") from None
    if not cases:
        raise ScenarioError(f"{root}: no scenario with a rubric was found")
    return cases
