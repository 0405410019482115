"""Judge calibration: run registered judges over human-labelled tutor responses and measure their agreement.

A *label source* (registry `LABEL_SOURCES`, e.g. `mrbench`, `bridge`) reads a labelled file into a `LabelSet`:
examples (a dialogue history, the tutor response that humans labelled, and their label per dimension), the
dimensions with their label order (ordinal or not, and a lenient collapse such as BEA 2025's "Yes + To some
extent"), and *readers* that turn a registered judge's judgments into a label of a dimension. Judges and label
sources are resolved by name, so the engine imports neither.

Each judge is run on every example exactly as in a scenario — same `EpisodeContext`, same clients, throttles
and retries — with the response as the judged tutor turn (conversation-scope judges see only the student's
last turn and the response). Per judge × dimension: accuracy, Cohen's kappa (quadratic-weighted for ordinal
scales), Krippendorff's alpha (nominal, and ordinal where the scale is), macro-F1 and the confusion matrix,
exact and lenient (see `engine.stats._agreement`). Deterministic judges need no model; they are the baseline an LLM
judge must beat.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import click
import orjson
from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.core._errors import BadModelOutput, JudgeError, ProviderError, ScenarioError
from engine.core._format import format_pct
from engine.core._inputs import parse_yaml
from engine.core._records import Judgment
from engine.core._registry import Registry
from engine.models._client import CallStats, ModelClient
from engine.models._provider import PROVIDERS
from engine.models._throttle import Throttle
from engine.runtime._plugins import JUDGES, EpisodeContext, Judge, Utterance, options_model
from engine.scenario._items import Item
from engine.scenario._load import parse_model_override
from engine.scenario._plan import Episode, derive_seed
from engine.scenario._spec import ModelSpec, Scenario
from engine.stats._agreement import (
    agreement,
    agreement_intervals,
    judge_agreement,
    label_shares,
    spec_labels,
    voted_units,
)
from engine.tools._calibrate_html import render_calibration_html

__all__ = (
    "LABEL_SOURCES",
    "CalibrationResult",
    "Dimension",
    "Example",
    "LabelMap",
    "LabelSet",
    "LabelSource",
    "Reader",
    "calibrate",
    "calibrate_command",
    "render_markdown",
    "run_calibration",
)

Reader = Callable[[Sequence[Judgment]], str | None]
"""Reads one dimension's label from a judge's judgments on one example (None: the judge gave no verdict)."""


@dataclass(frozen=True)
class LabelMap:
    """A documented reader: which judge metric answers a dimension, and how its values become the dataset's labels.

    `values` pairs each judge value (after `key`, e.g. "rate > 0") with a dataset label; a value mapped to None,
    or not listed, is no verdict and the unit is dropped. `proxy` says why the metric is not the dataset's own
    question (None: it is); reports mark such rows. With `passthrough`, a string value is the label itself.
    """

    metric: str
    values: tuple[tuple[Any, str | None], ...] = ()
    proxy: str | None = None
    key: Callable[[Any], Any] | None = None
    key_text: str | None = None
    """How `key` reads the value, for the documented table (e.g. "tutor_question_rate > 0")."""
    passthrough: bool = False

    def __call__(self, judgments: Sequence[Judgment], /) -> str | None:
        value = next((j.value for j in judgments if j.metric == self.metric), None)
        if value is None:
            return None
        if self.passthrough:
            return value if isinstance(value, str) else None
        if self.key is not None:
            value = self.key(value)
        for judge_value, label in self.values:
            if type(judge_value) is type(value) and judge_value == value:
                return label
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "metric": self.key_text or self.metric,
            "values": "label as given" if self.passthrough else [[v, label] for v, label in self.values],
            "proxy": self.proxy,
        }


@dataclass(frozen=True)
class Dimension:
    name: str
    labels: tuple[str, ...]
    """Every label, lowest first when `ordinal`."""
    ordinal: bool = False
    lenient: Mapping[str, str] | None = None
    """Collapse for the lenient view (e.g. "To some extent" → "Yes"); None: no lenient view."""


@dataclass(frozen=True)
class Example:
    id: str
    item: Item
    """What a judge may read besides the dialogue: the problem and its reference answer (may be empty)."""
    history: tuple[tuple[Literal["tutor", "student"], str], ...]
    response: str
    labels: Mapping[str, str]
    """Human label per dimension (a dimension may be missing)."""
    group: str = ""
    """Who wrote the response (e.g. the MRBench tutor), for breakdowns."""
    condition: Mapping[str, str] = field(default_factory=dict)
    """The episode condition a judge reads (e.g. the SafeTutors risk dimension for `harm`)."""


@dataclass(frozen=True)
class LabelSet:
    name: str
    dimensions: tuple[Dimension, ...]
    examples: tuple[Example, ...]
    readers: Mapping[str, Mapping[str, Reader]]
    """Judge name → dimension → reader: which of a judge's metrics answer which dimension."""
    annotator_agreement: Mapping[str, Any] | None = None
    """Agreement between the human annotators, where several labelled one item (generic label files)."""


