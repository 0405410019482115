"""A challenging-behaviour case as types (after TutorCaseBench), and the loader of the team's own `cases.yaml`."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from engine import ScenarioError, load_yaml_file

__all__ = (
    "BUILTIN_FILE",
    "CHALLENGE_TYPES",
    "RESPONSE_TYPES",
    "Case",
    "CaseFile",
    "ChallengeType",
    "Criterion",
    "DialogueTurn",
    "FixedMCQ",
    "FullContext",
    "ResponseType",
    "Strategies",
    "StudentPersona",
    "builtin_cases",
    "load_cases",
    "validation_problems",
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

BUILTIN_FILE = Path(__file__).with_name("cases.yaml")
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Key = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


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
    prompts: dict[ResponseType, str] = Field(default_factory=dict)
    """A dataset's own open-ended prompt per response type (the TutorCaseBench release ships one per scenario),
    read by the tutor instead of simrun's when there are no references to add."""
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


def validation_problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
    )


def load_cases(path: Path) -> list[Case]:
    """simrun's own case file (`cases: [...]`, the layout of `personas/cases.yaml`)."""
    data = load_yaml_file(path, "case file")
    try:
        return list(CaseFile.model_validate(data, strict=False).cases)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: invalid case file: {validation_problems(exc)}") from None


@cache
def builtin_cases() -> tuple[Case, ...]:
    """The team's own cases (`personas/cases.yaml`), read once per process."""
    return tuple(load_cases(BUILTIN_FILE))
