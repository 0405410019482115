"""The demographic personas' data: the dimensions, levels and sentences, the name sets and the opposite design's
self-statements, read from `demographics.yaml` (or a user's file) and validated once per file version."""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from engine import ScenarioError, load_yaml_file

__all__ = (
    "BASELINE",
    "Baseline",
    "Channel",
    "DemographicDimension",
    "DemographicLevel",
    "Demographics",
    "NamePool",
    "Names",
    "Opposite",
    "channel_dimensions",
    "demographics",
    "demographics_for",
    "load_demographics",
)

_BUILTIN_FILE = Path(__file__).with_name("demographics.yaml")
BASELINE = ("baseline", "none")
"""The (dimension, level) of the no-cue condition."""

Key = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Channel = Literal["explicit", "implicit", "opposite"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DemographicLevel(_Model):
    sentences: list[Text] = Field(min_length=1)
    """Interchangeable framing sentences for the tutor; an episode uses one, chosen by its seed."""


class DemographicDimension(_Model):
    description: str = ""
    levels: dict[Key, DemographicLevel] = Field(min_length=1)


class Baseline(_Model):
    sentences: list[Text] = Field(default_factory=list)
    """Neutral framings for the no-cue condition; empty means the cue is ""."""


class NamePool(_Model):
    """The names of one ethnicity: given names per gender, and optionally surnames."""

    surnames: list[Text] = Field(default_factory=list)
    """Empty: the student is named by a given name alone (as EduFair's four-name design does)."""
    given: dict[Key, list[Text]] = Field(min_length=1)

    @field_validator("given")
    @classmethod
    def _non_empty(cls, given: dict[str, list[str]]) -> dict[str, list[str]]:
        for gender, names in given.items():
            if not names:
                raise ValueError(f"gender {gender!r} lists no given names")
        return given


class Names(_Model):
    ethnicities: dict[Key, NamePool] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_genders(self) -> Names:
        first, *rest = self.ethnicities.items()
        for ethnicity, pool in rest:
            if set(pool.given) != set(first[1].given):
                raise ValueError(
                    f"every ethnicity must list the same genders: {first[0]!r} has {sorted(first[1].given)}, "
                    f"{ethnicity!r} has {sorted(pool.given)}"
                )
        return self

    @property
    def genders(self) -> list[str]:
        return list(next(iter(self.ethnicities.values())).given)

    def pool(self, gender: str, ethnicity: str) -> tuple[list[str], list[str]]:
        """(given names, surnames) of one gender × ethnicity group."""
        pool = self.ethnicities[ethnicity]
        return pool.given[gender], pool.surnames


class Opposite(_Model):
    dimension: Key = "gender"
    """The explicit dimension the 2×2 mismatch design is built on; its sentences are the tutor-perceived side."""
    self_stated: dict[Key, list[Text]]
    """Per level of that dimension, first-person lines the simulated student holds about itself."""


class Demographics(_Model):
    """A demographics file: the explicit dimensions, the baseline, names, the opposite design and the student."""

    dimensions: dict[Key, DemographicDimension] = Field(min_length=1)
    baseline: Baseline = Field(default_factory=Baseline)
    names: Names | None = None
    opposite: Opposite | None = None
    student_profile: Text

    @model_validator(mode="after")
    def _consistent(self) -> Demographics:
        if BASELINE[0] in self.dimensions:
            raise ValueError(f"{BASELINE[0]!r} is reserved for the no-cue condition; rename that dimension")
        for name in self.dimensions:
            if "+" in name:
                raise ValueError(f"dimension {name!r}: '+' is reserved for stacked dimensions")
        if self.opposite is not None:
            dimension = self.dimensions.get(self.opposite.dimension)
            if dimension is None:
                raise ValueError(
                    f"opposite.dimension {self.opposite.dimension!r} is not a dimension; "
                    f"known: {', '.join(self.dimensions)}"
                )
            if set(self.opposite.self_stated) != set(dimension.levels):
                raise ValueError(
                    f"opposite.self_stated must give lines for exactly the levels of {self.opposite.dimension!r} "
                    f"({', '.join(dimension.levels)}), got {', '.join(self.opposite.self_stated) or 'none'}"
                )
            for level, lines in self.opposite.self_stated.items():
                if not lines:
                    raise ValueError(f"opposite.self_stated.{level} lists no lines")
        return self


def load_demographics(path: str | Path) -> Demographics:
    """Read and validate a demographics YAML file (the built-in one's layout); errors are `ScenarioError`s."""
    path = Path(path)
    data = load_yaml_file(path, "demographics file")
    try:
        return Demographics.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"  {'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors(include_url=False)
        ]
        raise ScenarioError("\n".join([f"{path}: invalid demographics file:", *problems])) from None


@cache
def demographics() -> Demographics:
    """The built-in demographics (4 dimensions, 9 levels, 6 ethnicities of names), read once."""
    return load_demographics(_BUILTIN_FILE)


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> Demographics:
    return load_demographics(path)


def _names_path(file: str) -> Path:
    """A names file: absolute, relative to the working directory, or one shipped next to this module."""
    path = Path(file).expanduser()
    if not path.is_absolute() and not path.exists() and (_BUILTIN_FILE.parent / path).exists():
        return (_BUILTIN_FILE.parent / path).resolve()
    return path.resolve()


@lru_cache(maxsize=16)
def _load_names(path: str, mtime_ns: int, size: int) -> Names:
    try:
        return Names.model_validate(load_yaml_file(path, "names file"))
    except ScenarioError as exc:
        raise ValueError(str(exc)) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ValueError(f"{path}: invalid names file: {problems}") from None


def demographics_for(file: str | None, names: str | None = None) -> Demographics:
    """The built-in data or a user's file (relative paths start at the working directory), with its name set
    replaced by a names-only file when `names` is given (ValueError if unusable)."""
    data = _demographics_file(file)
    if names is None:
        return data
    path = _names_path(names)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise ValueError(
            f"no such names file {str(path)!r} (relative paths start at the working directory, then personas/)"
        ) from None
    return data.model_copy(update={"names": _load_names(str(path), stat.st_mtime_ns, stat.st_size)})


def _demographics_file(file: str | None) -> Demographics:
    if file is None:
        return demographics()
    path = Path(file).expanduser().resolve()
    try:
        stat = path.stat()
        return _load_cached(str(path), stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        raise ValueError(
            f"no such demographics file {str(path)!r} (relative paths start at the working directory)"
        ) from None
    except ScenarioError as exc:
        raise ValueError(str(exc)) from None


def channel_dimensions(data: Demographics, channel: str) -> dict[str, list[str]]:
    """The dimensions a channel offers and their levels (for `dimensions` and `levels` options)."""
    if channel == "explicit":
        return {name: list(dimension.levels) for name, dimension in data.dimensions.items()}
    if channel == "implicit":
        if data.names is None:
            return {}
        genders, ethnicities = data.names.genders, list(data.names.ethnicities)
        offered = {"name_gender": genders, "name_ethnicity": ethnicities}
        if len(ethnicities) >= len(genders):
            offered["name_both"] = list(genders)
        return offered
    if data.opposite is None:
        return {}
    levels = list(data.dimensions[data.opposite.dimension].levels)
    return {f"{data.opposite.dimension}_mismatch": [f"{s}/{p}" for s in levels for p in levels]}


# ---------------------------------------------------------------------------------------------- templates
