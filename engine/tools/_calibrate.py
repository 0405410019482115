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

import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import click
import orjson
from pydantic import ValidationError
from rich.console import Console, RenderableType
from rich.text import Text

from engine.core._errors import BadModelOutput, JudgeError, ProviderError, ScenarioError
from engine.core._inputs import parse_yaml
from engine.core._records import Judgment
from engine.models._client import CallStats, ModelClient
from engine.models._provider import PROVIDERS
from engine.models._throttle import Throttle
from engine.report._blocks import Section
from engine.report._console import console_blocks
from engine.report._markdown import markdown_blocks
from engine.runtime._plugins import JUDGES, EpisodeContext, Judge, Utterance, options_model
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
from engine.tools._calibrate_blocks import agreement_blocks, confusion_blocks
from engine.tools._calibrate_html import render_calibration_html
from engine.tools._calibrate_model import CalibrationReport, calibration_report
from engine.tools._label_sets import LABEL_SOURCES, Dimension, Example, LabelMap, LabelSet, LabelSource, Reader

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


def render_markdown(result: Mapping[str, Any] | CalibrationReport) -> str:
    """The calibration report: agreement with intervals, errors, proxies, per-group tables, confusion matrices."""
    report = calibration_report(result)
    sections = [
        Section("Agreement with the human labels", tuple(agreement_blocks(report)), key="agreement"),
        Section("Confusion matrices", tuple(confusion_blocks(report)), key="confusion"),
    ]
    title = f"# Judge calibration: {report.label_set} ({report.examples} labelled responses)"
    return f"{title}\n\n{markdown_blocks(sections)}"


def _console(result: Mapping[str, Any], *, confusion: bool) -> RenderableType:
    report = calibration_report(result)
    return console_blocks([*agreement_blocks(report), *confusion_blocks(report, console=confusion)])


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
