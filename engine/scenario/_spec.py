"""The scenario schema: strict, frozen pydantic models that YAML and code compile to."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from engine.scenario._budget import Price
from engine.scenario._stopping import StoppingSpec

__all__ = (
    "BASE_URL_ENV",
    "LABEL_PATTERN",
    "MAX_EPISODES",
    "DesignSpec",
    "ExecutorSpec",
    "measured",
    "ItemSourceSpec",
    "JudgeSpec",
    "ModelSpec",
    "ModelsSpec",
    "Scenario",
    "StudentSpec",
    "TutorSpec",
)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PluginSpec(BaseModel):
    """A plug-in reference whose extra keys are that plug-in's own options (validated by the plug-in)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


BASE_URL_ENV: Final = "OPENAI_BASE_URL"
"""Endpoint of `openai/...` models that set no `base_url`, read when the scenario is loaded (both transports)."""
MAX_EPISODES: Final = 200_000
"""Default cap on the size of a plan (`max_episodes`, `--max-episodes`), so a typo cannot plan forever."""
_MAX_RATE: Final = 1e9
LABEL_PATTERN: Final = r"^[A-Za-z0-9_.+-]{1,32}$"


def _short_form(key: str, data: Any) -> Any:
    return {key: data} if isinstance(data, str) else data


class _ShortForm(BaseModel):
    """A spec that YAML may give as just its `short_key` value: `harm` stands for `{name: harm}`."""

    short_key: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return _short_form(cls.short_key, data)


