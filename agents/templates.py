"""Sandboxed prompt templates: a scenario's text can reference the item and condition, and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ("check_template", "render")

_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


@lru_cache(maxsize=256)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def check_template(source: str) -> str:
    """Compile once at load time so a broken template is a scenario error, not a mid-run failure."""
    try:
        _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error on line {exc.lineno}: {exc.message}") from None
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
