"""`design.stopping`: the questions that decide a sequential run, how often to look, and the error rate.

A run without it spends its whole plan (the fixed-sample default). With it, episodes are admitted in waves of
whole items and the run stops once every question is settled; the statistics are in `engine.stats._sequential`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ("PairedSpec", "QuestionSpec", "StoppingSpec", "VersusSpec")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PairedSpec(_Spec):
    """Two levels of one factor compared within each item: level `a` minus level `b` (e.g. two tutors, or a
    persona cue against its reference)."""

    factor: str
    a: str
    b: str

    @model_validator(mode="after")
    def _two_levels(self) -> PairedSpec:
        if self.a == self.b:
            raise ValueError("`a` and `b` must be different levels")
        return self


class VersusSpec(_Spec):
    """Every other level of `factor` against `reference`: one paired question per level, all in the family
    ("is any fairness contrast a finding": `{factor: level, reference: none}`)."""

    factor: str
    reference: str


class QuestionSpec(_Spec):
    """One question. Each item gives one value per question: the pooled `metric` (over `per` when given, e.g.
    harmful replies per reply) of that item's episodes matching `where`; or, with `paired`, level a's value
    minus level b's. Values must lie in `bounds`."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    metric: str
    """A number (or boolean) in each record's `metrics`, e.g. `harmful_turns` or `harm_any`."""
    per: str | None = None
    """A metric to divide by, pooled within the item: `metric: harmful_turns, per: tutor_turns` is harm per reply."""
    where: dict[str, str] = Field(default_factory=dict)
    """Only episodes whose condition has these levels, e.g. `{format: multi}`."""
    above: float | None = None
    """One-sided: is the item-averaged rate above this threshold? (a finding says yes)."""
    below: float | None = None
    """One-sided: is it below this threshold?"""
    paired: PairedSpec | None = None
    """Two-sided: do the two levels differ? (a finding says the difference is not 0)."""
    versus: VersusSpec | None = None
    """Shorthand for one `paired` question per level of a factor against its reference, named `NAME.LEVEL`."""
    margin: float = Field(default=0.0, ge=0)
    """With `futility`, a paired difference whose interval lies inside ±margin settles as "no difference"."""
    futility: bool = False
    """Also settle when the interval rules the finding out (entirely on the null side of the threshold, or
    inside ±margin). Off: the question settles only as a finding, so a null question runs the plan to its end."""
    bounds: tuple[float, float] = (0.0, 1.0)
    """Range of the metric (of the rate when `per` is set); the anytime-valid statistics need bounded values."""

    @model_validator(mode="after")
    def _one_kind(self) -> QuestionSpec:
        kinds = sum(x is not None for x in (self.above, self.below, self.paired, self.versus))
        if kinds != 1:
            raise ValueError("a question takes exactly one of `above`, `below`, `paired` or `versus`")
        low, high = self.bounds
        if not low < high:
            raise ValueError("`bounds` must be [low, high] with low < high")
        threshold = self.above if self.above is not None else self.below
        if threshold is not None and not low < threshold < high:
            raise ValueError(f"the threshold must lie strictly inside bounds {list(self.bounds)}")
        if (self.paired is not None or self.versus is not None) and self.margin >= high - low:
            raise ValueError("`margin` must be smaller than the width of `bounds`")
        return self

    @property
    def form(self) -> Literal["above", "below", "paired"]:
        if self.paired is not None or self.versus is not None:
            return "paired"
        return "above" if self.above is not None else "below"


class StoppingSpec(_Spec):
    """A sequential design: look after every `look_every` completed items (balanced: all of an item's planned
    episodes, across conditions, are in before it counts); stop when every question is settled."""

    questions: list[QuestionSpec] = Field(min_length=1)
    look_every: int = Field(default=10, ge=1)
    """Items per wave: episodes of the next wave start only after the previous wave's look."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """Error rate of the whole family, however many looks: false findings (e-BH, FDR; under the complete null
    the chance of any false finding) and intervals (each at 1 − alpha/m, m questions, uniformly over looks)."""

    @model_validator(mode="before")
    @classmethod
    def _names_unique(cls, data: Any) -> Any:
        questions = data.get("questions") if isinstance(data, dict) else None
        if isinstance(questions, list):
            names = [q.get("name") for q in questions if isinstance(q, dict)]
            repeated = sorted({n for n in names if names.count(n) > 1 and n is not None})
            if repeated:
                raise ValueError(f"question names repeat: {', '.join(map(str, repeated))}")
        return data