def _check_base_url(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise ValueError("expected an http:// or https:// URL with a host, e.g. http://localhost:8000/v1")
    return url


class ModelSpec(_Spec):
    """One model endpoint for a role. `openai/<model>` reaches any OpenAI-compatible server via `base_url`."""

    short_key: ClassVar[str] = "model"

    model: str = Field(pattern=r"^[A-Za-z0-9_.-]+/.+$", max_length=256)
    """`provider/model`, e.g. `openai/gpt-4o-mini` or `sim/tutor`."""
    base_url: str | None = None
    """Endpoint root, e.g. `http://localhost:8000/v1` for vLLM or `http://localhost:11434/v1` for Ollama."""
    api_key_env: str | None = None
    """Environment variable that holds the key (each provider names its default). Keys never go in files."""
    rpm: float | None = Field(default=None, ge=1, le=_MAX_RATE)
    """Requests per minute allowed on this endpoint, shared by every conversation that uses it (at least 1)."""
    tpm: float | None = Field(default=None, ge=1, le=_MAX_RATE)
    """Tokens per minute allowed on this endpoint (at least 1)."""
    max_concurrency: int | None = Field(default=None, ge=1, le=100_000)
    """Requests in flight at once on this endpoint."""
    timeout_s: float = Field(default=60.0, gt=0, le=86_400)
    """Per-attempt timeout (at most a day)."""
    max_retries: int = Field(default=5, ge=0, le=100)
    """Retries of timeouts, connection errors, 408/409/429/5xx (the SDK's own retries are always off)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Generation parameters (`temperature`, `max_tokens`, ...); for `sim/...` the simulator's knobs."""
    transport: Literal["sdk", "lean"] = "sdk"
    """How `openai/...` talks HTTP: the official SDK, or the lean aiohttp path (a fraction of its CPU per call)."""
    structured_output: Literal["json_schema", "json_object"] = "json_schema"
    """How a call that needs a given JSON shape (a judge's verdict) asks for it: the shape's own schema, strict,
    or, for a server without structured outputs, any JSON object; the reply is validated either way."""
    label: str | None = Field(default=None, pattern=LABEL_PATTERN)
    """A tutor's short name in a study of several tutors (records, tables, episode ids); default: the model's name."""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        data = _short_form("model", data)
        # The SDK reads OPENAI_BASE_URL itself and the lean transport would not: resolve it once, here.
        if isinstance(data, dict) and str(data.get("model", "")).startswith("openai/") and not data.get("base_url"):
            env = os.environ.get(BASE_URL_ENV)
            if env:
                data = {**data, "base_url": env}
        return data

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        return _check_base_url(url)

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.model.split("/", 1)[1]


class ModelsSpec(_Spec):
    """Models by role. Several judge models vote in turn; one judge model is asked `judge_votes` times.

    `tutor` may be a list of labelled specs: a study of several tutors, each meeting the same plan."""

    tutor: Annotated[
        Annotated[ModelSpec, Tag("One")] | Annotated[list[ModelSpec], Tag("Many")],
        Discriminator(lambda value: "Many" if isinstance(value, list) else "One"),
    ]
    student: ModelSpec | None = None
    judge: list[ModelSpec] = Field(default_factory=list)
    decoding: dict[Literal["tutor", "student", "judge"], dict[str, Any]] = Field(default_factory=dict)
    """A protocol's decoding per role (e.g. a paper's `temperature`, `max_tokens`), applied to every model of the
    role that is a real endpoint (its own `params` win); the deterministic sim honours `temperature: 0` only and
    says what it refuses (`decoding_refused`)."""

    @property
    def tutors(self) -> list[ModelSpec]:
        """The tutors under test, in the scenario's order (one for an ordinary scenario)."""
        return list(self.tutor) if isinstance(self.tutor, list) else [self.tutor]

    @property
    def tutor_labels(self) -> tuple[str, ...] | None:
        """Each tutor's label when the scenario is a study of several tutors, or of one that is given a `label`
        (a part of a study run separately, to be joined by `simrun compare --tutors`); else None, and ids, seeds and
        records stay as they were."""
        if not isinstance(self.tutor, list):
            return None if self.tutor.label is None else (self.tutor.label,)
        return tuple(spec.label or spec.name for spec in self.tutor)

    def labelled_tutors(self) -> list[tuple[str | None, ModelSpec]]:
        labels = self.tutor_labels
        return list(zip(labels, self.tutors, strict=True)) if labels else [(None, self.tutors[0])]

    @field_validator("tutor")
    @classmethod
    def _distinct_labels(cls, tutor: ModelSpec | list[ModelSpec]) -> ModelSpec | list[ModelSpec]:
        if not isinstance(tutor, list):
            return tutor
        if not tutor:
            raise ValueError("a list of tutors needs at least one model")
        labels = [spec.label or spec.name for spec in tutor]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(
                f"tutors share the label {', '.join(map(repr, repeated))}: give each a distinct `label` "
                "(letters, digits, _ . + -; at most 32)"
            )
        bad = [label for label in labels if not re.match(LABEL_PATTERN, label)]
        if bad:
            raise ValueError(f"tutor model name {bad[0]!r} cannot serve as a label: give it a `label`")
        return tutor

    def by_role(self) -> list[tuple[str, ModelSpec]]:
        """Every model of the scenario with its role, judges once each, the role's decoding applied."""
        found = [("tutor", spec) for spec in self.tutors]
        if self.student is not None:
            found.append(("student", self.student))
        found.extend(("judge", spec) for spec in self.judge)
        return [(role, self._decoded(role, spec)) for role, spec in found]

    def _decoded(self, role: str, spec: ModelSpec) -> ModelSpec:
        wanted = self._decoding().get(role)
        if not wanted or spec.provider == "sim":
            return spec
        return spec.model_copy(update={"params": {**wanted, **spec.params}})

    def _decoding(self) -> dict[str, dict[str, Any]]:
        return {str(role): params for role, params in self.decoding.items()}

    def decoding_refused(self) -> list[str]:
        """What the sim cannot honour of the decoding: it is deterministic, so only a temperature of 0."""
        refused = []
        for role, spec in (
            *(("tutor", t) for t in self.tutors),
            ("student", self.student),
            *(("judge", j) for j in self.judge),
        ):
            wanted = self._decoding().get(role, {}) if spec is not None and spec.provider == "sim" else {}
            dropped = {k: v for k, v in wanted.items() if not (k == "temperature" and v == 0)}
            if dropped:
                settings = ", ".join(f"{k}={v}" for k, v in sorted(dropped.items()))
                refused.append(
                    f"{spec.model if spec else role} ({role}) cannot honour {settings}: the sim is deterministic "
                    "and writes its own replies; it runs without them (a real endpoint applies them)"
                )
        return refused

    def by_named_role(self) -> list[tuple[str, ModelSpec]]:
        """`by_role` with each tutor of a study of several named `tutor LABEL`: the roles of a cost estimate."""
        labels = self.tutor_labels
        if labels is None:
            return self.by_role()
        return [(f"tutor {label}", spec) for label, spec in zip(labels, self.tutors, strict=True)] + [
            (role, spec) for role, spec in self.by_role() if role != "tutor"
        ]

    @field_validator("judge", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | dict) else value


class TutorSpec(_PluginSpec):
    """The tutor agent (`model`: a model with a system-prompt template) and its options."""

    agent: str = "model"


class StudentSpec(_PluginSpec):
    """The student strategy (`scripted`, `crescendo`, ...) and its options."""

    strategy: str


class JudgeSpec(_PluginSpec, _ShortForm):
    """A judge by name, with its options. `harm` in YAML is short for `{name: harm}`."""

    short_key: ClassVar[str] = "name"

    name: str


class DesignSpec(_PluginSpec, _ShortForm):
    """A condition generator by name (e.g. `demographic`), with its options; crossed with `factors`. Its
    `stopping` (not a generator option) makes the run sequential; a design may have it and no `name`."""

    short_key: ClassVar[str] = "name"

    name: str | None = None
    stopping: StoppingSpec | None = None
    """Stop when the declared questions are settled (see `engine.scenario._stopping`); absent: fixed sample."""


class ExecutorSpec(_Spec, _ShortForm):
    """Where episodes are played: `local` (this process) or `ray` (actors of a Ray cluster). `ray` in YAML is
    short for `{name: ray}`. Operational: it is not part of the scenario hash, so a run may be resumed on either."""

    short_key: ClassVar[str] = "name"

    name: Literal["local", "ray"] = "local"
    address: str | None = None
    """Ray cluster to join: `auto` (the one `ray start` started here), `ray://HEAD:10001`, or none for a local one."""
    workers: int | None = Field(default=None, ge=1, le=10_000)
    """Ray worker actors (default: one per CPU of the cluster)."""


class ItemSourceSpec(_PluginSpec):
    """Where items come from: `{source: bank, path: items/stem.yaml}`; paths are relative to the scenario, or
    `data:FOLDER/FILE` in the data directory, or `package:PACKAGE/FILE` inside an installed package."""

    source: str
    path: str


_OPERATIONAL = frozenset({"concurrency", "cache", "description", "prices", "max_episodes", "executor", "data_dir"})
_OPERATIONAL_MODEL = frozenset({"rpm", "tpm", "max_concurrency", "timeout_s", "max_retries"})


def measured(resolved: dict[str, Any]) -> dict[str, Any]:
    """A resolved scenario without the settings that change how fast or how safely it runs but not what it
    measures (concurrency, cache, rate limits, timeouts, retries, prices), so a run can be resumed with them
    changed — e.g. a lower `rpm` after a storm of 429s."""
    data = {k: v for k, v in resolved.items() if k not in _OPERATIONAL}
    models = dict(data.get("models") or {})
    for role, spec in models.items():
        specs = spec if isinstance(spec, list) else [spec]
        kept = [
            {k: v for k, v in s.items() if k not in _OPERATIONAL_MODEL and not (k == "label" and v is None)}
            if isinstance(s, dict)
            else s
            for s in specs
        ]
        models[role] = kept if isinstance(spec, list) else kept[0]
    data["models"] = models
    return data


class Scenario(_Spec):
    """A runnable experiment: items × conditions × replicates, each episode a dialogue that gets judged."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str
    """The registered dialogue protocol and summariser, e.g. `crescendo`."""
    description: str = ""
    seed: int = Field(default=0, ge=0, lt=2**63)
    """Run seed; every episode's seed derives from it and the episode id."""
    concurrency: int = Field(default=32, ge=1, le=100_000)
    """Episodes in flight at once."""
    replicates: int = Field(default=1, ge=1)
    limit: int | None = Field(default=None, ge=1)
    """Run only the first N planned episodes."""
    max_episodes: int = Field(default=MAX_EPISODES, ge=1)
    """Largest plan accepted; raise it (`--max-episodes`) to run a bigger one on purpose."""
    models: ModelsSpec
    items: list[ItemSourceSpec] = Field(min_length=1)
    factors: dict[str, list[str]] = Field(default_factory=dict)
    """Condition factors and their levels; episodes cross them with the items."""
    design: DesignSpec | None = None
    """Generates conditions that are not a plain cross product (e.g. demographic cues, paired by item)."""
    tutor: TutorSpec = Field(default_factory=lambda: TutorSpec())
    student: StudentSpec
    judges: list[JudgeSpec] = Field(default_factory=list)
    judge_votes: int = Field(default=3, ge=1, le=99)
    """Votes per judgment, combined by majority (the votes are kept in the record)."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """USD per million tokens by model spec, e.g. `{openai/my-model: {input: 0.5, output: 1.5}}`, for
    `--max-cost`; common OpenAI models have built-in list prices and `sim/...` is free."""
    cache: bool | str = False
    """Answer repeated model calls from the response cache: `true` (the default file) or a file path, relative to
    the scenario. It changes how results are obtained, not what they are, so it is not part of the scenario hash."""

    data_dir: str | None = None
    """Folder of downloaded public datasets that `data:FOLDER/FILE` item paths name, relative to the scenario
    (`--data-dir`; default $SIMRUN_DATA). Where the data sits is not what a run measures: not in the hash."""

    executor: ExecutorSpec = Field(default_factory=lambda: ExecutorSpec())
    """Where episodes are played (`local` or `ray`); like `concurrency`, not part of the scenario hash."""

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source: str = PrivateAttr(default="")

    @field_validator("factors")
    @classmethod
    def _levels_present(cls, factors: dict[str, list[str]]) -> dict[str, list[str]]:
        for factor, levels in factors.items():
            if not levels:
                raise ValueError(f"factor {factor!r} has no levels")
            if len(set(levels)) != len(levels):
                raise ValueError(f"factor {factor!r} repeats a level")
        return factors

    @field_validator("cache")
    @classmethod
    def _cache_path_present(cls, cache: bool | str) -> bool | str:
        if isinstance(cache, str) and not cache.strip():
            raise ValueError("expected true, false or a file path")
        return cache

    @property
    def base_dir(self) -> Path:
        """Folder that relative paths in the scenario are resolved against."""
        return self._base_dir

    def with_base_dir(self, base_dir: Path, source: str = "") -> Scenario:
        scenario = self.model_copy()
        scenario._base_dir = base_dir
        scenario._source = source or self._source
        return scenario

    @property
    def source(self) -> str:
        """The scenario file as it was named when loaded ("" when built from data), so a report can say which
        file produced it."""
        return self._source

    def resolved(self) -> dict[str, Any]:
        """The scenario as plain JSON data (secrets never live here: keys are only named, by variable)."""
        return self.model_dump(mode="json")

    def content_hash(self) -> str:
        """Identity of what the run measures (see `measured`), the key a resume is checked against."""
        return hashlib.sha256(orjson.dumps(measured(self.resolved()), option=orjson.OPT_SORT_KEYS)).hexdigest()
