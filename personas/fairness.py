"""Demographic personas as data, and the `demographic` design that turns them into paired fairness conditions.

Why a design and not plain factors: a fairness audit compares the *same* dialogue under different demographic
cues, so every condition of an item must share the student's seed and turn budget, and each episode needs to
know its own cue sentence, name or self-statement. The data (dimensions, levels, sentences, names, the fixed
student) lives in `demographics.yaml` so users extend it without code; see that file's header for its layout.

Channels (the `channel` option), after EduFair-Bench:

* `explicit`: one demographic sentence in the tutor's framing; one dimension per dialogue (`dimension: ses,
  level: low_income`), or several crossed with `stack` (`dimension: gender+ses, level: female+low_income`).
* `implicit`: only a name reaches the tutor; dimensions `name_gender` (genders, ethnicity held fixed within an
  item), `name_ethnicity` (ethnicities, gender held fixed within an item) and `name_both` (genders again, but
  each gender's name comes from a different ethnicity within an item: names that differ in both, paired per
  item, as EduFair's "Both" contrast). The held value, and the ethnicities of a `name_both` pair, rotate over
  items from the item's seed unless pinned with `hold_ethnicity` / `hold_gender`. A name set may list given
  names only (no surnames); `names` replaces the data file's name set with a names-only file.
* `opposite`: the 2×2 mismatch design: `dimension: gender_mismatch, level: <stated>/<perceived>`, plus the keys
  `student_gender` and `perceived_gender` (named after the YAML's `opposite.dimension`).

Every channel can add one `dimension: baseline, level: none` condition without any cue (on by default for
explicit and implicit; off by default for opposite, whose four cells are compared with each other).

Condition keys: `channel`, `dimension`, `level` (+ `student_<d>`, `perceived_<d>` for opposite, `"none"` in its
baseline). Crossed levels join their parts with "+" in the order of the dimension name's parts.

Pairing decision: `paired_factors` holds *every* key the design adds (`channel`, `dimension`, `level`, and the
opposite keys), so all conditions of one (item, replicate) share one seed, baseline included: the student's
seed, the turn budget, the sentence variant and the name index are identical across the levels of a dimension,
across dimensions and against the baseline. Only the cue differs.

Episode extras (stable keys; the tutor's system-prompt template sees them as variables, the student strategy
and the records' `meta` get them too; all JSON-safe):

* `cue` (str): the framing sentence(s) for the tutor ("" for the baseline and the implicit channel with the
  default template); with the `template` option, that template rendered for every condition, baseline included.
* `student_name` (str | None): the implicit channel's name ("Given Surname", or "Given" when the name set
  lists no surnames), else None.
* `student_self` (str): the student's self-stated line in the opposite channel, else "".
* `student_profile` (str): the fixed simulated student's system prompt (no demographic cue), from the data file.
* `demographic` (dict[str, str]): what the condition signals: `{dimension: level}` for explicit (both parts for
  a stack), `{"gender": .., "ethnicity": ..}` of the name for implicit, `{"student_gender": ..,
  "perceived_gender": ..}` for opposite, `{}` for the baseline.

Which sentence variant an episode uses is `seed_for("cue", k) % len(variants)` (k = position in a stack), which
levels of a dimension share: with equally many variants, paired episodes get the same variant index. Names work
the same way: `seed_for("name", "given")` and `seed_for("name", "surname")` pick the i-th given name and j-th
surname of the level's group, so a gender contrast reads e.g. "Emily Walsh" vs "Connor Walsh".
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from engine import DESIGNS, Episode, ScenarioError, check_template, derive_seed, render

from .demographic_data import (
    BASELINE,
    Baseline,
    Channel,
    DemographicDimension,
    DemographicLevel,
    Demographics,
    NamePool,
    Names,
    Opposite,
    channel_dimensions,
    demographics,
    demographics_for,
    load_demographics,
)

__all__ = (
    "BASELINE",
    "TEMPLATE_VARIABLES",
    "Baseline",
    "DemographicDesign",
    "DemographicDimension",
    "DemographicLevel",
    "Demographics",
    "FairnessAnalysis",
    "NamePool",
    "Names",
    "Opposite",
    "channel_dimensions",
    "demographics",
    "load_demographics",
)

TEMPLATE_VARIABLES = ("channel", "dimension", "level", "demographic", "sentence", "sentences", "student_name", "domain")
"""What the `template` option may refer to."""


class FairnessAnalysis(BaseModel):
    """How a fairness run turns its contrasts into findings (`design.analysis` in the scenario)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    correction: Literal["bh", "holm", "bonferroni", "none"] = "bh"
    """p adjustment over the family: Benjamini–Hochberg (default), Holm, Bonferroni, or none."""
    q: float = Field(default=0.05, gt=0, lt=1)
    """A contrast is a finding when its adjusted p ≤ q."""
    family: Literal["run", "domain"] = "run"
    """Which contrasts are corrected together: every contrast of the run (default), or each domain cell alone."""
    omnibus_alpha: float = Field(default=0.10, gt=0, le=1)
    """Friedman p below which a multi-level dimension's pairs can be findings (EduFair's gate); the pairs count in
    the family either way."""
    bootstrap: int = Field(default=10_000, ge=10_000)
    """Resamples behind every interval a table reports."""


