"""Judge calibration: run registered judges over human-labelled tutor responses and measure their agreement.

The labels come from a label source (see `engine.tools.calibrate._labels`). Each judge is run on every example
exactly as in a scenario — same `EpisodeContext`, same clients, throttles and retries, its endpoints opened by
`engine.models._endpoints` as a run opens them — with the response as the judged tutor turn (conversation-scope
judges see only the student's last turn and the response). Per judge × dimension: accuracy, Cohen's kappa,
Krippendorff's alpha, macro-F1 and the confusion matrix, exact and lenient (see `engine.tools.calibrate._rows`).
Deterministic judges need no model; they are the baseline an LLM judge must beat.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from pydantic import ValidationError

from engine.core._errors import BadModelOutput, JudgeError, ProviderError, ScenarioError
from engine.core._records import Judgment
from engine.core._seeds import derive_seed
from engine.models._client import CallStats, ModelClient
from engine.models._endpoints import open_endpoints
from engine.models._provider import PROVIDERS
from engine.runtime._plugins import JUDGES, EpisodeContext, Judge, Utterance, options_model
from engine.scenario._plan import Episode
from engine.scenario._spec import ModelSpec, Scenario
from engine.stats._agreement import spec_labels
from engine.tools.calibrate._labels import CalibrationResult, Example, LabelSet
from engine.tools.calibrate._rows import Failure, human_rates, judge_entry

__all__ = ("calibrate", "run_calibration")

Outcomes = dict[str, list[list[Judgment] | None]]
"""Judge name → per example, its judgments (None: the judgment failed)."""


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


def _judges(label_set: LabelSet, names: Sequence[str], options: Mapping[str, Mapping[str, Any]]) -> list[Judge]:
    judges: list[Judge] = []
    for name in names:
        if name not in label_set.readers:
            known = ", ".join(sorted(label_set.readers)) or "none"
            raise ScenarioError(f"judge {name!r} has no reader for the {label_set.name} labels; readable: {known}")
        factory = JUDGES.get(name)
        try:
            validated = options_model(factory).model_validate(dict(options.get(name, {})))
        except ValidationError as exc:
            raise ScenarioError(f"options of judge {name!r}: {exc.errors()[0]['msg']}") from None
        judges.append(factory(validated))
    return judges


def _deterministic(judge: Judge) -> bool:
    return getattr(judge, "model_calls", 1) == 0


async def _judge_all(
    label_set: LabelSet,
    judges: Sequence[Judge],
    judge_models: Sequence[ModelSpec],
    scenario: Scenario,
    stats: CallStats,
    *,
    concurrency: int,
    seed: int,
) -> tuple[Outcomes, dict[str, list[Failure]]]:
    """Every judge on every example, `concurrency` at a time, over the judge models' endpoints."""
    outcomes: Outcomes = {j.name: [None] * len(label_set.examples) for j in judges}
    errors: dict[str, list[Failure]] = {j.name: [] for j in judges}
    roles = [("judge", spec) for spec in judge_models]
    async with open_endpoints(roles, stats=stats) as endpoints:
        clients: list[ModelClient] = [endpoints.client(role, spec) for role, spec in roles]
        limiter = anyio.CapacityLimiter(concurrency)

        async def one(judge: Judge, index: int) -> None:
            example = label_set.examples[index]
            async with limiter:
                try:
                    outcomes[judge.name][index] = await _judge_example(judge, example, scenario, clients, seed)
                except (JudgeError, ProviderError, BadModelOutput) as exc:
                    errors[judge.name].append((example.id, type(exc).__name__, str(exc)))

        async with anyio.create_task_group() as group:
            for judge in judges:
                for index in range(len(label_set.examples)):
                    group.start_soon(one, judge, index)
    return outcomes, errors


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
    judges = _judges(label_set, judge_names, judge_options or {})
    needs_model = [j.name for j in judges if not _deterministic(j)]
    if needs_model and not judge_models:
        raise ScenarioError(f"judges {', '.join(needs_model)} call a model: pass --model judge=provider/model")
    _check_models(judge_models)
    stats = CallStats()
    scenario = _scenario(judge_models, votes, seed)
    outcomes, errors = await _judge_all(
        label_set, judges, judge_models, scenario, stats, concurrency=concurrency, seed=seed
    )
    result = CalibrationResult(label_set.name, len(label_set.examples))
    labels = spec_labels([m.model_dump(mode="json") for m in judge_models])
    for judge in judges:
        models = [] if _deterministic(judge) else [m.model for m in judge_models]
        result.judges[judge.name] = judge_entry(
            label_set, judge.name, outcomes[judge.name], errors[judge.name], models=models, labels=labels, seed=seed
        )
    result.duration_s = round(time.perf_counter() - started, 3)
    result.calls = {"requests": stats.requests, "retries": stats.retries, "failures": stats.failures}
    result.human_rates = human_rates(label_set)
    result.annotator_agreement = label_set.annotator_agreement
    return result


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
