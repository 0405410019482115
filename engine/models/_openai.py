"""The `openai` provider: any OpenAI-compatible chat (and embeddings) endpoint through the official SDK (httpx2).

This is the one module that imports `openai`, and only once an endpoint uses the SDK transport (the import takes
seconds); it translates the SDK's errors into simrun's tree, status errors through the wire module's one table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from engine.core._errors import MissingCredentials, ProviderError, ProviderTimeout
from engine.core._events import redact_url
from engine.core._lazy import lazy_module
from engine.core._records import Usage
from engine.models._provider import ChatModel, ChatReply, ChatRequest
from engine.models._wire import OPENAI_KEY_ENV, provider_error, read_embeddings, response_format
from engine.scenario._spec import ModelSpec

if TYPE_CHECKING:
    import httpx2
    import openai

    from engine.models._lean import LeanChat
else:  # the SDK takes seconds to import: an endpoint on the lean transport never loads it
    httpx2 = lazy_module("httpx2")
    openai = lazy_module("openai")

__all__ = ("OpenAIChatModel", "SdkSession", "translated_errors")


def _key_variable(spec: ModelSpec) -> str:
    return spec.api_key_env or OPENAI_KEY_ENV


class OpenAIParams(BaseModel):
    """Generation parameters passed to `chat.completions.create`; anything else is a typo caught at load time.

    `seed` is not here: the engine sets it per call. Server-specific options (vLLM's `top_k`, …) go in
    `extra_body`, which is sent as is. Headers are not accepted, so a key can never hide in a scenario.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    response_format: dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None


class SdkSession:
    """The one place an `AsyncOpenAI` client is built: over its own httpx2 pool, the SDK's retries off.

    The provider and the load tester's `sdk` transport both use it; a `lean` endpoint never builds one.
    """

    def __init__(
        self,
        base_url: str | None,
        *,
        api_key: str | None,
        timeout_s: float,
        max_connections: int,
        keepalive: int = 100,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout_s),
            limits=httpx2.Limits(max_connections=max_connections, max_keepalive_connections=keepalive),
            transport=transport,
        )
        self.client = openai.AsyncOpenAI(
            api_key=api_key or "unused", base_url=base_url, max_retries=0, timeout=timeout_s, http_client=self.http
        )

    async def aclose(self) -> None:
        await self.client.close()
        await self.http.aclose()