def _render(source: str, variables: Mapping[str, Any]) -> str:
    check_template(source, allowed=TEMPLATE_VARIABLES)
    return render(source, variables)


# ---------------------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class _Selection:
    """The options that decide which conditions exist (shared by option validation and the design)."""

    channel: str
    dimensions: list[str] | None
    levels: dict[str, list[str]] | None
    stack: list[str] | None
    baseline: bool | None
    hold_gender: str | None
    hold_ethnicity: str | None


_SELECTION_FIELDS = tuple(f.name for f in dataclasses.fields(_Selection))


@dataclass(frozen=True)
class _Cell:
    """One condition and what its episodes are told."""

    condition: dict[str, str]
    demographic: dict[str, str] = dataclasses.field(default_factory=dict)
    cues: tuple[tuple[str, ...], ...] = ()
    """Variant lists of the tutor's sentences, one list per stacked part."""
    selfs: tuple[str, ...] = ()
    """The student's self-stated variants (opposite channel)."""
    name: tuple[str | None, str | None] | None = None
    """(gender, ethnicity) of the implicit name; None parts rotate with the item's seed."""
    both: bool = False
    """`name_both`: each gender level takes a different ethnicity, drawn per item (seed shared by the levels)."""


def _opposite_keys(data: Demographics) -> tuple[str, str]:
    dimension = data.opposite.dimension if data.opposite is not None else "gender"
    return f"student_{dimension}", f"perceived_{dimension}"


def _cells(data: Demographics, sel: _Selection) -> list[_Cell]:
    offered = channel_dimensions(data, sel.channel)
    chosen = sel.dimensions if sel.dimensions is not None else ([] if sel.stack else list(offered))
    levels = {name: (sel.levels or {}).get(name, offered[name]) for name in offered}
    channel = {"channel": sel.channel}
    cells: list[_Cell] = []
    baseline = sel.baseline if sel.baseline is not None else sel.channel != "opposite"
    if baseline:
        condition = {**channel, "dimension": BASELINE[0], "level": BASELINE[1]}
        if sel.channel == "opposite":
            condition.update(dict.fromkeys(_opposite_keys(data), "none"))
        cells.append(_Cell(condition, cues=(tuple(data.baseline.sentences),) if data.baseline.sentences else ()))
    if sel.channel == "explicit":
        for name in chosen:
            for level in levels[name]:
                sentences = tuple(data.dimensions[name].levels[level].sentences)
                condition = {**channel, "dimension": name, "level": level}
                cells.append(_Cell(condition, {name: level}, (sentences,)))
        if sel.stack:
            for combo in itertools.product(*(levels[name] for name in sel.stack)):
                condition = {**channel, "dimension": "+".join(sel.stack), "level": "+".join(combo)}
                cues = tuple(
                    tuple(data.dimensions[n].levels[lv].sentences) for n, lv in zip(sel.stack, combo, strict=True)
                )
                cells.append(_Cell(condition, dict(zip(sel.stack, combo, strict=True)), cues))
    elif sel.channel == "implicit":
        for name in chosen:
            for level in levels[name]:
                condition = {**channel, "dimension": name, "level": level}
                if name == "name_gender":
                    group: tuple[str | None, str | None] = (level, sel.hold_ethnicity)
                elif name == "name_ethnicity":
                    group = (sel.hold_gender, level)
                else:
                    group = (level, None)
                cells.append(_Cell(condition, name=group, both=name == "name_both"))
    else:
        assert data.opposite is not None
        stated_key, perceived_key = _opposite_keys(data)
        dimension = data.dimensions[data.opposite.dimension]
        for name in chosen:
            for level in levels[name]:
                stated, _, perceived = level.partition("/")
                condition = {**channel, "dimension": name, "level": level, stated_key: stated, perceived_key: perceived}
                cells.append(
                    _Cell(
                        condition,
                        {stated_key: stated, perceived_key: perceived},
                        (tuple(dimension.levels[perceived].sentences),),
                        tuple(data.opposite.self_stated[stated]),
                    )
                )
    return cells


def _pick(options: tuple[str, ...] | list[str], seed: int) -> str:
    return options[seed % len(options)]


