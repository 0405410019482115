"""Sandboxed templates for scenario text (prompts, cues, scripted lines): user text is rendered, never run.

One place decides how templates are compiled and checked, so every plug-in rejects the same mistakes the same
way: syntax errors, variables the caller does not provide, and operations the sandbox forbids. A render is
also bounded: every value it builds stays under `MAX_TEMPLATE_CHARS` (checked before a `*`, `**`, padding or
replacement allocates, and after each filter, call and `~`), loops and calls share `MAX_TEMPLATE_STEPS`,
and a render stops after `MAX_RENDER_S`. Jinja's own sandbox bounds `range` alone, and only per call.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import operator
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any, Final

import jinja2
from jinja2 import meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ("MAX_RENDER_S", "MAX_TEMPLATE_CHARS", "MAX_TEMPLATE_STEPS", "check_template", "render")

MAX_TEMPLATE_CHARS: Final = 1_000_000
"""Longest string (or list) a template may build, and longest output."""
MAX_TEMPLATE_STEPS: Final = 200_000
"""Loop iterations plus calls in one render."""
MAX_RENDER_S: Final = 2.0
"""Wall-clock limit of one render."""
_MAX_POWER_BITS: Final = 4096
_BIG_WIDTH = re.compile(r"\d{7,}")  # a format width or precision of a million or more


class _Budget:
    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_RENDER_S

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_TEMPLATE_STEPS:
            raise SecurityError(f"the template takes more than {MAX_TEMPLATE_STEPS:,} loop steps and calls")
        if self.steps % 256 == 0 and time.monotonic() > self.deadline:
            raise SecurityError(f"the template takes longer than {MAX_RENDER_S:g} s to render")


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("template_budget", default=None)


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.tick()


def _sized(value: Any) -> Any:
    if isinstance(value, str | list | tuple | bytes) and len(value) > MAX_TEMPLATE_CHARS:
        raise SecurityError(f"the template builds a value longer than {MAX_TEMPLATE_CHARS:,}")
    return value


def _check_args(args: Iterable[Any]) -> None:
    for arg in args:
        if isinstance(arg, int) and abs(arg) > MAX_TEMPLATE_CHARS:
            raise SecurityError(f"the template passes a number over {MAX_TEMPLATE_CHARS:,} to a call")
        if isinstance(arg, str) and "%" in arg and _BIG_WIDTH.search(arg):
            raise SecurityError("the template formats with a width or precision of a million or more")


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    for value in iterable:
        _tick()
        yield value


def _replace_size(text: str, old: str, new: str, count: int = -1) -> None:
    hits = text.count(old) if old else len(text) + 1
    if count >= 0:
        hits = min(hits, count)
    _sized_len(len(text) + hits * (len(new) - len(old)))


def _sized_len(length: int) -> None:
    if length > MAX_TEMPLATE_CHARS:
        raise SecurityError(f"the template builds a value longer than {MAX_TEMPLATE_CHARS:,}")


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox plus size, step and time limits (see the module docstring)."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def call_binop(self, context: jinja2.runtime.Context, operator_name: str, left: Any, right: Any) -> Any:
        _tick()
        if operator_name == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int):
                    _sized_len(len(seq) * max(times, 0))
        elif operator_name == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right * abs(left).bit_length() > _MAX_POWER_BITS:
                raise SecurityError(f"the template computes a power of more than {_MAX_POWER_BITS} bits")
        elif operator_name == "%" and isinstance(left, str):
            _check_args([left])
        return _sized(super().call_binop(context, operator_name, left, right))

    def call(self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        _check_args([*args, *kwargs.values()])
        target = inspect.unwrap(__obj)  # the sandbox wraps str.format
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str) and getattr(target, "__name__", None) == "replace":
            _replace_size(owner, *args, **kwargs)
        if isinstance(owner, str) and getattr(target, "__name__", None) in ("format", "format_map"):
            _check_args([owner.replace("{", "%")])
        return _sized(super().call(__context, __obj, *args, **kwargs))

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "_bounded_iter", [], [], None, None, lineno=loop.lineno)
        for node in [*tree.find_all(nodes.Filter), *tree.find_all(nodes.Concat)]:
            if not (isinstance(node, nodes.Filter) and (node.name == "_bounded_iter" or node.node is None)):
                _wrap_sized(tree, node)
        return tree


def _wrap_sized(tree: nodes.Node, target: nodes.Expr) -> None:
    """Replace `target` in its parent by `target|_sized`."""
    for parent in tree.find_all(nodes.Node):
        for field in parent.fields:
            value = getattr(parent, field, None)
            if value is target:
                setattr(parent, field, nodes.Filter(target, "_sized", [], [], None, None, lineno=target.lineno))
                return
            if isinstance(value, list):
                for index, entry in enumerate(value):
                    if entry is target:
                        value[index] = nodes.Filter(target, "_sized", [], [], None, None, lineno=target.lineno)
                        return


def _checked_filter(name: str, check: Callable[..., None] | None = None) -> Callable[..., Any]:
    """A built-in filter that checks its arguments first (keeping Jinja's pass-context marker)."""
    original: Callable[..., Any] = _ENV.filters[name]
    skip = 1 if getattr(original, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _tick()
        _check_args([*args[skip:], *kwargs.values()])
        if check is not None:
            check(*args[skip:], **kwargs)
        return original(*args, **kwargs)

    return checked


def _check_replace(text: Any, old: Any, new: Any, count: int | None = None) -> None:
    _replace_size(str(text), str(old), str(new), -1 if count is None else operator.index(count))


_ENV = _BoundedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
_ENV.filters["_bounded_iter"] = _bounded_iter
_ENV.filters["_sized"] = _sized
for _name in ("center", "indent", "wordwrap", "truncate", "format", "join"):
    _ENV.filters[_name] = _checked_filter(_name)
_ENV.filters["replace"] = _checked_filter("replace", _check_replace)


@lru_cache(maxsize=256)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def check_template(source: str, allowed: Iterable[str] | None = None) -> str:
    """Compile once at load time so a broken template is a scenario error, not a mid-run failure.

    Args:
        source: The template text.
        allowed: The only variables it may use (None: any; missing ones then fail when rendered).
    """
    try:
        tree = _ENV.parse(source)
        _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error on line {exc.lineno}: {exc.message}") from None
    except (RecursionError, MemoryError):
        raise ValueError("template is nested too deeply") from None
    if allowed is not None:
        names = sorted(set(allowed))
        unknown = sorted(meta.find_undeclared_variables(tree) - set(names))
        if unknown:
            raise ValueError(
                f"template refers to {', '.join(map(repr, unknown))}, which is not provided here; "
                f"available: {', '.join(names)}"
            )
    return source


def render(source: str, variables: Mapping[str, Any]) -> str:
    """Render in the sandbox, within the limits; a missing variable is an error rather than an empty string."""
    token = _BUDGET.set(_Budget())
    try:
        parts: list[str] = []
        length = 0
        for chunk in _compile(source).generate(**variables):
            length += len(chunk)
            _sized_len(length)
            parts.append(chunk)
        return "".join(parts).strip()
    except jinja2.UndefinedError as exc:
        raise ValueError(f"template refers to an unknown value: {exc.message}") from None
    except SecurityError as exc:
        raise ValueError(f"template tried an unsafe operation: {exc}") from None
    except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError) as exc:
        raise ValueError(f"template failed: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise ValueError("template failed: it recurses too deeply") from None
    except MemoryError:
        raise ValueError("template failed: it needs too much memory") from None
    finally:
        _BUDGET.reset(token)