class LabelSource(Protocol):
    """Reads a human-labelled file; bad input raises `ScenarioError`. `options` are the source's own."""

    def __call__(self, path: Path, options: Mapping[str, Any], /) -> LabelSet: ...


LABEL_SOURCES: Registry[LabelSource] = Registry("label source")


@dataclass
class CalibrationResult:
    label_set: str
    examples: int
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Judge name → {"errors": n, "models": [...], "dimensions": [row, ...]}."""
    duration_s: float = 0.0
    calls: dict[str, Any] = field(default_factory=dict)
    human_rates: dict[str, Any] = field(default_factory=dict)
    """Dimension → group (e.g. MRBench tutor) → {n, shares}: the human labels as the data has them."""
    annotator_agreement: Mapping[str, Any] | None = None

    @property
    def errors(self) -> int:
        return sum(int(data["errors"]) for data in self.judges.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "label_set": self.label_set,
            "examples": self.examples,
            "judges": self.judges,
            "duration_s": self.duration_s,
            "calls": self.calls,
            "human_rates": self.human_rates,
            "annotator_agreement": self.annotator_agreement,
        }


class _Silent:
    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None:
        del ctx
        return None


def _scenario(judge_models: Sequence[ModelSpec], votes: int, seed: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "calibrate",
            "kind": "calibration",
            "seed": seed,
            "models": {"tutor": "sim/tutor", "judge": [m.model_dump() for m in judge_models]},
            "items": [{"source": "calibration", "path": "-"}],
            "student": {"strategy": "none"},
            "judge_votes": votes,
        }
    )


def _check_models(judge_models: Sequence[ModelSpec]) -> None:
    for spec in judge_models:
        implementation = PROVIDERS.get(spec.provider)()
        implementation.check(spec, "judge")
        params = implementation.params_model(spec)
        if params is not None:
            try:
                params.model_validate(spec.params)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ScenarioError(f"--model judge={spec.model}: invalid params: {problems}") from None


async def _judge_example(
    judge: Judge, example: Example, scenario: Scenario, clients: list[ModelClient], seed: int
) -> list[Judgment]:
    episode = Episode(example.id, example.item, dict(example.condition), 0, derive_seed(seed, judge.name, example.id))
    ctx = EpisodeContext(
        episode=episode,
        scenario=scenario,
        tutor=_Silent(),
        student=_Silent(),
        judges=[judge],
        clients={},
        judge_clients=clients,
    )
    history = example.history if judge.scope == "turn" else [t for t in example.history if t[0] == "student"][-1:]
    for role, text in history:
        await ctx.add_turn(role, Utterance(text))
    turn = await ctx.add_turn("tutor", Utterance(example.response))
    return await judge(ctx, turn.index if judge.scope == "turn" else "conversation")


async def run_calibration(
    label_set: LabelSet,
    judge_names: Sequence[str],
    judge_models: Sequence[ModelSpec],
    *,
    votes: int = 3,
    concurrency: int = 16,
    seed: int = 0,
    judge_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> CalibrationResult:
    """Run each judge on every example and score it against the human labels (see the module doc)."""
    started = time.perf_counter()
    judges: list[Judge] = []
    for name in judge_names:
        if name not in label_set.readers:
            known = ", ".join(sorted(label_set.readers)) or "none"
            raise ScenarioError(f"judge {name!r} has no reader for the {label_set.name} labels; readable: {known}")
        factory = JUDGES.get(name)
        try:
            options = options_model(factory).model_validate(dict((judge_options or {}).get(name, {})))
        except ValidationError as exc:
            raise ScenarioError(f"options of judge {name!r}: {exc.errors()[0]['msg']}") from None
        judges.append(factory(options))
    needs_model = [j.name for j in judges if getattr(j, "model_calls", 1) > 0]
    if needs_model and not judge_models:
        raise ScenarioError(f"judges {', '.join(needs_model)} call a model: pass --model judge=provider/model")
    _check_models(judge_models)
    scenario = _scenario(judge_models, votes, seed)
    stats = CallStats()
    outcomes: dict[str, list[list[Judgment] | None]] = {j.name: [None] * len(label_set.examples) for j in judges}
    errors: dict[str, list[tuple[str, str, str]]] = {j.name: [] for j in judges}
    async with AsyncExitStack() as stack:
        clients: list[ModelClient] = []
        for spec in judge_models:
            model = PROVIDERS.get(spec.provider)()(spec)
            stack.push_async_callback(model.aclose)
            throttle = Throttle(rpm=spec.rpm, tpm=spec.tpm, max_in_flight=spec.max_concurrency)
            clients.append(ModelClient("judge", spec, model, throttle, stats))
        limiter = anyio.CapacityLimiter(concurrency)

        async def one(judge: Judge, index: int) -> None:
            async with limiter:
                try:
                    outcomes[judge.name][index] = await _judge_example(
                        judge, label_set.examples[index], scenario, clients, seed
                    )
                except (JudgeError, ProviderError, BadModelOutput) as exc:
                    errors[judge.name].append((label_set.examples[index].id, type(exc).__name__, str(exc)))

        async with anyio.create_task_group() as group:
            for judge in judges:
                for index in range(len(label_set.examples)):
                    group.start_soon(one, judge, index)
    result = CalibrationResult(label_set.name, len(label_set.examples))
    labels = spec_labels([m.model_dump(mode="json") for m in judge_models])
    for judge in judges:
        deterministic = getattr(judge, "model_calls", 1) == 0
        rows = [
            _dimension_row(label_set, dimension, reader, outcomes[judge.name], seed=derive_seed(seed, judge.name))
            for dimension in label_set.dimensions
            if (reader := label_set.readers[judge.name].get(dimension.name)) is not None
        ]
        failed = sorted(errors[judge.name])
        kinds: dict[str, dict[str, Any]] = {}
        for example_id, kind, message in failed:
            entry = kinds.setdefault(kind, {"count": 0, "first": f"{example_id}: {message}"})
            entry["count"] += 1
        judged = [
            (example.item.id, judgment)
            for example, found in zip(label_set.examples, outcomes[judge.name], strict=True)
            for judgment in found or ()
        ]
        result.judges[judge.name] = {
            "judgments": len(label_set.examples),
            "errors": len(failed),
            "errors_by_kind": kinds,
            "error_examples": [f"{example_id}: {message}" for example_id, _, message in failed[:5]],
            "deterministic": deterministic,
            "models": [] if deterministic else [m.model for m in judge_models],
            "dimensions": rows,
            "judge_agreement": None
            if deterministic or len(labels) < 2
            else judge_agreement(voted_units(judged, len(labels)), labels, seed=derive_seed(seed, "judges") % 2**32),
        }
    result.duration_s = round(time.perf_counter() - started, 3)
    result.calls = {"requests": stats.requests, "retries": stats.retries, "failures": stats.failures}
    result.human_rates = human_rates(label_set)
    result.annotator_agreement = label_set.annotator_agreement
    return result


def human_rates(label_set: LabelSet) -> dict[str, Any]:
    """Per dimension and group (all groups pooled under "all"), the share of each human label, over every example."""
    found: dict[str, Any] = {}
    for dimension in label_set.dimensions:
        by_group: dict[str, list[str]] = {}
        for example in label_set.examples:
            label = example.labels.get(dimension.name)
            if label is not None:
                by_group.setdefault(example.group or "all", []).append(label)
        if not by_group:
            continue
        groups = {"all": [label for labels in by_group.values() for label in labels]} | dict(sorted(by_group.items()))
        found[dimension.name] = {
            group: {"n": len(labels), "shares": label_shares(labels, dimension.labels)}
            for group, labels in groups.items()
        }
    return found


def _interval_fields(exact: dict[str, Any], intervals: Mapping[str, Mapping[str, float | None]]) -> dict[str, Any]:
    return exact | {"intervals": {name: dict(bounds) for name, bounds in intervals.items()}}


def _dimension_row(
    label_set: LabelSet,
    dimension: Dimension,
    reader: Reader,
    outcomes: Sequence[list[Judgment] | None],
    *,
    seed: int,
) -> dict[str, Any]:
    human: list[str | None] = []
    judged: list[str | None] = []
    clusters: list[str] = []
    groups: list[str] = []
    no_verdict = 0
    for example, judgments in zip(label_set.examples, outcomes, strict=True):
        label = example.labels.get(dimension.name)
        if label is None or judgments is None:
            continue
        verdict = reader(judgments)
        if verdict is None:
            no_verdict += 1
        human.append(label)
        judged.append(verdict)
        clusters.append(example.item.id)
        groups.append(example.group)
    exact = agreement(human, judged, dimension.labels, ordinal=dimension.ordinal)
    both = [i for i in range(len(human)) if human[i] in dimension.labels and judged[i] in dimension.labels]
    intervals = agreement_intervals(
        [str(human[i]) for i in both],
        [str(judged[i]) for i in both],
        dimension.labels,
        [clusters[i] for i in both],
        ordinal=dimension.ordinal,
        seed=derive_seed(seed, dimension.name) % 2**32,
    )
    described = reader.describe() if isinstance(reader, LabelMap) else None
    row: dict[str, Any] = {
        "dimension": dimension.name,
        "ordinal": dimension.ordinal,
        "no_verdict": no_verdict,
        "map": described,
        "proxy": described["proxy"] if described else None,
        "exact": _interval_fields(exact.as_dict(), intervals),
        "lenient": None,
        "by_group": _by_group(human, judged, groups, dimension),
    }
    if dimension.lenient:
        lenient = agreement(human, judged, dimension.labels, ordinal=False, collapse=dimension.lenient)
        order = list(dict.fromkeys(dimension.lenient.get(label, label) for label in dimension.labels))
        collapse = dimension.lenient
        lenient_intervals = agreement_intervals(
            [collapse.get(str(human[i]), str(human[i])) for i in both],
            [collapse.get(str(judged[i]), str(judged[i])) for i in both],
            order,
            [clusters[i] for i in both],
            ordinal=False,
            seed=derive_seed(seed, dimension.name, "lenient") % 2**32,
        )
        row["lenient"] = _interval_fields(lenient.as_dict(), lenient_intervals)
    return row


def _by_group(
    human: Sequence[str | None], judged: Sequence[str | None], groups: Sequence[str], dimension: Dimension
) -> list[dict[str, Any]]:
    """Per response author: units, accuracy, and the label shares of the humans and of the judge side by side."""
    rows = []
    for group in sorted(set(groups)):
        pairs = [
            (h, j)
            for h, j, g in zip(human, judged, groups, strict=True)
            if g == group and h in dimension.labels and j in dimension.labels
        ]
        if not pairs:
            continue
        rows.append(
            {
                "group": group,
                "n": len(pairs),
                "accuracy": sum(h == j for h, j in pairs) / len(pairs),
                "human": label_shares([h for h, _ in pairs if h is not None], dimension.labels),
                "judge": label_shares([j for _, j in pairs if j is not None], dimension.labels),
            }
        )
    return rows


def calibrate(
    label_set: LabelSet,
    judge_names: Sequence[str],
    judge_models: Sequence[ModelSpec],
    **options: Any,
) -> CalibrationResult:
    """`run_calibration` from synchronous code, in a fresh asyncio event loop."""

    async def main() -> CalibrationResult:
        return await run_calibration(label_set, judge_names, judge_models, **options)

    return anyio.run(main, backend="asyncio")


# ------------------------------------------------------------------------------------------------ rendering


def _f(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


_COLUMNS = (
    "judge",
    "dimension",
    "n",
    "no verdict",
    "acc [95% CI]",
    "κ [95% CI]",
    "α [95% CI]",
    "lenient acc",
    "lenient κ",
)


def _with_interval(exact: Mapping[str, Any], name: str, *, pct: bool = False) -> str:
    value = exact.get(name)
    shown = format_pct(value) if pct else _f(value)
    bounds = (exact.get("intervals") or {}).get(name) or {}
    if value is None or bounds.get("low") is None or bounds.get("high") is None:
        return shown
    if pct:
        return f"{shown} [{format_pct(bounds['low'])}, {format_pct(bounds['high'])}]"
    return f"{shown} [{bounds['low']:.2f}, {bounds['high']:.2f}]"


def _shown_dimension(row: Mapping[str, Any]) -> str:
    return f"{row['dimension']} (proxy)" if row.get("proxy") else row["dimension"]


def _rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Measured rows only: a judge × dimension with no unit (n = 0) is listed by `_unmeasured`, never as a result."""
    rows: list[tuple[str, ...]] = []
    for name, data in result["judges"].items():
        shown = f"{name} (deterministic)" if data["deterministic"] else name
        for row in data["dimensions"]:
            exact, lenient = row["exact"], row["lenient"] or {}
            if not exact["n"]:
                continue
            kappa = "kappa_quadratic" if row["ordinal"] else "kappa"
            alpha = "alpha_ordinal" if row["ordinal"] else "alpha_nominal"
            rows.append(
                (
                    shown,
                    _shown_dimension(row),
                    str(exact["n"]),
                    str(row["no_verdict"]),
                    _with_interval(exact, "accuracy", pct=True),
                    _with_interval(exact, kappa) + (" quad." if row["ordinal"] else ""),
                    _with_interval(exact, alpha) + (" ord." if row["ordinal"] else ""),
                    format_pct(lenient.get("accuracy")),
                    _f(lenient.get("kappa")),
                )
            )
    return rows


