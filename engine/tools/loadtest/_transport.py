"""The timed request: send one chat completion and stamp headers, first and last content chunk, end.

Stamps are taken in the coroutine that reads the response, as the bytes arrive; token counts come from the
server's `usage` (streams ask for it with `stream_options.include_usage`), never from re-tokenising. Nothing
here retries: in load mode a 429 is an outcome, and retries (when configured) are explicit rows upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import aiohttp

from engine.core._errors import ProviderError, ProviderTimeout, QuotaExhausted, RateLimited
from engine.models._endpoints import open_http
from engine.models._lean import LeanSession
from engine.models._openai import SdkSession, translated_errors
from engine.models._wire import (
    STREAM_END,
    chat_body,
    error_for_status,
    read_completion,
    read_stream_event,
    stream_fields,
)
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._records import RequestRecord

__all__ = ("LoadTransport", "error_type", "open_transport")

Clock = Callable[[], float]
Messages = list[dict[str, str]]


class LoadTransport(Protocol):
    """Sends `messages`, fills `record` as the response arrives, and returns the reply text or the failure.

    The failure is returned, not raised: it is an outcome to record, which the caller may classify for a retry.
    """

    async def send(self, messages: Messages, record: RequestRecord, now: Clock, /) -> str | ProviderError: ...

    async def aclose(self) -> None: ...


def error_type(exc: ProviderError) -> str:
    """The load-test error taxonomy (after xk6-llm's): what a dashboard groups by."""
    if isinstance(exc, RateLimited | QuotaExhausted):
        return "http_429"
    if isinstance(exc, ProviderTimeout):
        return "timeout"
    if exc.malformed:
        return "malformed"
    if exc.status is None:
        return "connection"
    return "http_5xx" if exc.status >= 500 else "http_4xx"


def _fail(record: RequestRecord, exc: ProviderError, now: Clock) -> ProviderError:
    record.end = now()
    record.error, record.status, record.retry_after = error_type(exc), exc.status, exc.retry_after
    return exc


def _request_fields(config: LoadConfig) -> dict[str, Any]:
    fields = stream_fields(config.stream)
    if config.max_tokens is not None:
        fields["max_tokens"] = config.max_tokens
    return fields


class LeanLoad:
    """aiohttp + orjson; a stream is read line by line and each `data:` event parsed once."""

    def __init__(self, config: LoadConfig, http: LeanSession) -> None:
        self.http = http
        self._fields = _request_fields(config)
        self._model = config.model

    async def send(self, messages: Messages, record: RequestRecord, now: Clock, /) -> str | ProviderError:
        body = chat_body(self._model, messages, self._fields)
        record.dispatched = now()
        try:
            async with self.http.session.post(self.http.url, data=body, headers=self.http.headers) as response:
                record.headers, record.status = now(), response.status
                if response.status >= 400:
                    raise error_for_status(self._model, response.status, response.headers, await response.read())
                if not self._fields["stream"]:
                    text, usage = read_completion(self._model, await response.read())
                    record.end = now()
                    record.prompt_tokens, record.completion_tokens = usage.prompt_tokens, usage.completion_tokens
                    record.ok = True
                    return text
                return await self._read_stream(response.content, record, now)
        except ProviderError as exc:
            return _fail(record, exc, now)
        except TimeoutError:
            return _fail(record, ProviderTimeout(self._model, "timed out"), now)
        except (aiohttp.ClientError, ValueError) as exc:
            status = record.status
            failure = _fail(record, ProviderError(self._model, type(exc).__name__), now)
            record.status = status
            if status == 200 and self._fields["stream"]:
                record.error = "stream_truncated"  # the stream began, then the connection went
            return failure

    async def _read_stream(
        self, content: aiohttp.StreamReader, record: RequestRecord, now: Clock
    ) -> str | ProviderError:
        parts: list[str] = []
        async for line in content:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == STREAM_END:
                record.end, record.ok = now(), True
                return "".join(parts)
            text, usage = read_stream_event(self._model, payload)
            if text:
                stamp = now()
                if record.first_token is None:
                    record.first_token = stamp
                record.last_token = stamp
                record.chunks += 1
                parts.append(text)
            if usage is not None:
                record.prompt_tokens, record.completion_tokens = usage.prompt_tokens, usage.completion_tokens
        record.end, record.error = now(), "stream_truncated"
        return ProviderError(self._model, "the stream ended before [DONE]")

    async def aclose(self) -> None:
        await self.http.aclose()


class SdkLoad:
    """The openai SDK (httpx2), retries off: for comparison with the lean path and for SDK-only features."""

    def __init__(self, config: LoadConfig, http: SdkSession) -> None:
        self._sdk = http
        self._client = http.client
        self._fields = _request_fields(config)
        self._model = config.model

    async def send(self, messages: Messages, record: RequestRecord, now: Clock, /) -> str | ProviderError:
        record.dispatched = now()
        create: Any = self._client.chat.completions.create
        try:
            with translated_errors(self._model):
                if not self._fields["stream"]:
                    completion = await create(model=self._model, messages=messages, **self._fields)
                    record.end = now()
                    usage = completion.usage
                    record.prompt_tokens = usage.prompt_tokens if usage else 0
                    record.completion_tokens = usage.completion_tokens if usage else 0
                    record.ok = True
                    return str(completion.choices[0].message.content or "")
                stream = await create(model=self._model, messages=messages, **self._fields)
                record.headers, record.status = now(), 200
                parts: list[str] = []
                async for chunk in stream:
                    text = chunk.choices[0].delta.content if chunk.choices else None
                    if text:
                        stamp = now()
                        if record.first_token is None:
                            record.first_token = stamp
                        record.last_token, record.chunks = stamp, record.chunks + 1
                        parts.append(text)
                    if chunk.usage:
                        record.prompt_tokens = chunk.usage.prompt_tokens
                        record.completion_tokens = chunk.usage.completion_tokens
                record.end, record.ok = now(), True
                return "".join(parts)
        except ProviderError as exc:
            began = record.status == 200 and self._fields["stream"]
            _fail(record, exc, now)
            if began and exc.status is None and not exc.malformed and not isinstance(exc, ProviderTimeout):
                record.status, record.error = 200, "stream_truncated"  # as the lean transport names it
            return exc

    async def aclose(self) -> None:
        await self._sdk.aclose()


def open_transport(config: LoadConfig, connections: int) -> LoadTransport:
    """The target's HTTP client from the one place that builds it (`open_http`), under the timed sender."""
    http = open_http(
        config.transport,
        config.target,
        api_key_env=config.api_key_env,
        timeout_s=config.timeout_s,
        max_connections=connections,
        keepalive=connections,
    )
    return LeanLoad(config, http) if isinstance(http, LeanSession) else SdkLoad(config, http)
