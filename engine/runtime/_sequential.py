"""Admission for sequential runs: episodes start in waves of whole items, and a look after each wave decides.

The state is a pure function of the plan, the stopping rule and the current records: each look replays the
complete waves in the plan's (seeded) item order. A resumed run, `--retry-errors`, the cache and Ray therefore
reach the look, the stop and the verdicts an uninterrupted run reaches on the same records. Waves are strict:
wave k+1 starts only after look k, so a stop wastes no episode in flight (the price is an idle tail per wave).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from engine.core._errors import ScenarioError
from engine.core._format import format_sig
from engine.core._records import EpisodeRecord
from engine.scenario._plan import Episode
from engine.scenario._spec import Scenario
from engine.scenario._stopping import PairedSpec, QuestionSpec, StoppingSpec
from engine.stats._sequential import Hypothesis, SequentialLook, e_bh, sequential_path

__all__ = (
    "FixedAdmission",
    "WaveAdmission",
    "admission_for",
    "check_stopping",
    "expand_questions",
    "sequential_summary",
)


class FixedAdmission:
    """The fixed-sample default: every planned episode may start; nothing is looked at before the end."""

    stopped = False
    reason: str | None = None

    def order(self, pending: list[Episode]) -> list[Episode]:
        return pending

    def is_open(self, episode: Episode) -> bool:
        return True

    async def admit(self, episode: Episode) -> bool:
        return True

    def record(self, record: EpisodeRecord) -> None:
        return None

    def load(self, records: Iterable[EpisodeRecord]) -> None:
        return None

    def manifest(self) -> dict[str, Any]:
        return {"design": "fixed-sample"}


def hypothesis(q: QuestionSpec) -> Hypothesis:
    low, high = q.bounds
    width = high - low
    if q.paired is not None:
        return Hypothesis("paired", 0.5, q.margin / (2 * width), q.futility)
    threshold = q.above if q.above is not None else q.below
    assert threshold is not None
    return Hypothesis(q.form, (threshold - low) / width, 0.0, q.futility)


def _unscale(q: QuestionSpec, v: float) -> float:
    low, high = q.bounds
    return (2 * v - 1) * (high - low) if q.paired is not None else low + v * (high - low)


def _number(value: object) -> float:
    if not isinstance(value, bool | int | float):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _pooled(q: QuestionSpec, records: Sequence[EpisodeRecord]) -> float | None:
    """The item's value over these episodes: Σ metric / Σ per (or the mean of metric); None when absent."""
    if not records or any(r.status != "ok" for r in records):
        return None
    try:
        top = sum(_number(r.metrics[q.metric]) for r in records)
        bottom = sum(_number(r.metrics[q.per]) for r in records) if q.per else float(len(records))
    except (KeyError, TypeError):
        return None
    return top / bottom if bottom > 0 else None


def item_value(q: QuestionSpec, records: Sequence[EpisodeRecord]) -> float | None:
    """One item's observation for question q, mapped to [0, 1]; None drops the item from this question."""
    low, high = q.bounds
    width = high - low
    kept = [r for r in records if all(r.condition.get(f) == lv for f, lv in q.where.items())]
    if q.paired is None:
        value = _pooled(q, kept)
        return None if value is None or not low <= value <= high else (value - low) / width
    factor = q.paired.factor
    a = _pooled(q, [r for r in kept if r.condition.get(factor) == q.paired.a])
    b = _pooled(q, [r for r in kept if r.condition.get(factor) == q.paired.b])
    if a is None or b is None or not (low <= a <= high and low <= b <= high):
        return None
    return (a - b + width) / (2 * width)