def _unmeasured(result: Mapping[str, Any]) -> list[str]:
    return [
        f"{name} · {row['dimension']}"
        for name, data in result["judges"].items()
        for row in data["dimensions"]
        if not row["exact"]["n"]
    ]


def _problems(result: Mapping[str, Any]) -> list[str]:
    """One line per failed judge (count of failed judgments, then each kind of error with its first message)."""
    lines = []
    for name, data in result["judges"].items():
        if not data["errors"]:
            continue
        kinds = data.get("errors_by_kind") or {}
        detail = "; ".join(f"{kind} ×{entry['count']}, first: {entry['first'][:300]}" for kind, entry in kinds.items())
        lines.append(
            f"{name}: {data['errors']} of {data.get('judgments', result['examples'])} judgments failed ({detail})"
        )
    return lines


def _proxies(result: Mapping[str, Any]) -> list[str]:
    return sorted(
        {
            f"{row['dimension']} ← {row['map']['metric']}: {row['proxy']}"
            for data in result["judges"].values()
            for row in data["dimensions"]
            if row.get("proxy") and row.get("map")
        }
    )


def _confusion_lines(row: Mapping[str, Any]) -> list[str]:
    labels, matrix = row["exact"]["labels"], row["exact"]["confusion"]
    lines = ["| human ↓ / judge → | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    lines += [
        f"| {label} | " + " | ".join(map(str, counts)) + " |" for label, counts in zip(labels, matrix, strict=True)
    ]
    return lines


