"""Plug-in checks: every name a scenario uses resolved and its options validated once, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from engine.core._errors import ScenarioError, SimError
from engine.core._inputs import check_input_path
from engine.models._provider import PROVIDERS
from engine.runtime._modes import mode_of
from engine.runtime._plugins import (
    JUDGES,
    PROTOCOLS,
    STUDENTS,
    SUMMARIZERS,
    TUTORS,
    AgentFactory,
    DialogueProtocol,
    Judge,
    Summarizer,
    options_model,
)
from engine.scenario._data import item_path as data_item_path
from engine.scenario._items import ITEM_SOURCES
from engine.scenario._load import (
    apply_overrides,
    dotted,
    format_validation,
    location,
    read_scenario_data,
    validate_scenario,
)
from engine.scenario._plan import DESIGNS, Design
from engine.scenario._spec import Scenario

__all__ = ("Plugins", "build_scenario", "check_scenario", "load_checked", "load_scenario")


@dataclass(frozen=True)
class Plugins:
    """Every plug-in a scenario names, resolved once with its options validated once.

    Agents keep per-episode state, so they stay factories with their validated options; judges, the design,
    the protocol and the summariser are shared by every episode and are built here.
    """

    protocol: DialogueProtocol
    summarizer: Summarizer
    tutor_factory: AgentFactory
    tutor_options: BaseModel
    student_factory: AgentFactory
    student_options: BaseModel
    judges: tuple[Judge, ...]
    design: Design | None


def load_scenario(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    models: Sequence[str] = (),
    check_credentials: bool = True,
) -> Scenario:
    """Read, override (`--set a.b=v`, `--model role=provider/name`), validate and check a scenario file."""
    return load_checked(path, overrides=overrides, models=models, check_credentials=check_credentials)[0]


def load_checked(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    models: Sequence[str] = (),
    check_credentials: bool = True,
) -> tuple[Scenario, Plugins]:
    """`load_scenario`, with the plug-ins its check resolved, so that building it validates nothing again."""
    path = Path(path)
    data, tree = read_scenario_data(path)
    mode = mode_of(data)
    if mode is not None:
        raise ScenarioError(f"{path} is {mode.noun}: run it with `{mode.command} {path}`")
    data = apply_overrides(data, overrides=overrides, models=models)
    scenario = validate_scenario(data, base_dir=path.resolve().parent, source=str(path), tree=tree)
    plugins = check_scenario(scenario, source=str(path), tree=tree, check_credentials=check_credentials)
    return scenario, plugins


def build_scenario(
    data: Mapping[str, Any],
    *,
    base_dir: Path | str | None = None,
    source: str = "<scenario>",
    tree: yaml.Node | None = None,
    check_credentials: bool = True,
) -> Scenario:
    """Validate plain data (from YAML or code) into a checked `Scenario`."""
    base = Path(base_dir) if base_dir is not None else None
    scenario = validate_scenario(data, base_dir=base, source=source, tree=tree)
    check_scenario(scenario, source=source, tree=tree, check_credentials=check_credentials)
    return scenario


def check_scenario(
    scenario: Scenario,
    *,
    source: str = "<scenario>",
    tree: yaml.Node | None = None,
    check_credentials: bool = True,
) -> Plugins:
    """Resolve every plug-in name and validate its options, so nothing fails by name mid-run."""

    def fail(loc: Sequence[str | int], message: str) -> ScenarioError:
        return ScenarioError(f"{source}{location(tree, loc)}: {dotted(loc)}: {message}")

    def resolve(registry: Any, name: str, loc: Sequence[str | int], options: Mapping[str, Any] | None) -> Any:
        try:
            plugin = registry.get(name)
        except SimError as exc:
            raise fail(loc, str(exc)) from None
        if options is None:
            return plugin, None
        model = options_model(plugin)
        try:
            return plugin, model.model_validate(options)
        except ValidationError as exc:
            raise ScenarioError(format_validation(exc, source, tree, prefix=tuple(loc[:-1]), root=model)) from None

    def built(registry: Any, name: str, loc: Sequence[str | int], options: Mapping[str, Any]) -> Any:
        factory, validated = resolve(registry, name, loc, options)
        return factory(validated)

    protocol, _ = resolve(PROTOCOLS, scenario.kind, ("kind",), None)
    spec = scenario.design
    design = None if spec is None or spec.name is None else built(DESIGNS, spec.name, ("design", "name"), spec.options)
    summarizer, _ = resolve(SUMMARIZERS, scenario.kind, ("kind",), None)
    tutor, tutor_options = resolve(TUTORS, scenario.tutor.agent, ("tutor", "agent"), scenario.tutor.options)
    student, student_options = resolve(
        STUDENTS, scenario.student.strategy, ("student", "strategy"), scenario.student.options
    )
    judges = tuple(built(JUDGES, j.name, ("judges", i, "name"), j.options) for i, j in enumerate(scenario.judges))
    plugins = Plugins(protocol, summarizer, tutor, tutor_options, student, student_options, judges, design)
    _check_items(scenario, fail, resolve)
    _check_models(scenario, fail, source, tree, check_credentials)
    needs_model = [judge.name for judge in plugins.judges if getattr(judge, "model_calls", 1) > 0]
    if needs_model and not scenario.models.judge:
        raise fail(("models", "judge"), f"judges {', '.join(needs_model)} call a model: set at least one judge model")
    return plugins


def _check_items(scenario: Scenario, fail: Any, resolve: Any) -> None:
    for i, item_source in enumerate(scenario.items):
        # Sources that declare an `Options` model get their options checked here; others check their own.
        declared = item_source.source in ITEM_SOURCES and hasattr(ITEM_SOURCES.get(item_source.source), "Options")
        resolve(ITEM_SOURCES, item_source.source, ("items", i, "source"), item_source.options if declared else None)
        try:
            item_path = data_item_path(scenario, item_source)
        except ScenarioError as exc:
            raise fail(("items", i, "path"), str(exc)) from None
        if not item_path.exists():
            raise fail(("items", i, "path"), f"no such file {item_source.path!r} (relative to {scenario.base_dir})")
        try:
            check_input_path(item_path, "item file", allow_dir=True)
        except ScenarioError as exc:
            raise fail(("items", i, "path"), str(exc)) from None


def _check_models(scenario: Scenario, fail: Any, source: str, tree: yaml.Node | None, check_credentials: bool) -> None:
    for role, loc, spec in _model_specs(scenario):
        try:
            implementation = PROVIDERS.get(spec.provider)()
        except SimError as exc:
            raise fail((*loc, "model"), str(exc)) from None
        try:
            if check_credentials or spec.provider == "sim":
                implementation.check(spec, role)
        except ScenarioError as exc:
            raise fail(loc, str(exc)) from None
        params_model = implementation.params_model(spec)
        if params_model is not None:
            try:
                params_model.model_validate(spec.params)
            except ValidationError as exc:
                raise ScenarioError(
                    format_validation(exc, source, tree, prefix=(*loc, "params"), root=params_model)
                ) from None


def _model_specs(scenario: Scenario) -> list[tuple[str, tuple[str | int, ...], Any]]:
    """Each model with its role and its location in the YAML (judges are a list)."""
    judges = iter(range(len(scenario.models.judge)))
    return [
        (role, ("models", role, next(judges)) if role == "judge" else ("models", role), spec)
        for role, spec in scenario.models.by_role()
    ]
