"""Sandboxed templates for scenario text (prompts, cues, scripted lines): user text is rendered, never run.

One place decides how templates are compiled and checked, so every plug-in rejects the same mistakes the same
way: syntax errors, variables the caller does not provide, and operations the sandbox forbids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ("check_template", "render")

_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


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
    """Render in the sandbox; a missing variable is an error rather than an empty string."""
    try:
        return _compile(source).render(**variables).strip()
    except jinja2.UndefinedError as exc:
        raise ValueError(f"template refers to an unknown value: {exc.message}") from None
    except SecurityError as exc:
        raise ValueError(f"template tried an unsafe operation: {exc}") from None
    except (jinja2.TemplateError, ArithmeticError, TypeError) as exc:
        raise ValueError(f"template failed: {type(exc).__name__}: {exc}") from None
