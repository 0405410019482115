"""The OpenAI chat/embeddings wire format, once: request bodies, response and SSE parsing, error bodies and mapping.

Every piece of simrun that speaks the API on either side uses this module: the lean transport and the load
tester (clients), `simrun serve` and the test fake (servers), and the SDK path for its status errors. A server
and a client that share the shapes cannot drift apart, and one table decides which failure is which error.
"""

from __future__ import annotations

import base64
import math
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from engine.core._errors import ProviderError, QuotaExhausted, RateLimited
from engine.core._records import Usage
from engine.models._retry import parse_retry_after

__all__ = (
    "OPENAI_KEY_ENV",
    "QUOTA_CODES",
    "SSE_DONE",
    "STREAM_END",
    "chat_body",
    "chunk_body",
    "completion_body",
    "embeddings_body",
    "embeddings_response",
    "error_body",
    "error_for_status",
    "error_type_for",
    "model_object",
    "models_body",
    "provider_error",
    "read_completion",
    "read_embeddings",
    "read_embeddings_body",
    "read_stream_event",
    "response_format",
    "sse",
    "stream_fields",
    "strict_schema",
    "usage_body",
    "usage_chunk",
)

OPENAI_KEY_ENV: Final = "OPENAI_API_KEY"
"""Where an OpenAI-compatible endpoint's key is read when its spec names no `api_key_env`."""
QUOTA_CODES: Final = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
STREAM_END: Final = b"[DONE]"
"""The payload of the `data:` event that ends a stream."""
SSE_DONE: Final = b"data: " + STREAM_END + b"\n\n"
_MALFORMED = (orjson.JSONDecodeError, AttributeError, TypeError, IndexError, KeyError, ValueError)


# -- requests --------------------------------------------------------------------------------------------------------


def chat_body(model: str, messages: Any, params: Mapping[str, Any], **extra: Any) -> bytes:
    """The request body; `params` are the validated `OpenAIParams`, whose `extra_body` is merged in as is."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    for key, value in params.items():
        if key == "extra_body" and isinstance(value, Mapping):
            body.update(value)
        elif value is not None:
            body[key] = value
    body.update(extra)
    return orjson.dumps(body)


_SCHEMA_KEYS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$defs", "$ref"}
)


def strict_schema(schema: Any) -> Any:
    """`schema` as strict structured outputs accept it: every object closed and every property required, with the
    keywords they refuse (defaults, titles, bounds) dropped; the caller's own validation still applies them."""
    if isinstance(schema, list):
        return [strict_schema(part) for part in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: strict_schema(value) for key, value in schema.items() if key in _SCHEMA_KEYS}
    for key in ("properties", "$defs"):
        if isinstance(schema.get(key), Mapping):
            out[key] = {name: strict_schema(part) for name, part in schema[key].items()}
    if out.get("type") == "object" or "properties" in out:
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties") or {})
    return out


def response_format(
    json_output: bool, schema: Mapping[str, Any] | None, name: str | None, structured_output: str
) -> dict[str, Any] | None:
    """The `response_format` of a call: the reply's schema, strict, where the endpoint takes schemas; else any JSON
    object where JSON was asked for; else none."""
    if schema is not None and structured_output == "json_schema":
        label = "".join(c if c.isalnum() or c in "_-" else "_" for c in name or "reply")[:64] or "reply"
        return {"type": "json_schema", "json_schema": {"name": label, "strict": True, "schema": strict_schema(schema)}}
    return {"type": "json_object"} if json_output or schema is not None else None


def stream_fields(stream: bool) -> dict[str, Any]:
    """`stream`, and the `stream_options` that make a stream end with a usage chunk."""
    return {"stream": True, "stream_options": {"include_usage": True}} if stream else {"stream": False}


def embeddings_body(model: str, texts: list[str]) -> bytes:
    return orjson.dumps({"model": model, "input": texts, "encoding_format": "float"})


# -- responses (server side) -----------------------------------------------------------------------------------------


def usage_body(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    total = prompt_tokens + completion_tokens
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": total}


def completion_body(
    ident: str, model: str, text: str, usage: Mapping[str, int], *, created: int | None = None
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": dict(usage),
    }


def chunk_body(
    ident: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None, *, with_usage: bool
) -> dict[str, Any]:
    """One `chat.completion.chunk`; `with_usage` adds the `usage: null` a stream that asked for usage carries."""
    payload: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if with_usage:
        payload["usage"] = None
    return payload


def usage_chunk(ident: str, created: int, model: str, usage: Mapping[str, int]) -> dict[str, Any]:
    """The final chunk of a stream with `stream_options.include_usage`: no choices, only usage."""
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [],
        "usage": dict(usage),
    }


def sse(payload: dict[str, Any] | bytes) -> bytes:
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


def model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "simrun"}


def models_body(names: Sequence[str]) -> dict[str, Any]:
    return {"object": "list", "data": [model_object(name) for name in names]}


