"""Scenario loading: YAML → overrides → strict validation → plug-in checks, every failure a `ScenarioError`.

Messages name the file, the line where it can be found, the dotted path and what was expected.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from engine.core._errors import ScenarioError
from engine.core._inputs import parse_yaml, read_input
from engine.scenario._spec import Scenario

__all__ = (
    "apply_overrides",
    "dotted",
    "format_validation",
    "location",
    "parse_model_override",
    "read_scenario_data",
    "validate_scenario",
)

MAX_ERRORS_SHOWN = 20
"""Validation errors listed in one message; the rest are counted."""
_ROLES = ("tutor", "student", "judge")
_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict", "tuple", "none"})


def read_scenario_data(path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
    """A scenario file's mapping and YAML tree (for line numbers), read within the input bounds."""
    data, tree = parse_yaml(read_input(path, "scenario file"), str(path))
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario must be a YAML mapping, got {type(data).__name__}")
    return data, tree


def validate_scenario(
    data: Mapping[str, Any], *, base_dir: Path | None, source: str, tree: yaml.Node | None
) -> Scenario:
    """Strict validation with each error located in the YAML; plug-in names are checked by the run layer."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_validation(exc, source, tree)) from None
    if base_dir is None:
        return scenario
    return scenario.with_base_dir(base_dir, source if source.endswith((".yaml", ".yml")) else "")


def apply_overrides(
    data: Mapping[str, Any], *, overrides: Sequence[str] = (), models: Sequence[str] = ()
) -> dict[str, Any]:
    """Apply `--model role=spec` then `--set dotted.path=yaml-value` to a scenario's raw data (a deep copy).

    A role or plug-in written in its short form (`tutor: openai/x`, `judges: [harm]`) becomes a mapping when
    `--set` reaches a key under it, so `--set models.tutor.base_url=...` works whichever way the file says it.
    """
    result: dict[str, Any] = _deep_copy(dict(data))
    tutors: list[str | dict[str, Any]] = []
    for assignment in models:
        role, sep, text = assignment.partition("=")
        if not sep or role not in _ROLES or not text.strip():
            raise ScenarioError(
                f"--model {assignment!r}: expected ROLE=provider/model or ROLE='{{model: provider/model, ...}}' "
                f"with ROLE one of {', '.join(_ROLES)}"
            )
        spec = parse_model_override(text, f"--model {assignment!r}")
        if isinstance(spec, list) and role == "student":
            raise ScenarioError(f"--model {assignment!r}: the student takes one model (a list is for judges or tutors)")
        section = result.setdefault("models", {})
        if not isinstance(section, dict):
            raise ScenarioError("models: expected a mapping of role to model")
        specs = spec if isinstance(spec, list) else [spec]
        if role == "judge":
            section[role] = specs
        elif role == "tutor":  # every --model tutor=... adds to the tutors: two or more make a study
            tutors.extend(specs)
            section[role] = tutors if len(tutors) > 1 else tutors[0]
        else:
            section[role] = spec
    for assignment in overrides:
        dotted, sep, raw = assignment.partition("=")
        if not sep or not dotted:
            raise ScenarioError(f"--set {assignment!r}: expected dotted.path=VALUE")
        value, _ = parse_yaml(raw, f"--set {assignment!r}")
        _set_path(result, dotted.split("."), value, assignment)
    return result


def parse_model_override(text: str, what: str) -> str | dict[str, Any] | list[str | dict[str, Any]]:
    """A model given on the command line: `provider/model`, a YAML mapping such as
    `{model: openai/x, base_url: http://localhost:8000/v1}`, or a YAML list of either (several judges that vote);
    validated later, with the scenario."""
    if not text.lstrip().startswith(("{", "[")):
        return text.strip()
    value, _ = parse_yaml(text, what)
    if isinstance(value, list) and value and all(isinstance(v, str | dict) for v in value):
        return value
    if not isinstance(value, dict):
        raise ScenarioError(
            f"{what}: expected a mapping such as {{model: openai/x, base_url: http://...}} or a list of them"
        )
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
    """The list type or model class in an annotation (through `X | None` and `Annotated`), or None."""
    if get_origin(annotation) is Annotated:
        return _container(get_args(annotation)[0])
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


def dotted(loc: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def format_validation(
    exc: ValidationError,
    source: str,
    tree: yaml.Node | None,
    prefix: tuple[str | int, ...] = (),
    root: type[BaseModel] = Scenario,
) -> str:
    lines = [f"invalid scenario {source}:"]
    errors = exc.errors(include_url=False)
    index = _KeyIndex()
    for error in errors[:MAX_ERRORS_SHOWN]:
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
        lines.append(f"  {source}{location(tree, loc, index)}: {dotted(loc)}: {message}")
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"  … and {len(errors) - MAX_ERRORS_SHOWN:,} more errors")
    return "\n".join(lines)


class _KeyIndex:
    """Each mapping node's keys indexed once, so locating every error costs the depth of its path, not a scan
    of the mapping (20,000 unknown keys were 20,000 scans of 20,000 keys)."""

    def __init__(self) -> None:
        self._by_node: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}

    def pair(self, node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
        found = self._by_node.get(id(node))
        if found is None:
            found = {}
            for k, v in node.value:
                found.setdefault(str(getattr(k, "value", "")), (k, v))
            self._by_node[id(node)] = found
        return found.get(key)


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


def location(tree: yaml.Node | None, loc: Sequence[str | int], index: _KeyIndex | None = None) -> str:
    index = index or _KeyIndex()
    node = tree
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            pair = index.pair(node, str(part))
            child = pair[1] if pair is not None else None
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return f":{line}" if line is not None else ""
