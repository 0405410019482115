"""Scenario loading: YAML → overrides → strict validation → plug-in checks, every failure a `ScenarioError`.

Messages name the file, the line where it can be found, the dotted path and what was expected.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ScenarioError, SimError
from .inputs import check_input_path, parse_yaml, read_input
from .items import ITEM_SOURCES
from .modes import mode_of
from .plan import DESIGNS, Design
from .plugins import (
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
from .providers import PROVIDERS
from .spec import Scenario

__all__ = (
    "Plugins",
    "apply_overrides",
    "build_scenario",
    "check_scenario",
    "load_checked",
    "load_scenario",
    "parse_model_override",
)

_ROLES = ("tutor", "student", "judge")
_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict", "tuple", "none"})


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
    data, tree = parse_yaml(read_input(path, "scenario file"), str(path))
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario must be a YAML mapping, got {type(data).__name__}")
    mode = mode_of(data)
    if mode is not None:
        raise ScenarioError(f"{path} is {mode.noun}: run it with `{mode.command} {path}`")
    data = apply_overrides(data, overrides=overrides, models=models)
    scenario = _validated(data, base_dir=path.resolve().parent, source=str(path), tree=tree)
    plugins = check_scenario(scenario, source=str(path), tree=tree, check_credentials=check_credentials)
    return scenario, plugins


def build_scenario(
    data: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    source: str = "<scenario>",
    tree: yaml.Node | None = None,
    check_credentials: bool = True,
) -> Scenario:
    """Validate plain data (from YAML or code) into a checked `Scenario`."""
    scenario = _validated(data, base_dir=base_dir, source=source, tree=tree)
    check_scenario(scenario, source=source, tree=tree, check_credentials=check_credentials)
    return scenario


def _validated(data: Mapping[str, Any], *, base_dir: Path | None, source: str, tree: yaml.Node | None) -> Scenario:
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_format_validation(exc, source, tree)) from None
    return scenario if base_dir is None else scenario.with_base_dir(base_dir)


def check_scenario(
    scenario: Scenario,
    *,
    source: str = "<scenario>",
    tree: yaml.Node | None = None,
    check_credentials: bool = True,
) -> Plugins:
    """Resolve every plug-in name and validate its options, so nothing fails by name mid-run."""

    def fail(loc: Sequence[str | int], message: str) -> ScenarioError:
        return ScenarioError(f"{source}{_line(tree, loc)}: {_dotted(loc)}: {message}")

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
            raise ScenarioError(_format_validation(exc, source, tree, prefix=tuple(loc[:-1]), root=model)) from None

    def built(registry: Any, name: str, loc: Sequence[str | int], options: Mapping[str, Any]) -> Any:
        factory, validated = resolve(registry, name, loc, options)
        return factory(validated)

    protocol, _ = resolve(PROTOCOLS, scenario.kind, ("kind",), None)
    spec = scenario.design
    design = None if spec is None else built(DESIGNS, spec.name, ("design", "name"), spec.options)
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
        item_path = scenario.base_dir / item_source.path
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
                    _format_validation(exc, source, tree, prefix=(*loc, "params"), root=params_model)
                ) from None


def _model_specs(scenario: Scenario) -> list[tuple[str, tuple[str | int, ...], Any]]:
    """Each model with its role and its location in the YAML (judges are a list)."""
    judges = iter(range(len(scenario.models.judge)))
    return [
        (role, ("models", role, next(judges)) if role == "judge" else ("models", role), spec)
        for role, spec in scenario.models.by_role()
    ]


def apply_overrides(
    data: Mapping[str, Any], *, overrides: Sequence[str] = (), models: Sequence[str] = ()
) -> dict[str, Any]:
    """Apply `--model role=spec` then `--set dotted.path=yaml-value` to a scenario's raw data (a deep copy).

    A role or plug-in written in its short form (`tutor: openai/x`, `judges: [harm]`) becomes a mapping when
    `--set` reaches a key under it, so `--set models.tutor.base_url=...` works whichever way the file says it.
    """
    result: dict[str, Any] = _deep_copy(dict(data))
    for assignment in models:
        role, sep, text = assignment.partition("=")
        if not sep or role not in _ROLES or not text.strip():
            raise ScenarioError(
                f"--model {assignment!r}: expected ROLE=provider/model or ROLE='{{model: provider/model, ...}}' "
                f"with ROLE one of {', '.join(_ROLES)}"
            )
        spec = parse_model_override(text, f"--model {assignment!r}")
        section = result.setdefault("models", {})
        if not isinstance(section, dict):
            raise ScenarioError("models: expected a mapping of role to model")
        section[role] = [spec] if role == "judge" else spec
    for assignment in overrides:
        dotted, sep, raw = assignment.partition("=")
        if not sep or not dotted:
            raise ScenarioError(f"--set {assignment!r}: expected dotted.path=VALUE")
        value, _ = parse_yaml(raw, f"--set {assignment!r}")
        _set_path(result, dotted.split("."), value, assignment)
    return result


def parse_model_override(text: str, what: str) -> str | dict[str, Any]:
    """A model given on the command line: `provider/model`, or a YAML mapping such as
    `{model: openai/x, base_url: http://localhost:8000/v1}` (validated later, with the scenario)."""
    if not text.lstrip().startswith("{"):
        return text.strip()
    value, _ = parse_yaml(text, what)
    if not isinstance(value, dict):
        raise ScenarioError(f"{what}: expected a mapping such as {{model: openai/x, base_url: http://...}}")
    return value


def _set_path(data: Any, keys: list[str], value: Any, assignment: str) -> None:
    shape: Any = Scenario
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        if isinstance(data, list):
            if not key.isdigit() or int(key) >= len(data):
                raise ScenarioError(f"--set {assignment!r}: {key!r} is not an index of a list of {len(data)}")
            index: int | str = int(key)
            shape = _item_shape(shape)
        elif isinstance(data, dict):
            index = key
            shape = _field_shape(shape, key)
            if not last:
                data.setdefault(key, {})
        else:
            raise ScenarioError(f"--set {assignment!r}: {'.'.join(keys[:depth])} is not a mapping or a list")
        if last:
            data[index] = value
            return
        data[index] = _promoted(data[index], shape)
        data = data[index]


def _promoted(value: Any, shape: Any) -> Any:
    """A short-form value as the container the schema expects there, so a key can be set under it."""
    if isinstance(value, dict | list) or value is None:
        return value
    if get_origin(shape) is list:
        return [value]
    key = getattr(shape, "short_key", None)
    return {key: value} if isinstance(value, str) and key else value


def _container(annotation: Any) -> Any:
    """The list type or model class in an annotation (through `X | None`), or None."""
    if get_origin(annotation) is list or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        return next((found for arg in get_args(annotation) if (found := _container(arg)) is not None), None)
    return None


def _field_shape(shape: Any, key: str) -> Any:
    if isinstance(shape, type) and issubclass(shape, BaseModel) and key in shape.model_fields:
        return _container(shape.model_fields[key].annotation)
    return None


def _item_shape(shape: Any) -> Any:
    return _container(get_args(shape)[0]) if get_origin(shape) is list else None


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _dotted(loc: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def _format_validation(
    exc: ValidationError,
    source: str,
    tree: yaml.Node | None,
    prefix: tuple[str | int, ...] = (),
    root: type[BaseModel] = Scenario,
) -> str:
    lines = [f"invalid scenario {source}:"]
    for error in exc.errors(include_url=False):
        own = _clean_loc(error["loc"])
        loc = (*prefix, *own)
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key"
            model = _model_at(root, own[:-1])
            if model is not None:
                message += f"; expected one of: {', '.join(model.model_fields)}"
        elif "input" in error and error["type"] not in ("missing",) and not isinstance(error["input"], dict | list):
            message += f" (got {error['input']!r})"
        lines.append(f"  {source}{_line(tree, loc)}: {_dotted(loc)}: {message}")
    return "\n".join(lines)


def _clean_loc(loc: Sequence[str | int]) -> tuple[str | int, ...]:
    # pydantic adds union-branch and validator names (`ModelSpec`, `int`, `function-before[...]`) to locations.
    return tuple(
        part
        for part in loc
        if not (isinstance(part, str) and (part[:1].isupper() or "[" in part or part in _TYPE_NAMES))
    )


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = _first_model(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _line(tree: yaml.Node | None, loc: Sequence[str | int]) -> str:
    node = tree
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == str(part)), None)
            if child is None:  # point at the key for an unknown one
                child = next((k for k, _ in node.value if getattr(k, "value", None) == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return f":{line}" if line is not None else ""