def embeddings_response(
    vectors: Sequence[Sequence[float]], model: object, tokens: int, *, as_base64: bool = False
) -> dict[str, Any]:
    """An embeddings body; `as_base64` packs each vector as little-endian float32, as the real API sends it."""
    data: list[dict[str, Any]] = []
    for index, vector in enumerate(vectors):
        embedding: Any = list(vector)
        if as_base64:
            embedding = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def error_body(message: str, error_type: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """The body shape the OpenAI SDK unpacks into `APIStatusError.body`, `.code`, `.type` and `.param`."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def error_type_for(status: int, code: str | None) -> str:
    """The `error.type` the real API pairs with each failure."""
    if code == "insufficient_quota":
        return "insufficient_quota"
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


# -- responses (client side) -----------------------------------------------------------------------------------------


def provider_error(
    model: str,
    status: int,
    code: object,
    message: str,
    headers: Mapping[str, str],
    *,
    endpoint: str | None = None,
) -> ProviderError:
    """The one table from an error response (status, `error.code`, headers) to simrun's error tree."""
    text = f"HTTP {status}: {message}"
    if code in QUOTA_CODES:
        return QuotaExhausted(model, text, status=status, endpoint=endpoint)
    retry_after = parse_retry_after(headers)
    if status == 429:
        return RateLimited(model, text, status=429, retry_after=retry_after, endpoint=endpoint)
    return ProviderError(model, text, status=status, retry_after=retry_after, endpoint=endpoint)


def error_for_status(
    model: str, status: int, headers: Mapping[str, str], raw: bytes, *, endpoint: str | None = None
) -> ProviderError:
    """An error response's body read for its `error.code` and message, then classified by `provider_error`."""
    code, message = None, raw[:200].decode("utf-8", "replace")
    try:
        error = orjson.loads(raw).get("error") or {}
        code, message = error.get("code"), str(error.get("message", message))
    except (orjson.JSONDecodeError, AttributeError):
        pass
    return provider_error(model, status, code, message, headers, endpoint=endpoint)


def read_completion(model: str, raw: bytes) -> tuple[str, Usage]:
    """Text and usage of a chat completion body, read defensively: any other shape is a malformed response."""
    try:
        data = orjson.loads(raw)
        content = data["choices"][0]["message"].get("content")
        usage = data.get("usage") or {}
        prompt, generated = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except _MALFORMED as exc:
        raise ProviderError(model, f"malformed response ({type(exc).__name__})", malformed=True) from None
    if not isinstance(content, str | None):
        raise ProviderError(model, "malformed response (content is not text)", malformed=True)
    return content or "", Usage(prompt_tokens=max(0, prompt), completion_tokens=max(0, generated))


def read_stream_event(model: str, payload: bytes) -> tuple[str | None, Usage | None]:
    """The content text and usage of one SSE `data:` payload (not `[DONE]`); a bad event is malformed."""
    try:
        event = orjson.loads(payload)
        choices, usage = event.get("choices"), event.get("usage")
        delta = (choices[0].get("delta") or {}) if choices else {}
        text = delta.get("content")
    except (orjson.JSONDecodeError, AttributeError, IndexError, TypeError) as exc:
        raise ProviderError(model, f"bad stream event ({type(exc).__name__})", malformed=True) from None
    if not usage:
        return text, None
    prompt, generated = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return text, Usage(prompt_tokens=prompt, completion_tokens=generated)


def read_embeddings_body(model: str, raw: bytes, count: int) -> list[list[float]]:
    try:
        data = orjson.loads(raw)["data"]
    except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
        raise ProviderError(model, f"malformed response ({type(exc).__name__})", malformed=True) from None
    return read_embeddings(model, data, count)


def read_embeddings(model: str, data: Any, count: int) -> list[list[float]]:
    """The vectors of an embeddings body's `data` (a list of `{index, embedding}`), in input order.

    Read defensively, as completions are: a wrong count, a missing index, ragged or non-finite vectors, or base64
    strings (simrun always asks for floats) are a malformed response.
    """
    try:
        rows = sorted(((int(row["index"]), row["embedding"]) for row in data), key=lambda row: row[0])
        if not all(isinstance(embedding, list) for _, embedding in rows):
            raise TypeError("an embedding is not a list of numbers")
        vectors = [[float(x) for x in embedding] for _, embedding in rows]
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise ProviderError(model, f"malformed embeddings ({type(exc).__name__})", malformed=True) from None
    if [index for index, _ in rows] != list(range(count)):
        raise ProviderError(model, f"malformed embeddings (expected {count} vectors)", malformed=True)
    if vectors and (
        len({len(v) for v in vectors}) != 1 or not vectors[0] or not all(math.isfinite(x) for v in vectors for x in v)
    ):
        raise ProviderError(model, "malformed embeddings (empty, ragged or non-finite vectors)", malformed=True)
    return vectors