class OpenAIChatModel(ChatModel):
    """One `AsyncOpenAI` client per endpoint, with the SDK's retries off: the engine owns retrying."""

    default_key_env = OPENAI_KEY_ENV

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[BaseModel] | None:
        return OpenAIParams

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        variable = _key_variable(spec)
        # A local server (vLLM, Ollama) usually needs no key; an explicit api_key_env still must be set.
        if not os.environ.get(variable) and (spec.base_url is None or spec.api_key_env is not None):
            raise MissingCredentials(role, variable)

    def __init__(self, spec: ModelSpec, *, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        """`transport` replaces the network, for tests that feed the client arbitrary server bodies."""
        super().__init__(spec)
        self._lean: LeanChat | None = None
        if spec.transport == "lean":  # the only HTTP client then: no SDK client is built beside it
            from engine.models._lean import LeanChat  # aiohttp loads for a lean endpoint, not to check a scenario

            self._lean = LeanChat(spec)
            return
        self._sdk = SdkSession(
            spec.base_url,
            api_key=os.environ.get(_key_variable(spec)),
            timeout_s=spec.timeout_s,
            max_connections=spec.max_concurrency or 1000,
            transport=transport,
        )
        self._client = self._sdk.client

    @property
    def base_url(self) -> str:
        """The root actually called (the SDK's default or `OPENAI_BASE_URL` when the spec names none)."""
        return self._lean.http.base_url if self._lean is not None else str(self._client.base_url)

    def _malformed(self, detail: str) -> ProviderError:
        return ProviderError(self.spec.model, detail, malformed=True, endpoint=redact_url(self.base_url))

    async def list_models(self) -> list[str]:
        """The ids of `GET /models`: the cheapest call that proves the endpoint is there and takes the key."""
        if self._lean is not None:
            return await self._lean.list_models()
        with translated_errors(self.spec.model, self.base_url):
            page = await self._client.models.list()
        try:
            return [str(row.id) for row in page.data]
        except (AttributeError, TypeError) as exc:
            raise self._malformed(f"malformed model list ({type(exc).__name__})") from None

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        if self._lean is not None:
            return await self._lean.complete(request, request.params)
        with translated_errors(self.spec.model, self.base_url):
            completion = await self._client.post(
                "/chat/completions", body=self._chat_body(request), cast_to=openai.types.chat.ChatCompletion
            )
        # The SDK does not validate bodies (servers differ too much), so read them defensively: any shape
        # other than a chat completion is a malformed response, retried like a server error.
        try:
            content = completion.choices[0].message.content
            usage = completion.usage
            prompt = int(usage.prompt_tokens) if usage is not None else 0
            generated = int(usage.completion_tokens) if usage is not None else 0
        except (AttributeError, TypeError, IndexError, KeyError, ValueError) as exc:
            raise self._malformed(f"malformed response ({type(exc).__name__})") from None
        if not isinstance(content, str | None):
            raise self._malformed("malformed response (content is not text)")
        return ChatReply(
            text=content or "",
            usage=Usage(prompt_tokens=max(0, prompt), completion_tokens=max(0, generated)),
            model=self.spec.model,
        )

    def _chat_body(self, request: ChatRequest) -> dict[str, Any]:
        """What `chat.completions.create` would send, built directly: `create` first walks every message of the
        history through the SDK's typed-dict transform, which for plain JSON changes nothing and was most of
        the SDK's CPU per call on a long dialogue. The params are validated when the scenario loads."""
        body: dict[str, Any] = {"model": self.spec.name, "messages": [dict(m) for m in request.messages]}
        body.update(request.params)
        extra_body = body.pop("extra_body", None) or {}
        body["seed"] = request.seed  # per call, so votes and replicates differ where the server samples
        wanted = response_format(
            request.json_output, request.response_schema, request.context.task, self.spec.structured_output
        )
        if wanted is not None:
            body.setdefault("response_format", wanted)
        body.update(extra_body)  # sent as is and last, as the SDK merges `extra_body`
        return body

    async def embed(self, texts: Sequence[str], /) -> list[list[float]]:
        if self._lean is not None:
            return await self._lean.embed(texts)
        with translated_errors(self.spec.model, self.base_url):
            response = await self._client.embeddings.create(
                model=self.spec.name, input=list(texts), encoding_format="float"
            )
        try:
            data = [{"index": row.index, "embedding": row.embedding} for row in response.data]
        except (AttributeError, TypeError) as exc:
            raise self._malformed(f"malformed response ({type(exc).__name__})") from None
        return read_embeddings(self.spec.model, data, len(texts))

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
            return
        await self._sdk.aclose()


@contextmanager
def translated_errors(model: str, endpoint: str | None = None) -> Iterator[None]:
    """The SDK's exceptions as simrun's; `endpoint` (a base URL) is named in the message, secrets redacted."""
    try:
        yield
    except (
        openai.APITimeoutError,
        openai.APIConnectionError,
        openai.APIStatusError,
        openai.APIResponseValidationError,
        ValueError,
        httpx2.HTTPError,
    ) as exc:  # the endpoint is redacted only when there is an error to name it in, not on every call
        raise _translated(model, exc, redact_url(endpoint) if endpoint else None) from exc


def _translated(model: str, exc: Exception, where: str | None) -> ProviderError:
    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError: keep it first
        return ProviderTimeout(model, "request timed out", endpoint=where)
    if isinstance(exc, openai.APIConnectionError):
        cause = type(exc.__cause__ or exc).__name__
        return ProviderError(model, f"connection failed ({cause})", endpoint=where)
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        return provider_error(model, exc.status_code, exc.code, exc.message, headers, endpoint=where)
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(model, f"malformed response: {exc.message}", malformed=True, endpoint=where)
    # the SDK can surface undecodable bodies as a ValueError or an httpx2 error
    return ProviderError(model, f"malformed response: {type(exc).__name__}", malformed=True, endpoint=where)