def _extras(
    cell: _Cell,
    data: Demographics,
    seed_for: Callable[..., int],
    *,
    domain: str,
    template: str | None,
) -> dict[str, Any]:
    sentences = [_pick(variants, seed_for("cue", k)) for k, variants in enumerate(cell.cues)]
    demographic = dict(cell.demographic)
    student_name: str | None = None
    if cell.name is not None and data.names is not None:
        gender, ethnicity = cell.name
        gender = gender or _pick(data.names.genders, seed_for("hold", "gender"))
        ethnicities = list(data.names.ethnicities)
        if cell.both:
            drawn = random.Random(seed_for("both", "ethnicities")).sample(ethnicities, len(data.names.genders))
            ethnicity = drawn[data.names.genders.index(gender)]
        ethnicity = ethnicity or _pick(ethnicities, seed_for("hold", "ethnicity"))
        given, surnames = data.names.pool(gender, ethnicity)
        student_name = _pick(given, seed_for("name", "given"))
        if surnames:
            student_name += f" {_pick(surnames, seed_for('name', 'surname'))}"
        demographic = {"gender": gender, "ethnicity": ethnicity}
    sentence = " ".join(sentences)
    cue = sentence
    if template is not None:
        cue = _render(
            template,
            {
                "channel": cell.condition["channel"],
                "dimension": cell.condition["dimension"],
                "level": cell.condition["level"],
                "demographic": demographic,
                "sentence": sentence,
                "sentences": sentences,
                "student_name": student_name,
                "domain": domain,
            },
        )
    return {
        "cue": cue,
        "student_name": student_name,
        "student_self": _pick(cell.selfs, seed_for("self")) if cell.selfs else "",
        "student_profile": data.student_profile,
        "demographic": demographic,
    }


# ---------------------------------------------------------------------------------------------- the design


def _known(kind: str, wanted: list[str], known: list[str], where: str) -> None:
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(
            f"unknown {kind} {', '.join(map(repr, unknown))} {where}; known: {', '.join(known) or '(none)'}"
        )
    repeated = sorted({w for w in wanted if wanted.count(w) > 1})
    if repeated:
        raise ValueError(f"{kind} {', '.join(map(repr, repeated))} listed twice {where}")


def _context(info: ValidationInfo) -> tuple[str, Demographics] | None:
    """(channel, data) when both validated; otherwise that field's own error is already reported."""
    if "channel" not in info.data or "file" not in info.data or "names" not in info.data:
        return None
    return info.data["channel"], demographics_for(info.data["file"], info.data["names"])


