"""The `anthropic` provider: Claude through Anthropic's Messages API and its official SDK (the `anthropic` extra).

Imported only when a scenario names an `anthropic/...` model. The SDK's own retries are off: simrun's retry layer
is the only one. The Messages API differs from the chat wire in three ways this module absorbs: the system prompt
is a parameter, the turns must start with the user and alternate, and JSON output is asked for by a schema
(`output_config`) rather than a JSON mode — without a schema, the instruction to answer in JSON goes in the system
prompt. Status errors go through the wire module's one table, so a 429 or a 529 (overloaded) is retried like
any other provider's and a spent credit balance is final.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.core._errors import MissingCredentials, ProviderError, ProviderTimeout, ScenarioError
from engine.core._events import redact_url
from engine.core._records import Usage
from engine.models._provider import ChatModel, ChatReply, ChatRequest
from engine.models._wire import provider_error
from engine.scenario._spec import ModelSpec

__all__ = ("AnthropicChatModel", "messages_api_turns")

KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 1024
JSON_INSTRUCTION = "Answer with one JSON object and nothing else."
_QUOTA_TYPES = frozenset({"billing_error"})


class AnthropicParams(BaseModel):
    """Generation parameters of `messages.create`; `max_tokens` is required by the API (default 1024)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=1)
    stop_sequences: list[str] | None = None
    output_config: dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None


def messages_api_turns(messages: Sequence[Mapping[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """The system prompt and the turns as the Messages API takes them: alternating, starting with the user.

    A dialogue the tutor opens (the fairness protocol's scripted opening) starts with an assistant turn; a short
    user turn goes before it. Consecutive turns of one role are joined.
    """
    system = "\n\n".join(m.get("content", "") for m in messages if m.get("role") == "system")
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + "\n\n" + message.get("content", "")}
        else:
            turns.append({"role": str(role), "content": message.get("content", "")})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": "Hello."})
    return system, turns


class AnthropicChatModel(ChatModel):
    """One `AsyncAnthropic` client per endpoint, its retries off."""

    default_key_env = KEY_ENV

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[BaseModel] | None:
        return AnthropicParams

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        _sdk()
        variable = spec.api_key_env or KEY_ENV
        if not os.environ.get(variable):
            raise MissingCredentials(role, variable)

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        anthropic = _sdk()
        self.base_url = spec.base_url or "https://api.anthropic.com"
        self._client = anthropic.AsyncAnthropic(
            api_key=os.environ.get(spec.api_key_env or KEY_ENV),
            base_url=spec.base_url,
            max_retries=0,
            timeout=spec.timeout_s,
        )

    async def list_models(self) -> list[str]:
        """The ids of `GET /v1/models`, for the probe."""
        with self._translated():
            page = await self._client.models.list(limit=1000)
        return [str(row.id) for row in page.data]

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        system, turns = messages_api_turns(request.messages)
        params = dict(request.params)
        extra_body = params.pop("extra_body", None)
        max_tokens = params.pop("max_tokens", None) or params.pop("max_completion_tokens", None) or DEFAULT_MAX_TOKENS
        params = {key: value for key, value in params.items() if value is not None and key in _SENT}
        schema = request.response_schema
        if schema is not None and "output_config" not in params:
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        elif request.json_output:
            system = f"{system}\n\n{JSON_INSTRUCTION}".strip()
        if system:
            params["system"] = system
        with self._translated():
            message = await self._client.messages.create(
                model=self.spec.name, max_tokens=int(max_tokens), messages=turns, extra_body=extra_body, **params
            )
        try:
            text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
            usage = Usage(
                prompt_tokens=max(0, int(message.usage.input_tokens)),
                completion_tokens=max(0, int(message.usage.output_tokens)),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise ProviderError(
                self.spec.model, f"malformed response ({type(exc).__name__})", malformed=True, endpoint=self._where
            ) from None
        return ChatReply(text=text, usage=usage, model=self.spec.model)

    @property
    def _where(self) -> str:
        return redact_url(self.base_url)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        anthropic = _sdk()
        model, where = self.spec.model, self._where
        try:
            yield
        except anthropic.APITimeoutError as exc:
            raise ProviderTimeout(model, "request timed out", endpoint=where) from exc
        except anthropic.APIConnectionError as exc:
            cause = type(exc.__cause__ or exc).__name__
            raise ProviderError(model, f"connection failed ({cause})", endpoint=where) from exc
        except anthropic.APIStatusError as exc:
            error = exc.body.get("error") if isinstance(exc.body, dict) else None
            kind = error.get("type") if isinstance(error, dict) else None
            message = str(error.get("message")) if isinstance(error, dict) and error.get("message") else exc.message
            code = "insufficient_quota" if kind in _QUOTA_TYPES else kind
            raise provider_error(model, exc.status_code, code, message, exc.response.headers, endpoint=where) from exc
        except (anthropic.APIResponseValidationError, ValueError) as exc:
            raise ProviderError(
                model, f"malformed response: {type(exc).__name__}", malformed=True, endpoint=where
            ) from exc

    async def aclose(self) -> None:
        await self._client.close()


_SENT = frozenset({"temperature", "top_p", "top_k", "stop_sequences", "output_config"})


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError:
        raise ScenarioError("anthropic/... models need the Anthropic SDK: pip install 'simrun[anthropic]'") from None
    return anthropic
