"""The `litellm` provider: every model LiteLLM's Python SDK reaches (Gemini, Bedrock, Vertex, Azure, Mistral,
Ollama, ...), as `litellm/<litellm model>`, e.g. `litellm/gemini/gemini-2.0-flash` (the `litellm` extra).

LiteLLM takes seconds to import, so it is imported when a scenario that uses it is checked (or, if it was not,
in a worker thread on the first call, never on the event loop), and never for a scenario that does not use it;
its cost map is the copy in the installed package (no download at import). Its retries are off
(`num_retries=0`, `max_retries=0`): simrun's retry layer is the only one. Its exceptions carry the upstream
status, which goes through the wire module's one table.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from engine.core._errors import ProviderError, ProviderTimeout, ScenarioError
from engine.core._events import redact_url
from engine.core._records import Usage
from engine.models._provider import ChatModel, ChatReply, ChatRequest
from engine.models._wire import provider_error, response_format
from engine.scenario._spec import ModelSpec

__all__ = ("LiteLLMChatModel", "load_litellm")

_module: Any = None


def load_litellm() -> Any:
    """The `litellm` module, reading its bundled cost map rather than fetching one; a clear error when absent."""
    global _module
    if _module is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            _module = importlib.import_module("litellm")
        except ImportError:
            raise ScenarioError("litellm/... models need LiteLLM: pip install 'simrun[litellm]'") from None
    return _module


class LiteLLMParams(BaseModel):
    """Generation parameters for `litellm.acompletion`; ones a provider does not take are dropped by LiteLLM."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None
    """Provider-specific arguments, passed to `acompletion` as they are."""


class LiteLLMChatModel(ChatModel):
    """One LiteLLM route; the key, when `api_key_env` names one, is passed explicitly (and so is redacted)."""

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[BaseModel] | None:
        return LiteLLMParams

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        load_litellm()  # seconds, once, while the scenario is checked: not inside the probe's deadline
        if spec.api_key_env is not None and not os.environ.get(spec.api_key_env):
            raise ScenarioError(f"{role} model {spec.model}: set ${spec.api_key_env} (its api_key_env)")

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.base_url = spec.base_url
        self._key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        if self._key is None and spec.base_url is not None:
            self._key = "unused"  # a local server without a key: LiteLLM's OpenAI route insists on one

    async def list_models(self) -> list[str]:
        """LiteLLM has no model list common to its providers: an empty one makes the probe's one-token call decide."""
        return []

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        litellm = _module if _module is not None else await anyio.to_thread.run_sync(load_litellm)
        params = {key: value for key, value in request.params.items() if value is not None}
        extra = params.pop("extra_body", None) or {}
        wanted = response_format(
            request.json_output, request.response_schema, request.context.task, self.spec.structured_output
        )
        if wanted is not None:
            params.setdefault("response_format", wanted)
        with self._translated(litellm):
            response = await litellm.acompletion(
                model=self.spec.name,
                messages=[dict(m) for m in request.messages],
                api_base=self.base_url,
                api_key=self._key,
                timeout=self.spec.timeout_s,
                num_retries=0,
                max_retries=0,
                seed=request.seed,
                drop_params=True,
                **params,
                **extra,
            )
        try:
            text = response.choices[0].message.content
            usage = response.usage
            reply_usage = Usage(
                prompt_tokens=max(0, int(getattr(usage, "prompt_tokens", 0) or 0)),
                completion_tokens=max(0, int(getattr(usage, "completion_tokens", 0) or 0)),
            )
        except (AttributeError, TypeError, IndexError, ValueError) as exc:
            raise self._error(f"malformed response ({type(exc).__name__})", malformed=True) from None
        return ChatReply(text=text if isinstance(text, str) else "", usage=reply_usage, model=self.spec.model)

    def _error(self, detail: str, *, malformed: bool = False) -> ProviderError:
        where = redact_url(self.base_url) if self.base_url else None
        return ProviderError(self.spec.model, detail, malformed=malformed, endpoint=where)

    @contextmanager
    def _translated(self, litellm: Any) -> Iterator[None]:
        model = self.spec.model
        where = redact_url(self.base_url) if self.base_url else None
        errors = litellm.exceptions
        base = sys.modules["openai"].OpenAIError  # LiteLLM's status errors derive from the openai SDK's, not its own
        try:
            yield
        except errors.Timeout as exc:
            raise ProviderTimeout(model, "request timed out", endpoint=where) from exc
        except errors.APIConnectionError as exc:
            raise ProviderError(model, f"connection failed ({_short(exc)})", endpoint=where) from exc
        except (errors.APIError, errors.OpenAIError, base) as exc:
            status = getattr(exc, "status_code", None)
            if not isinstance(status, int):
                raise ProviderError(model, _short(exc), endpoint=where) from exc
            response = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            code = getattr(exc, "code", None)
            raise provider_error(model, status, code, _short(exc), headers, endpoint=where) from exc


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc)
    return text if len(text) <= 300 else text[:300] + "…"
