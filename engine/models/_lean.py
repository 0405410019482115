"""The lean transport for OpenAI-compatible chat APIs: JSON over aiohttp with orjson, no per-response objects.

The openai SDK costs milliseconds of client CPU per request (its models, its httpx2 pool), which caps a Python
client near a few hundred requests a second on two cores; `bench/transport_ceiling.py` measured a bare aiohttp
loop 5–6 times faster than a bare httpx2 loop and 16–20 times faster than the SDK, so this transport uses
aiohttp. It speaks the same API as the SDK path and fails with the same `ProviderError` tree, so the engine's
retry layer treats both alike. Select it per endpoint with `transport: lean`; load-test mode uses it by default.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from engine.core._errors import ProviderError, ProviderTimeout
from engine.core._events import redact_url
from engine.models._provider import ChatReply, ChatRequest
from engine.models._wire import (
    OPENAI_KEY_ENV,
    chat_body,
    embeddings_body,
    error_for_status,
    read_completion,
    read_embeddings_body,
    response_format,
)
from engine.scenario._spec import ModelSpec

__all__ = ("LeanChat", "LeanSession")


class LeanSession:
    """One aiohttp session per endpoint, opened on first use (it must be created inside the event loop)."""

    def __init__(self, base_url: str, *, api_key: str | None, timeout_s: float, max_connections: int) -> None:
        self.base_url = base_url
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.embeddings_url = base_url.rstrip("/") + "/embeddings"
        # A local server without a key still gets a bearer token, as the SDK sends one.
        self.headers = {"content-type": "application/json", "authorization": f"Bearer {api_key or 'unused'}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._limit = max_connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, json_serialize=lambda v: orjson.dumps(v).decode()
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class LeanChat:
    """`complete()` for the `openai` provider over the lean transport."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.http = LeanSession(
            spec.base_url or "https://api.openai.com/v1",
            api_key=os.environ.get(spec.api_key_env or OPENAI_KEY_ENV),
            timeout_s=spec.timeout_s,
            max_connections=spec.max_concurrency or 1000,
        )

    async def complete(self, request: ChatRequest, params: Mapping[str, Any]) -> ChatReply:
        extra: dict[str, Any] = {"seed": request.seed}
        wanted = response_format(
            request.json_output, request.response_schema, request.context.task, self.spec.structured_output
        )
        if wanted is not None and "response_format" not in params:
            extra["response_format"] = wanted
        messages = [m if type(m) is dict else dict(m) for m in request.messages]  # a copy only where orjson needs one
        body = chat_body(self.spec.name, messages, params, **extra)
        text, usage = read_completion(self.spec.model, await self._post(self.http.url, body))
        return ChatReply(text=text, usage=usage, model=self.spec.model)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raw = await self._post(self.http.embeddings_url, embeddings_body(self.spec.name, list(texts)))
        return read_embeddings_body(self.spec.model, raw, len(texts))

    async def list_models(self) -> list[str]:
        raw = await self._send("GET", self.http.base_url.rstrip("/") + "/models")
        try:
            return [str(row["id"]) for row in orjson.loads(raw)["data"]]
        except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
            raise ProviderError(
                self.spec.model, f"malformed model list ({type(exc).__name__})", malformed=True, endpoint=self._where
            ) from None

    async def _post(self, url: str, body: bytes) -> bytes:
        return await self._send("POST", url, body)

    async def _send(self, method: str, url: str, body: bytes | None = None) -> bytes:
        model, where = self.spec.model, self._where
        try:
            async with self.http.session.request(method, url, data=body, headers=self.http.headers) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise error_for_status(model, response.status, response.headers, raw, endpoint=where)
        except TimeoutError as exc:  # aiohttp's timeouts subclass the builtin
            raise ProviderTimeout(model, "request timed out", endpoint=where) from exc
        except aiohttp.ClientError as exc:
            raise ProviderError(model, f"connection failed ({type(exc).__name__})", endpoint=where) from exc
        return raw

    @functools.cached_property
    def _where(self) -> str:
        """The endpoint as error messages name it (computed once: it is passed on every request)."""
        return redact_url(self.http.base_url)

    async def aclose(self) -> None:
        await self.http.aclose()