@DESIGNS.register("demographic")
class DemographicDesign:
    """Demographic cue conditions (explicit sentence, implicit name, or opposite 2×2), paired by item."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        channel: Channel = "explicit"
        """How the demographic reaches the tutor: explicit sentence, implicit name, or the opposite 2×2."""
        file: str | None = None
        """A demographics YAML replacing the built-in one (absolute, or relative to the working directory)."""
        names: str | None = None
        """A names-only YAML (the `names` section's layout) replacing the name set, e.g. the shipped
        `four_given_names.yaml`; looked up in the working directory, then next to the built-in data."""
        dimensions: list[str] | None = None
        """The channel's dimensions to run, one per dialogue (default: all; with `stack`: none besides it)."""
        levels: dict[str, list[str]] | None = None
        """Restrict a dimension to some of its levels (also restricts the parts of a stack)."""
        stack: list[str] | None = None
        """Explicit channel: cross these dimensions into one intersectional dimension (cue = both sentences)."""
        baseline: bool | None = None
        """Add the no-cue baseline condition (default: yes for explicit and implicit, no for opposite)."""
        hold_gender: str | None = None
        """Implicit channel: the name gender for `name_ethnicity` (default: rotates with the item's seed)."""
        hold_ethnicity: str | None = None
        """Implicit channel: the name ethnicity for `name_gender` (default: rotates with the item's seed)."""
        template: str | None = None
        """Jinja template for the tutor's cue (sandboxed); sees the TEMPLATE_VARIABLES. Default: the sentence."""
        min_items: int = Field(default=15, ge=1)
        """Fewest items the paired statistics accept (lower it only for smoke tests)."""
        analysis: FairnessAnalysis = Field(default_factory=FairnessAnalysis)
        """The family, its correction and the level at which a contrast becomes a finding."""

        @field_validator("file")
        @classmethod
        def _readable(cls, file: str | None) -> str | None:
            demographics_for(file)
            return file

        @field_validator("names")
        @classmethod
        def _names_readable(cls, names: str | None, info: ValidationInfo) -> str | None:
            if names is not None and "file" in info.data:
                demographics_for(info.data["file"], names)
            return names

        @field_validator("dimensions")
        @classmethod
        def _known_dimensions(cls, dimensions: list[str] | None, info: ValidationInfo) -> list[str] | None:
            context = _context(info)
            if dimensions is not None and context is not None:
                channel, data = context
                _known("dimension", dimensions, list(channel_dimensions(data, channel)), f"for the {channel} channel")
            return dimensions

        @field_validator("levels")
        @classmethod
        def _known_levels(
            cls, levels: dict[str, list[str]] | None, info: ValidationInfo
        ) -> dict[str, list[str]] | None:
            context = _context(info)
            if levels is not None and context is not None:
                channel, data = context
                offered = channel_dimensions(data, channel)
                _known("dimension", list(levels), list(offered), f"in `levels` for the {channel} channel")
                for name, chosen in levels.items():
                    if not chosen:
                        raise ValueError(f"`levels.{name}` is empty; list at least one of: {', '.join(offered[name])}")
                    _known("level", chosen, offered[name], f"of dimension {name!r}")
            return levels

        @field_validator("stack")
        @classmethod
        def _stackable(cls, stack: list[str] | None, info: ValidationInfo) -> list[str] | None:
            context = _context(info)
            if stack is not None and context is not None:
                channel, data = context
                if channel != "explicit":
                    raise ValueError(f"`stack` crosses explicit sentences; the {channel} channel has none to stack")
                _known("dimension", stack, list(data.dimensions), "in `stack`")
                if len(stack) < 2:
                    raise ValueError("`stack` needs at least two dimensions to cross")
            return stack

        @field_validator("hold_gender", "hold_ethnicity")
        @classmethod
        def _holdable(cls, value: str | None, info: ValidationInfo) -> str | None:
            context = _context(info)
            if value is not None and context is not None:
                channel, data = context
                field = info.field_name or "hold"
                if channel != "implicit" or data.names is None:
                    raise ValueError(f"`{field}` applies to the implicit (name) channel only")
                known = data.names.genders if field == "hold_gender" else list(data.names.ethnicities)
                _known(field.removeprefix("hold_"), [value], known, "in the name lists")
            return value

        @field_validator("template")
        @classmethod
        def _renders(cls, template: str | None, info: ValidationInfo) -> str | None:
            if template is None:
                return None
            check_template(template, allowed=TEMPLATE_VARIABLES)
            context = _context(info)
            if context is None or any(name not in info.data for name in _SELECTION_FIELDS):
                return template
            data = context[1]
            selection = _Selection(**{name: info.data[name] for name in _SELECTION_FIELDS})
            if not channel_dimensions(data, selection.channel):
                return template
            for cell in _cells(data, selection):
                try:
                    _extras(cell, data, lambda *parts: derive_seed(0, *parts), domain="mathematics", template=template)
                except ValueError as exc:
                    where = f"{cell.condition['dimension']}={cell.condition['level']}"
                    raise ValueError(f"{exc} (in condition {where})") from None
            return template

        @model_validator(mode="after")
        def _channel_available(self) -> DemographicDesign.Options:
            data = self.data()
            if not channel_dimensions(data, self.channel):
                section = "names" if self.channel == "implicit" else "opposite"
                raise ValueError(
                    f"the {self.channel} channel needs a `{section}` section in the demographics file "
                    f"({self.file or 'built-in'})"
                )
            if self.dimensions == [] and not self.stack:
                raise ValueError("`dimensions` is empty and there is no `stack`: the design would compare nothing")
            return self

        def data(self) -> Demographics:
            """The demographics these options read (built-in, or `file`)."""
            return demographics_for(self.file, self.names)

        def _selection(self) -> _Selection:
            return _Selection(**{name: getattr(self, name) for name in _SELECTION_FIELDS})

    def __init__(self, options: Options) -> None:
        self.options = options
        self.data = options.data()
        self._cells = {
            (c.condition["dimension"], c.condition["level"]): c for c in _cells(self.data, options._selection())
        }
        stated, perceived = _opposite_keys(self.data)
        self._paired = ("channel", "dimension", "level") + (
            (stated, perceived) if options.channel == "opposite" else ()
        )

    @property
    def paired_factors(self) -> tuple[str, ...]:
        """Every key this design adds: all conditions of an (item, replicate) share one seed (see module doc)."""
        return self._paired

    @property
    def min_items(self) -> int:
        return self.options.min_items

    def conditions(self) -> list[dict[str, str]]:
        return [dict(cell.condition) for cell in self._cells.values()]

    def extras(self, episode: Episode, /) -> dict[str, Any]:
        """The cue, name, self-statement, student profile and demographic of this episode (see module doc)."""
        cell = self._cells[(episode.condition["dimension"], episode.condition["level"])]
        try:
            return _extras(
                cell, self.data, episode.seed_for, domain=episode.item.domain, template=self.options.template
            )
        except ValueError as exc:
            raise ScenarioError(f"design.template: {exc} (episode {episode.id})") from None
