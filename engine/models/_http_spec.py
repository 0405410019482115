"""What an `http/...` tutor target is told in the scenario: the request as templates, the reply as JSONPaths.

A tutoring product is rarely a bare model: it has its own API, its own system prompt and often its own
conversation state. The request (method, URL, headers, body) is rendered in the template sandbox over the
dialogue; what comes back is read with JSONPath (jsonpath-ng, its extended grammar), so no code is needed
for the common shapes. Everything is checked when the scenario loads: a template that names a variable it
cannot have, a JSONPath that does not parse, a session mode without the path its session id comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.core._templates import check_template
from engine.models._wire import STREAM_END

__all__ = ("HttpProbe", "HttpStream", "HttpTarget", "HttpUsage", "jsonpath", "template_leaves")

COMMON_VARIABLES = frozenset({"base_url", "model", "session_id", "message", "system", "preamble", "episode", "turn"})
"""What every request template sees (see docs/http-tutor.md for each)."""
HISTORY_VARIABLES = frozenset({"messages"})
"""Only a stateless target gets the conversation: a product that keeps its own history must not get it twice."""
SECRET_VARIABLES = frozenset({"api_key"})
"""Only headers see the key (read from `api_key_env`), so it cannot end up in a body the product may echo."""
PROBE_VARIABLES = frozenset({"base_url", "model"})
_WHOLE_VARIABLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


@lru_cache(maxsize=256)
def jsonpath(expression: str) -> Any:
    """A compiled JSONPath (jsonpath-ng's extended grammar, with filters and arithmetic)."""
    from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
    from jsonpath_ng.ext.parser import parse

    try:
        return parse(expression)
    except (JsonPathLexerError, JsonPathParserError, Exception) as exc:  # the parser raises bare Exceptions too
        raise ValueError(f"not a JSONPath: {expression!r} ({exc})") from None


def whole_variable(text: str) -> str | None:
    """The variable a leaf consists of (`"{{ messages }}"`), whose value is then inserted as JSON, not text."""
    match = _WHOLE_VARIABLE.match(text)
    return match.group(1) if match else None


def template_leaves(value: Any) -> Iterator[str]:
    """Every string in a body (keys are literal), so each is checked as a template."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from template_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from template_leaves(item)


def _check_paths(value: str | None) -> str | None:
    if value is not None:
        jsonpath(value)
    return value


class HttpUsage(BaseModel):
    """Where the reply says how many tokens it cost (products often do not; then the turn counts zero)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    prompt_tokens: str | None = None
    completion_tokens: str | None = None

    _paths = field_validator("prompt_tokens", "completion_tokens")(_check_paths)


class HttpStream(BaseModel):
    """How a streamed (`text/event-stream`) reply is read: each `data:` event is JSON, `text` its piece."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = Field(description="JSONPath of one event's text piece, e.g. `$.delta`")
    done: str = STREAM_END.decode()
    """The `data:` payload that ends the stream (a stream may also just end)."""

    _paths = field_validator("text")(_check_paths)


class HttpProbe(BaseModel):
    """A request whose 2xx answer shows the product is up and takes the key (e.g. `GET {{ base_url }}/health`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: Literal["GET", "POST", "HEAD"] = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | list[Any] | str | None = None

    @model_validator(mode="after")
    def _templates(self) -> HttpProbe:
        for text in [self.url, *template_leaves(self.body)]:
            check_template(text, PROBE_VARIABLES)
        for text in self.headers.values():
            check_template(text, PROBE_VARIABLES | SECRET_VARIABLES)
        return self


class HttpTarget(BaseModel):
    """The `params` of an `http/...` model: one request per tutor turn, rendered from templates."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = "{{ base_url }}"
    method: Literal["POST", "PUT", "PATCH", "GET"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    """Header templates; secrets only through `{{ api_key }}`, the value of the model's `api_key_env`."""
    body: dict[str, Any] | list[Any] | str | None = None
    """A JSON body whose strings are templates (a string that is one variable, `"{{ messages }}"`, is sent as
    that value's JSON), or one template rendered as a text body."""
    session: Literal["none", "client", "server"] = "none"
    """`none`: every request carries the conversation. `client`: simrun names a session per episode and sends
    only the new student message. `server`: the product names it in its first reply (read at `session_id`)."""
    reply: str = "$.reply"
    """JSONPath of the tutor's text in the response (several matches are joined)."""
    session_id: str | None = None
    """JSONPath of the session id in the response (required with `session: server`)."""
    usage: HttpUsage | None = None
    stream: HttpStream | None = None
    """How to read a streamed reply; a response is read as a stream when its content type says so."""
    probe: HttpProbe | Literal[False] | None = None
    """Before the run: None sends one turn (`message` "Say OK.") in a new session; False declares it off."""

    _paths = field_validator("reply", "session_id")(_check_paths)

    @model_validator(mode="after")
    def _consistent(self) -> HttpTarget:
        if self.session == "server" and self.session_id is None:
            raise ValueError("session: server reads the product's session id from the reply: set `session_id`")
        variables = COMMON_VARIABLES | (HISTORY_VARIABLES if self.session == "none" else frozenset())
        why = "" if self.session == "none" else " (with a session, the product keeps the history: use `message`)"
        for text in [self.url, *template_leaves(self.body)]:
            try:
                check_template(text, variables)
            except ValueError as exc:
                raise ValueError(f"{exc}{why}") from None
        for text in self.headers.values():
            check_template(text, variables | SECRET_VARIABLES)
        return self