@dataclass
class WaveAdmission:
    """Strict item waves for a `design.stopping` run (see the module docstring)."""

    stopping: StoppingSpec
    episodes: Sequence[Episode]
    records: dict[str, EpisodeRecord] = field(default_factory=dict)
    looks: list[SequentialLook] = field(default_factory=list)
    open_wave: int = 0
    stopped: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        items = list(dict.fromkeys(e.item.id for e in self.episodes))
        every = self.stopping.look_every
        self.waves = [items[i : i + every] for i in range(0, len(items), every)]
        self.wave_of = {item: i // every for i, item in enumerate(items)}
        self.by_item: dict[str, list[str]] = {}
        for e in self.episodes:
            self.by_item.setdefault(e.item.id, []).append(e.id)
        self._item_of = {e.id: e.item.id for e in self.episodes}
        self._changed: anyio.Event | None = None
        self._refresh()

    def order(self, pending: list[Episode]) -> list[Episode]:
        return sorted(pending, key=lambda e: self.wave_of[e.item.id])

    def is_open(self, episode: Episode) -> bool:
        return not self.stopped and self.wave_of[episode.item.id] <= self.open_wave

    async def admit(self, episode: Episode) -> bool:
        """Wait until the episode's wave is open; False once the questions are settled (admit no more)."""
        while not self.stopped and self.wave_of[episode.item.id] > self.open_wave:
            self._changed = self._changed or anyio.Event()
            await self._changed.wait()
        return not self.stopped

    def record(self, record: EpisodeRecord) -> None:
        item = self._item_of.get(record.id)
        if item is None:
            return
        self.records[record.id] = record
        if self.wave_of[item] == self.open_wave and self._complete(self.open_wave):
            self._refresh()
            if self._changed is not None:
                self._changed.set()
                self._changed = None

    def load(self, records: Iterable[EpisodeRecord]) -> None:
        """The records a resumed run starts from (its error records left out when they are retried)."""
        self.records.update((r.id, r) for r in records if r.id in self._item_of)
        self._refresh()

    def _complete(self, wave: int) -> bool:
        return all(i in self.records for item in self.waves[wave] for i in self.by_item[item])

    def _refresh(self) -> None:
        """Replay every complete wave from the start; open the next one or stop."""
        done = 0
        while done < len(self.waves) and self._complete(done):
            done += 1
        questions = self.stopping.questions
        values: list[list[float]] = [[] for _ in questions]
        counts: list[list[int]] = []
        for wave in self.waves[:done]:
            for item in wave:
                records = [self.records[i] for i in self.by_item[item]]
                for q, question in enumerate(questions):
                    value = item_value(question, records)
                    if value is not None:
                        values[q].append(value)
            counts.append([len(v) for v in values])
        items = [sum(len(w) for w in self.waves[: k + 1]) for k in range(done)]
        hypotheses = [hypothesis(q) for q in questions]
        self.looks = sequential_path(values, counts, items, hypotheses, self.stopping.alpha)
        settled = next((k for k, look in enumerate(self.looks) if look.all_settled), None)
        if settled is not None:
            self.looks = self.looks[: settled + 1]
            self.stopped = settled + 1 < len(self.waves)
            self.reason = f"sequential stop: every question settled at look {settled + 1} of {len(self.waves)}"
        elif done == len(self.waves) and self.looks:
            open_ = [q.name for q, state in zip(questions, self.looks[-1].questions, strict=True) if not state.settled]
            self.reason = f"plan exhausted after {done} looks; not settled: {', '.join(open_)}"
        self.open_wave = done

    def manifest(self) -> dict[str, Any]:
        return sequential_summary(self.stopping, self.looks, len(self.waves), self.episodes, self.reason)


def sequential_summary(
    stopping: StoppingSpec,
    looks: Sequence[SequentialLook],
    waves: int,
    episodes: Sequence[Episode],
    reason: str | None,
) -> dict[str, Any]:
    """What manifest.json and the report say of a sequential run: each question's verdict at the last look
    (e-BH over the family), its interval on the metric's scale and the path of both over the looks."""
    questions = stopping.questions
    m = len(questions)
    last = looks[-1].questions if looks else ()
    findings = e_bh([q.e_value for q in last], stopping.alpha) if last else [False] * m
    items = looks[-1].items if looks else 0
    used = _episodes_of_first_items(episodes, items)
    rows = []
    for k, spec in enumerate(questions):
        state = last[k] if last else None
        verdict = "finding" if findings[k] else "futile" if state and state.settled == "futile" else "no finding"
        rows.append(
            {
                "name": spec.name,
                "form": spec.form,
                "null": spec.above if spec.above is not None else spec.below if spec.below is not None else 0.0,
                "verdict": verdict,
                "settled": state.settled if state else None,
                "e_value": state.e_value if state else 1.0,
                "n": state.n if state else 0,
                "interval": [_unscale(spec, state.low), _unscale(spec, state.high)] if state else None,
                "path": [
                    {"items": look.items, "n": look.questions[k].n, "e_value": look.questions[k].e_value,
                     "interval": [_unscale(spec, look.questions[k].low), _unscale(spec, look.questions[k].high)],
                     "settled": look.questions[k].settled}
                    for look in looks
                ],
            }
        )  # fmt: skip
    return {
        "design": "sequential",
        "alpha": stopping.alpha,
        "interval_level": 1 - stopping.alpha / m,
        "look_every": stopping.look_every,
        "looks": len(looks),
        "waves": waves,
        "items_used": items,
        "episodes_used": used,
        "episodes_planned": len(episodes),
        "stopped_early": len(looks) < waves and reason is not None and reason.startswith("sequential stop"),
        "reason": reason,
        "questions": rows,
    }


def _episodes_of_first_items(episodes: Iterable[Episode], items: int) -> int:
    order = list(dict.fromkeys(e.item.id for e in episodes))
    first = set(order[:items])
    return sum(1 for e in episodes if e.item.id in first)


def _levels(episodes: Iterable[Episode]) -> dict[str, set[str]]:
    levels: dict[str, set[str]] = {}
    for episode in episodes:
        for factor, level in episode.condition.items():
            levels.setdefault(factor, set()).add(level)
    return levels


def expand_questions(stopping: StoppingSpec, episodes: Sequence[Episode]) -> StoppingSpec:
    """The rule with each `versus` question replaced by one `paired` question per level the plan has."""
    levels = _levels(episodes)
    found: list[QuestionSpec] = []
    for q in stopping.questions:
        if q.versus is None:
            found.append(q)
            continue
        others = sorted(levels.get(q.versus.factor, set()) - {q.versus.reference})
        for level in others:
            paired = PairedSpec(factor=q.versus.factor, a=level, b=q.versus.reference)
            found.append(q.model_copy(update={"name": f"{q.name}.{level}", "paired": paired, "versus": None}))
    return stopping.model_copy(update={"questions": found})


def admission_for(scenario: Scenario, episodes: Sequence[Episode]) -> FixedAdmission | WaveAdmission:
    stopping = scenario.design.stopping if scenario.design is not None else None
    return FixedAdmission() if stopping is None else WaveAdmission(expand_questions(stopping, episodes), episodes)


def live_text(summary: dict[str, Any]) -> str:
    """The progress line's part for a sequential run: each question's interval now and whether it is settled."""
    if summary.get("design") != "sequential":
        return ""
    parts = [f"look {summary['looks']}/{summary['waves']}"]
    for q in summary["questions"]:
        low, high = q["interval"] or (None, None)
        span = "–" if low is None else f"[{format_sig(low)}, {format_sig(high)}]"
        state = q["settled"] or "open"
        parts.append(f"{q['name']} {span} {state}")
    return " · ".join(parts)


def check_stopping(scenario: Scenario, episodes: Sequence[Episode]) -> None:
    """A question whose `where` or `paired` levels no planned episode has would never settle: refuse it now."""
    stopping = scenario.design.stopping if scenario.design is not None else None
    if stopping is None:
        return
    levels = _levels(episodes)
    for q in stopping.questions:
        if q.versus is not None and not levels.get(q.versus.factor, set()) - {q.versus.reference}:
            raise ScenarioError(f"design.stopping question {q.name!r}: the plan has no level of "
                                f"{q.versus.factor!r} besides {q.versus.reference!r}")  # fmt: skip
    for q in expand_questions(stopping, episodes).questions:
        wanted = list(q.where.items())
        if q.paired is not None:
            wanted += [(q.paired.factor, q.paired.a), (q.paired.factor, q.paired.b)]
        for factor, level in wanted:
            if level not in levels.get(factor, set()):
                known = ", ".join(f"{f}: {sorted(v)}" for f, v in sorted(levels.items())) or "none"
                raise ScenarioError(
                    f"design.stopping question {q.name!r}: no planned episode has {factor}={level} "
                    f"(the plan's factors: {known})"
                )