def _group_lines(row: Mapping[str, Any]) -> list[str]:
    labels = row["exact"]["labels"]
    lines = [
        "| response by | n | accuracy | " + " | ".join(f"human {label} / judge {label}" for label in labels) + " |",
        "|---|---|---|" + "---|" * len(labels),
    ]
    for group in row.get("by_group") or []:
        shares = " | ".join(
            f"{format_pct(group['human'][label])} / {format_pct(group['judge'][label])}" for label in labels
        )
        lines.append(f"| {group['group']} | {group['n']} | {format_pct(group['accuracy'])} | {shares} |")
    return lines


def _judge_agreement_lines(result: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for name, data in result["judges"].items():
        block = data.get("judge_agreement")
        if not block or not block.get("metrics"):
            continue
        lines += ["", f"### Agreement between the judge models of {name}", ""]
        lines += ["| metric | units | α [95% CI] |", "|---|---|---|"]
        for metric in block["metrics"]:
            alpha = metric["alpha"]
            shown = _f(alpha["value"]) + (
                f" [{alpha['low']:.2f}, {alpha['high']:.2f}]" if alpha["low"] is not None else ""
            )
            lines.append(f"| {metric['metric']} | {metric['units']} | {shown} |")
    return lines


def render_markdown(result: Mapping[str, Any]) -> str:
    """The calibration report: agreement with intervals, errors, proxies, per-group tables, confusion matrices."""
    lines = [
        f"# Judge calibration: {result['label_set']} ({result['examples']} labelled responses)",
        "",
        "Accuracy, Cohen's κ (quadratic-weighted for ordinal scales), Krippendorff's α (ordinal where the scale is), "
        "with 95% intervals from resampling whole conversations; lenient = labels collapsed (e.g. Yes + To some "
        "extent). Deterministic judges are the baseline an LLM judge must beat. A (proxy) row scores the dimension "
        "from a judge metric that asks a related but different question.",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|---|---|" + "---|" * (len(_COLUMNS) - 2),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(result)]
    if unmeasured := _unmeasured(result):
        lines += ["", "Not measured (no response had both a human label and a judge verdict): " + ", ".join(unmeasured)]
    if problems := _problems(result):
        lines += ["", "**Failed judgments** (left out of every row above):", ""] + [f"- {line}" for line in problems]
    if proxies := _proxies(result):
        lines += ["", "Proxy rows:", ""] + [f"- {line}" for line in proxies]
    annotators = result.get("annotator_agreement")
    if annotators and annotators.get("metrics"):
        lines += [
            "",
            "## Agreement between human annotators",
            "",
            "| dimension | units | α [95% CI] |",
            "|---|---|---|",
        ]
        for metric in annotators["metrics"]:
            alpha = metric["alpha"]
            bounds = f" [{alpha['low']:.2f}, {alpha['high']:.2f}]" if alpha["low"] is not None else ""
            lines.append(f"| {metric['metric']} | {metric['units']} | {_f(alpha['value'])}{bounds} |")
    lines += _judge_agreement_lines(result)
    for name, data in result["judges"].items():
        for row in data["dimensions"]:
            if not row["exact"]["n"]:
                continue
            lines += ["", f"### {name} · {_shown_dimension(row)}", ""] + _confusion_lines(row)
            if len(row.get("by_group") or []) > 1:
                lines += ["", "Label rates per response author (human / judge):", ""] + _group_lines(row)
    return "\n".join(lines) + "\n"


def _console(result: Mapping[str, Any], *, confusion: bool) -> RenderableType:
    table = Table(title=Text(f"Judge calibration on {result['label_set']} ({result['examples']} responses)"))
    for column in _COLUMNS:
        table.add_column(column, justify="left" if column in ("judge", "dimension") else "right")
    rows = _rows(result)
    for row in rows:
        table.add_row(*map(Text, row))
    parts: list[RenderableType] = [table] if rows else [Text("No judge × dimension was measured.", style="bold")]
    if unmeasured := _unmeasured(result):
        parts.append(Text("Not measured (no unit with both labels): " + ", ".join(unmeasured)))
    for line in _proxies(result):
        parts.append(Text(f"proxy: {line}"))
    for name, data in result["judges"].items():
        block = data.get("judge_agreement") or {}
        shown = [
            f"{m['metric']} α {_f(m['alpha']['value'])}"
            + (f" [{m['alpha']['low']:.2f}, {m['alpha']['high']:.2f}]" if m["alpha"]["low"] is not None else "")
            for m in block.get("metrics", [])
        ]
        if shown:
            parts.append(Text(f"agreement between the judge models of {name}: " + "; ".join(shown)))
    for line in _problems(result):
        parts.append(Text(f"FAILED {line}", style="bold red"))
    if confusion:
        for name, data in result["judges"].items():
            for row in data["dimensions"]:
                if not row["exact"]["n"]:
                    continue
                labels = row["exact"]["labels"]
                matrix = Table(title=Text(f"{name} · {row['dimension']} (rows: human, columns: judge)"))
                matrix.add_column("")
                for label in labels:
                    matrix.add_column(Text(label), justify="right")
                for label, counts in zip(labels, row["exact"]["confusion"], strict=True):
                    matrix.add_row(Text(label), *(Text(str(c)) for c in counts))
                parts.append(matrix)
    return Group(*parts)


def _model_spec(text: str) -> ModelSpec:
    role, sep, spec = text.partition("=")
    if not sep or role != "judge" or not spec:
        raise ScenarioError(f"--model {text!r}: expected judge=provider/model (or judge={{model: ..., params: ...}})")
    data = parse_model_override(spec, f"--model {text!r}")
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"--model {text!r}: not a model spec ({exc})") from None


def _assignments(values: Sequence[str], what: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            raise ScenarioError(f"{what} {value!r}: expected key=VALUE")
        found[key], _ = parse_yaml(raw, f"{what} {value!r}")
    return found


@click.command(name="calibrate")
@click.argument("labels", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--source", default="mrbench", show_default=True, help="Label source: the file's layout.")
@click.option("--judge", "judge_names", multiple=True, help="Judge to calibrate (repeatable; default: all readable).")
@click.option("--model", "models", multiple=True, metavar="judge=SPEC", help="Judge model (repeatable: they vote).")
@click.option("--votes", type=click.IntRange(min=1), default=3, show_default=True, help="Votes per judgment.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Label-source option, e.g. limit=50.")
@click.option("--judge-option", "judge_settings", multiple=True, metavar="JUDGE.KEY=VALUE", help="A judge's option.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--confusion/--no-confusion", default=False, help="Print every confusion matrix too.")
@click.option(
    "--out", type=click.Path(path_type=Path, file_okay=False), help="Write calibration.json, .md and .html here."
)
def calibrate_command(
    labels: Path,
    source: str,
    judge_names: tuple[str, ...],
    models: tuple[str, ...],
    votes: int,
    settings: tuple[str, ...],
    judge_settings: tuple[str, ...],
    seed: int,
    concurrency: int,
    confusion: bool,
    out: Path | None,
) -> int:
    """Run judges over human-labelled responses in LABELS and report their agreement with the humans."""
    if not labels.is_file():
        raise ScenarioError(f"{labels}: no such labels file")
    label_set = LABEL_SOURCES.get(source)(labels, _assignments(settings, "--set"))
    if not label_set.examples:
        raise ScenarioError(f"{labels}: no labelled responses were read (check --source and --set)")
    judge_options: dict[str, dict[str, Any]] = {}
    for key, value in _assignments(judge_settings, "--judge-option").items():
        name, dot, option = key.partition(".")
        if not dot:
            raise ScenarioError(f"--judge-option {key!r}: expected JUDGE.KEY=VALUE")
        judge_options.setdefault(name, {})[option] = value
    specs = [_model_spec(m) for m in models]
    names = list(judge_names) or [n for n in sorted(label_set.readers) if n in JUDGES]
    if not specs:
        names = list(judge_names) or [n for n in names if getattr(JUDGES.get(n), "model_calls", 1) == 0]
    result = calibrate(
        label_set, names, specs, votes=votes, concurrency=concurrency, seed=seed, judge_options=judge_options
    ).as_dict()
    console = Console(soft_wrap=True)
    console.print(_console(result, confusion=confusion))
    if any(spec.provider == "sim" for spec in specs):
        console.print("[dim]Judge verdicts come from the `sim` provider (a deterministic simulator).[/]")
    console.print(
        f"{result['examples']} responses · {result['calls']['requests']} model calls · {result['duration_s']}s"
    )
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "calibration.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
            (out / "calibration.md").write_text(render_markdown(result), encoding="utf-8")
            (out / "calibration.html").write_text(render_calibration_html(result), encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"cannot write the calibration report to {out}: {exc.strerror or exc}") from None
        console.print(f"wrote calibration.json, calibration.md and calibration.html to {out}")
    if failed := sum(int(data["errors"]) for data in result["judges"].values()):
        Console(stderr=True, soft_wrap=True).print(
            Text(f"{failed} judgments failed: the rows above leave them out (exit 3)", style="bold red")
        )
        return 3
    return 0
