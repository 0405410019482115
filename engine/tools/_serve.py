"""`simrun serve`: a loopback OpenAI-compatible server whose replies come from the `sim` provider.

Why it exists: simrun must prove over real HTTP that a run survives what real endpoints do — 429 storms with
`Retry-After`, quota exhaustion, 5xx, dropped connections, malformed bodies, slow streams — and load tests need a
target whose latency and token rate are known. Only a real socket shows the behaviours that matter (keep-alive
reuse, SSE framing, client timeouts, connection errors), so this is a small HTTP/1.1 server (its framing layer is
engine/http11.py) rather than a mocked transport. It uses anyio alone — one task per connection inside the server's
own task group, no thread, no blocking call — so it runs inside a test's event loop (`async with LoopbackServer(...)`)
or on its own (`simrun serve`), and structured concurrency tears it down deterministically. Bad input and vanished
clients are answered or ignored, never a crash.

Endpoints (bound to 127.0.0.1 unless told otherwise):

* `POST /v1/chat/completions` — non-streaming, or SSE when `stream: true` (`data: {chunk}` events, a final
  usage chunk when `stream_options: {"include_usage": true}`, then `data: [DONE]`). Bodies are framed with
  Content-Length, streams included (a reply is known before it is paced out), so connections stay alive.
* `POST /v1/embeddings` — vectors of the sim embedding (`sim/embed`, engine/providers/sim_embed.py) for any model
  name: `input` a string or an array of strings, `dimensions` (default 512), `encoding_format` `float` or
  `base64`. The injected error faults apply as for chat; the RPM/TPM limiter and latencies do not.
* `GET /v1/models` (and `GET /v1/models/{id}`) — the three sim model names.
* `GET /stats` — the counters of `ServerStats` as JSON; reading them is not counted.

Content: the request's `model` picks the sim role — a name containing `student` plays `sim/student`, one
containing `judge` plays `sim/judge`, anything else `sim/tutor` (case-insensitive). The sim gets the messages,
the request's `seed` (default 0) and an engine-side `RequestContext(role=...)` with no item: HTTP carries no
reference answer, so the sim tutor never leaks. A `response_format` of `json_object`/`json_schema` asks for JSON
(the attacker's shape from `sim/student`). The sim judge needs a rubric, which it takes from the sim's registry
of judge tasks (engine/providers/sim_tasks.py; plug-ins register them): a `json_schema` response format names it by
its `name` (a registered judge task); without one, the first registered rubric whose markers (JSON keys only that
rubric's prompt names) appear in the prompt; else the registry's default rubric. It judges the last user
message. Usage is the sim's token counts. Other generation parameters are accepted and ignored.

Knobs (`ServeOptions`; every probability defaults to 0): fixed and jittered latency, time to first token and
token rate for streams, RPM/TPM limits over a sliding window answered with 429 + `Retry-After`, injected 429 /
500 / 503 errors, quota exhaustion (429 `insufficient_quota`), dropped connections mid-response, malformed JSON
and slow-drip bodies. The faults of the n-th admitted request (chat or embeddings) depend only on `seed` and n, so
a sequential test sees the same fault sequence on every run.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any, Final, Literal

import anyio
import click
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.core._errors import ScenarioError
from engine.core._inputs import parse_yaml
from engine.models._provider import ChatReply, ChatRequest, Message, RequestContext
from engine.models._sim import SimChatModel
from engine.models._sim_embed import SimEmbedParams, embed_texts
from engine.models._sim_tasks import task_for_request
from engine.models._wire import (
    SSE_DONE,
    chunk_body,
    completion_body,
    embeddings_response,
    error_body,
    model_object,
    models_body,
    sse,
    usage_body,
    usage_chunk,
)
from engine.scenario._spec import ModelSpec
from engine.tools._http11 import (
    HEADER_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    IO_ERRORS,
    Connection,
    HttpError,
    LoopbackListener,
    Request,
    encode_head,
    linger_close,
)

__all__ = ("LoopbackServer", "ServeOptions", "ServerStats", "serve_command")

Role = Literal["tutor", "student", "judge"]
ROLES: Final[tuple[Role, ...]] = ("tutor", "student", "judge")
MODEL_NAMES: Final[dict[Role, str]] = {"tutor": "sim-tutor", "student": "sim-student", "judge": "sim-judge"}

# A slow-drip non-streaming body is sent in this many pieces.
_DRIP_PIECES: Final = 8
_WORDS: Final = re.compile(r"\S+\s*")

Probability = Annotated[float, Field(ge=0, le=1)]


class ServeOptions(BaseModel):
    """The server's behaviour. Validated strictly so a typo in a test or on the command line fails loudly."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    latency_s: float = Field(default=0.0, ge=0)
    """Fixed delay before every admitted chat-completion answer (before a stream's headers)."""
    jitter_s: float = Field(default=0.0, ge=0)
    """Extra delay per request, drawn uniformly from [0, jitter_s] (seeded)."""
    ttft_s: float = Field(default=0.0, ge=0)
    """Streaming: time from the response headers to the first chunk (the role and first words)."""
    tokens_per_s: float | None = Field(default=None, gt=0)
    """Streaming: each further chunk of w words (w·4/3 tokens, the sim's estimate) waits tokens / tokens_per_s."""
    chunk_words: int = Field(default=3, ge=1)
    """Streaming: words per content chunk."""
    rpm: int | None = Field(default=None, ge=1)
    """Chat requests admitted per sliding window; the rest get 429 `rate_limit_exceeded` with `Retry-After`."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens (prompt + completion) admitted per sliding window; same 429 when exceeded."""
    window_s: float = Field(default=60.0, gt=0)
    """Length of the sliding rate-limit window (a minute, shortened in tests)."""
    error_429: Probability = 0.0
    """Chance of an injected 429 `rate_limit_exceeded` with `Retry-After: retry_after_s`."""
    error_500: Probability = 0.0
    """Chance of a 500 `server_error`."""
    error_503: Probability = 0.0
    """Chance of a 503 (overloaded)."""
    quota_rate: Probability = 0.0
    """Chance of a 429 with code `insufficient_quota` (final for clients: retrying cannot help)."""
    drop_rate: Probability = 0.0
    """Chance of closing the connection mid-response: after part of the headers (or nothing) for a plain
    answer, after some chunks (never `[DONE]`) for a stream."""
    malformed_rate: Probability = 0.0
    """Chance of a 200 whose JSON is cut in half (a plain body, or one chunk of a stream)."""
    slow_drip_rate: Probability = 0.0
    """Chance that a response drips: `slow_drip_s` before every chunk after the first of a stream, or between
    the eight pieces of a plain body after its headers (to trip client read timeouts)."""
    slow_drip_s: float = Field(default=1.0, ge=0)
    """The gap of a slow-drip response."""
    stall_at_s: float | None = Field(default=None, ge=0)
    """Seconds after the server was created when it stalls: chat requests arriving during the stall are held."""
    stall_s: float = Field(default=0.0, ge=0)
    """Length of the stall; held requests are answered (after their usual latency) once it ends."""
    retry_after_s: float = Field(default=1.0, ge=0)
    """`Retry-After` of injected 429s and 503s (the limiter's 429s say when a slot really frees)."""
    seed: int = 0
    """Seeds the fault, jitter and drip draws: the n-th admitted request's draws depend only on (seed, n)."""
    sim: dict[Role, dict[str, Any]] = Field(default_factory=dict)
    """Knobs of the sim roles, e.g. `{"judge": {"invalid_rate": 0.2}}` (see engine/providers/sim.py); a sim
    `latency_s` is spent before the rate limiter sees the request, so prefer the server's own `latency_s`."""

    @model_validator(mode="after")
    def _check(self) -> ServeOptions:
        exclusive = (
            self.quota_rate + self.error_429 + self.error_500 + self.error_503 + self.drop_rate + self.malformed_rate
        )
        if exclusive > 1 + 1e-9:
            raise ValueError(
                "quota_rate + error_429 + error_500 + error_503 + drop_rate + malformed_rate must be at most 1 "
                f"(each request gets at most one of these faults), got {exclusive:g}"
            )
        for role, params in self.sim.items():
            try:
                SimChatModel(ModelSpec(model=f"sim/{role}", params=params))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ValueError(f"sim knobs of {role}: {problems}") from None
        return self


@dataclass
class ServerStats:
    """Counters since the server started; `LoopbackServer.stats` hands out copies, `GET /stats` the JSON.

    `by_status` counts responses whose status line and headers were sent in full (a stream dropped after some
    chunks counts as a 200; a plain answer dropped inside its headers does not count). Tokens are those of
    completions delivered intact (not dropped, not malformed).
    """

    connections: int = 0
    """TCP connections accepted (fewer than requests when clients keep connections alive)."""
    http_requests: int = 0
    """Requests read on any path, except `GET /stats`."""
    requests: int = 0
    """Well-formed chat-completion requests, including rate-limited ones."""
    by_status: dict[int, int] = field(default_factory=dict)
    rate_limited: int = 0
    """429s from the RPM/TPM limiter."""
    injected_429: int = 0
    quota_exhausted: int = 0
    server_errors: int = 0
    """Injected 500s and 503s."""
    dropped: int = 0
    malformed: int = 0
    slow_drips: int = 0
    streamed: int = 0
    """Streams whose headers were sent."""
    client_disconnects: int = 0
    """Chat responses the client stopped reading before the end."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0

    @property
    def too_many_requests(self) -> int:
        """Every 429 sent: limiter, injected and quota."""
        return self.by_status.get(429, 0)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["by_status"] = {str(status): count for status, count in sorted(self.by_status.items())}
        return data


class _BadRequest(Exception):
    """A chat request whose JSON is well framed but not a valid chat completion request (400)."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class _Chat:
    """The parts of a chat-completion request the server uses."""

    model: str
    role: Role
    messages: list[Message]
    seed: int
    stream: bool
    include_usage: bool
    json_output: bool
    schema_name: str | None = None


@dataclass(frozen=True)
class _Draws:
    """One request's seeded draws, always taken in the same order so the sequence is reproducible."""

    fault: str | None
    jitter: float
    drip: bool
    cut: float


Outcome = Literal["keep", "close", "abort"]
"""After a response: keep the connection, close it gracefully, or abort it (a drop: no linger)."""


def _text(content: object) -> str:
    """A message's content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _role_for(model: str) -> Role:
    """The sim role a model name plays: `student` or `judge` when named, else the tutor."""
    lowered = model.lower()
    if "student" in lowered:
        return "student"
    if "judge" in lowered:
        return "judge"
    return "tutor"


def _parse_chat(body: dict[str, Any]) -> _Chat:
    """Validates the fields the server relies on; anything else in the body is accepted and ignored.

    Raises:
        _BadRequest: A field is missing or has the wrong type (answered with 400 naming the field).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _BadRequest("'model' must be a non-empty string.", "model")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _BadRequest("'messages' must be a non-empty array of message objects.", "messages")
    messages: list[Message] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _BadRequest(f"messages[{index}] must be an object with a string 'role'.", f"messages[{index}]")
        messages.append({"role": message["role"], "content": _text(message.get("content"))})
    seed = body.get("seed", 0)
    if seed is None:
        seed = 0
    if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**63) <= seed < 2**63:
        raise _BadRequest("'seed' must be a 64-bit integer.", "seed")
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise _BadRequest("'stream' must be a boolean.", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _BadRequest("'stream_options' must be an object.", "stream_options")
    response_format = body.get("response_format")
    json_output = isinstance(response_format, dict) and response_format.get("type") in ("json_object", "json_schema")
    schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
    schema_name = schema.get("name") if isinstance(schema, dict) else None
    return _Chat(
        model=model,
        role=_role_for(model),
        messages=messages,
        seed=seed,
        stream=bool(stream),
        include_usage=bool(stream) and bool((options or {}).get("include_usage")),
        json_output=json_output,
        schema_name=schema_name if isinstance(schema_name, str) else None,
    )


def _sim_request(chat: _Chat, knobs: Mapping[str, Any]) -> ChatRequest:
    """The sim's request: no item (HTTP carries none); a judge gets the rubric the sim's registry finds for it."""
    if chat.role != "judge":
        context = RequestContext(role=chat.role)
    else:
        prompt = " ".join(m.get("content", "") for m in chat.messages)
        task = task_for_request("judge", chat.schema_name, prompt)
        last_user = next((m.get("content", "") for m in reversed(chat.messages) if m.get("role") == "user"), "")
        context = RequestContext(role="judge", task=task, data={"reply": last_user})
    return ChatRequest(
        messages=chat.messages, context=context, seed=chat.seed, json_output=chat.json_output, params=knobs
    )


def _chunk_texts(text: str, words: int) -> list[str]:
    """Splits a reply into chunks of `words` words that join back to exactly the reply."""
    stripped = text.lstrip()
    pieces = _WORDS.findall(stripped)
    if not pieces:
        return [text] if text else []
    pieces[0] = text[: len(text) - len(stripped)] + pieces[0]
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]


def _chunk_tokens(text: str) -> float:
    """Tokens in a chunk by the sim's estimate (4 per 3 words), unrounded: rounding each chunk up would pace
    a one-word-per-chunk stream at 2 tokens per word while `usage` counts 4/3, slower than `tokens_per_s`."""
    return len(text.split()) * 4 / 3


def _truncated(data: bytes) -> bytes:
    """JSON cut in half: a body no JSON parser accepts."""
    return data[: max(1, len(data) // 2)]


class _Window:
    """A sliding-window limiter: the costs admitted during the last `window_s` seconds may not exceed `limit`."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._entries: deque[tuple[float, int]] = deque()
        self._used = 0

    def wait(self, now: float, cost: int) -> float | None:
        """Seconds until `cost` fits (None: it fits now; `window_s` when it can never fit)."""
        while self._entries and self._entries[0][0] <= now - self.window_s:
            self._used -= self._entries.popleft()[1]
        if self._used + cost <= self.limit:
            return None
        if cost > self.limit:
            return self.window_s
        excess = self._used + cost - self.limit
        for at, spent in self._entries:
            excess -= spent
            if excess <= 0:
                return max(at + self.window_s - now, 0.001)
        return self.window_s  # unreachable: the entries hold all of `_used`

    def add(self, now: float, cost: int) -> None:
        self._entries.append((now, cost))
        self._used += cost


class LoopbackServer(LoopbackListener):
    """An OpenAI-compatible server on a local port, as an async context manager.

        async with LoopbackServer(ServeOptions(rpm=60, error_429=0.3)) as server:
            client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)
            ...
            assert server.stats.too_many_requests > 0

    `port=0` (the default) takes a free port. Enter and exit it in the same task (an anyio task-group rule):
    in a test body, not across the `yield` of a pytest-asyncio fixture.

    Attributes:
        options: The knobs.
        host: The address bound.
        port: The port bound (the requested one until entered).
        errors: Unexpected exceptions swallowed to keep serving (each also answered with a 500); a test can
            assert it is empty.
    """

    def __init__(
        self,
        options: ServeOptions | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> None:
        """Configures the server; nothing is bound until entered. The limits are `LoopbackListener`'s."""
        self.options = options or ServeOptions()
        super().__init__(
            host=host,
            port=port,
            header_timeout_s=header_timeout_s,
            idle_timeout_s=idle_timeout_s,
            max_connections=max_connections,
        )
        self._stats = ServerStats()
        self._models = {
            role: SimChatModel(ModelSpec(model=f"sim/{role}", params=self.options.sim.get(role, {}))) for role in ROLES
        }
        self._rpm = _Window(self.options.rpm, self.options.window_s) if self.options.rpm else None
        self._tpm = _Window(self.options.tpm, self.options.window_s) if self.options.tpm else None
        self._admitted = 0
        self._responses = 0
        self._started = time.monotonic()

    @property
    def base_url(self) -> str:
        """The `base_url` for `openai.AsyncOpenAI`, e.g. `http://127.0.0.1:PORT/v1`; valid once entered."""
        if not self.serving:
            raise RuntimeError("LoopbackServer is not serving; use `async with LoopbackServer(...) as server`.")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def stats(self) -> ServerStats:
        """A snapshot of the counters (a copy: later requests do not change it)."""
        return replace(self._stats, connections=self.connections, by_status=dict(self._stats.by_status))

    async def converse(self, conn: Connection) -> None:
        """The HTTP/1.1 request/response loop of one keep-alive connection."""
        while True:
            try:
                request = await conn.read_request()
            except HttpError as err:
                self._stats.http_requests += 1
                await self._send_json(conn, err.status, error_body(err.message, "invalid_request_error", None), False)
                await linger_close(conn.stream)
                return
            if request is None:
                return
            outcome = await self._dispatch(conn, request)
            if outcome == "abort":
                return
            if outcome == "close" or not request.keep_alive:
                await linger_close(conn.stream)
                return

    def _request_id(self) -> str:
        self._responses += 1
        return f"req_simrun_{self._responses}"

    async def _send_json(
        self,
        conn: Connection,
        status: int,
        payload: dict[str, Any],
        keep_alive: bool,
        headers: Mapping[str, str] | None = None,
        *,
        counted: bool = True,
    ) -> None:
        """Sends one JSON response with an exact Content-Length, so keep-alive framing stays intact."""
        body = orjson.dumps(payload)
        await self._send_body(conn, status, body, keep_alive, headers, counted=counted)

    async def _send_body(
        self,
        conn: Connection,
        status: int,
        body: bytes,
        keep_alive: bool,
        headers: Mapping[str, str] | None = None,
        *,
        counted: bool = True,
    ) -> None:
        all_headers = {
            "content-type": "application/json",
            "content-length": str(len(body)),
            "x-request-id": self._request_id(),
            **(headers or {}),
        }
        await conn.send(encode_head(status, all_headers, keep_alive) + body)
        if counted:
            self._count_status(status)

    def _count_status(self, status: int) -> None:
        self._stats.by_status[status] = self._stats.by_status.get(status, 0) + 1

    async def _dispatch(self, conn: Connection, request: Request) -> Outcome:
        """Routes one request by path and method."""
        path, method, keep = request.path.rstrip("/") or "/", request.method, request.keep_alive
        if path == "/stats" and method == "GET":
            await self._send_json(conn, 200, self.stats.to_json(), keep, counted=False)
            return "keep"
        self._stats.http_requests += 1
        if path == "/v1/chat/completions":
            if method != "POST":
                return await self._refuse(conn, keep, 405, "Use POST for chat completions.")
            return await self._chat(conn, request)
        if path == "/v1/embeddings":
            if method != "POST":
                return await self._refuse(conn, keep, 405, "Use POST for embeddings.")
            return await self._embeddings(conn, request)
        if path == "/v1/models":
            if method != "GET":
                return await self._refuse(conn, keep, 405, "Use GET to list models.")
            await self._send_json(conn, 200, models_body(list(MODEL_NAMES.values())), keep)
            return "keep"
        if path.startswith("/v1/models/") and method == "GET":
            await self._send_json(conn, 200, model_object(path.removeprefix("/v1/models/")), keep)
            return "keep"
        message = f"Unknown request URL: {method} {request.path}. Please check the URL."
        return await self._refuse(conn, keep, 404, message, code="unknown_url")

    async def _refuse(
        self,
        conn: Connection,
        keep: bool,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
    ) -> Outcome:
        await self._send_json(conn, status, error_body(message, "invalid_request_error", code, param), keep)
        return "keep"

    async def _embeddings(self, conn: Connection, request: Request) -> Outcome:
        keep = request.keep_alive
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            return await self._refuse(conn, keep, 400, "We could not parse the JSON body of your request.")
        body = body if isinstance(body, dict) else {}
        texts = [body["input"]] if isinstance(body.get("input"), str) else body.get("input")
        if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
            message = "'input' must be a string or a non-empty array of strings."
            return await self._refuse(conn, keep, 400, message, param="input")
        dimensions = body.get("dimensions") or SimEmbedParams().dimensions
        if not isinstance(dimensions, int) or not 8 <= dimensions <= 8192:
            return await self._refuse(
                conn, keep, 400, "'dimensions' must be an integer in [8, 8192].", param="dimensions"
            )
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            return await self._refuse(
                conn, keep, 400, "'encoding_format' must be float or base64.", param="encoding_format"
            )
        draws = self._draw()
        if draws.fault in ("quota", "429", "500", "503"):
            await self._send_fault(conn, draws.fault, keep)
            return "keep"
        tokens = sum(len(_WORDS.findall(text)) * 4 // 3 for text in texts)
        vectors = embed_texts(texts, dimensions)
        payload = embeddings_response(vectors, body.get("model"), tokens, as_base64=encoding == "base64")
        await self._send_json(conn, 200, payload, keep)
        return "keep"

    # -- chat completions ------------------------------------------------------------------------------------------

    async def _chat(self, conn: Connection, request: Request) -> Outcome:
        """One chat completion: validate, compute the sim reply, rate-limit, draw faults, then answer."""
        keep = request.keep_alive
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            return await self._refuse(conn, keep, 400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return await self._refuse(conn, keep, 400, "The request body must be a JSON object.")
        try:
            chat = _parse_chat(body)
        except _BadRequest as err:
            return await self._refuse(conn, keep, 400, err.message, param=err.param)
        stats = self._stats
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            return await self._answer(conn, chat, keep)
        except IO_ERRORS:
            stats.client_disconnects += 1
            raise
        finally:
            stats.in_flight -= 1

    async def _answer(self, conn: Connection, chat: _Chat, keep: bool) -> Outcome:
        try:
            model = self._models[chat.role]
            reply = await model.complete(_sim_request(chat, model.spec.params))
        except Exception as exc:  # a sim bug must not take the server down
            self.errors.append(exc)
            body = error_body(f"The simulator failed: {type(exc).__name__}.", "server_error", None)
            await self._send_json(conn, 500, body, keep)
            return "keep"
        limited = self._admit(reply)
        if limited is not None:
            wait_s, message, kind = limited
            self._stats.rate_limited += 1
            body = error_body(message, kind, "rate_limit_exceeded")
            await self._send_json(conn, 429, body, keep, _retry_after(wait_s))
            return "keep"
        draws = self._draw()
        delay = self.options.latency_s + draws.jitter * self.options.jitter_s + self._stall_left()
        if delay > 0:
            await anyio.sleep(delay)
        if draws.fault in ("quota", "429", "500", "503"):
            await self._send_fault(conn, draws.fault, keep)
            return "keep"
        if draws.drip:
            self._stats.slow_drips += 1
        if chat.stream:
            return await self._stream(conn, chat, reply, draws, keep)
        return await self._complete(conn, chat, reply, draws, keep)

    def _stall_left(self) -> float:
        """Time until a stall that has begun ends (0 outside the stall): a stuck server, to expose client queueing."""
        if self.options.stall_at_s is None:
            return 0.0
        since = time.monotonic() - self._started - self.options.stall_at_s
        return self.options.stall_s - since if 0 <= since < self.options.stall_s else 0.0

    def _admit(self, reply: ChatReply) -> tuple[float, str, str] | None:
        """Applies the RPM and TPM windows; returns (wait, message, type) of the 429 to send, or None."""
        now = anyio.current_time()
        cost = reply.usage.prompt_tokens + reply.usage.completion_tokens
        waits: list[tuple[float, str, str]] = []
        if self._rpm is not None and (wait := self._rpm.wait(now, 1)) is not None:
            message = f"Rate limit reached for requests: limit {self._rpm.limit} per {self.options.window_s:g}s"
            waits.append((wait, message, "requests"))
        if self._tpm is not None and (wait := self._tpm.wait(now, cost)) is not None:
            if cost > self._tpm.limit:
                message = f"Request too large for tokens: limit {self._tpm.limit}, requested {cost}"
            else:
                message = f"Rate limit reached for tokens: limit {self._tpm.limit} per {self.options.window_s:g}s"
            waits.append((wait, message, "tokens"))
        if waits:
            wait, message, kind = max(waits)
            return wait, f"{message} (simrun serve). Please try again in {wait:.3f}s.", kind
        if self._rpm is not None:
            self._rpm.add(now, 1)
        if self._tpm is not None:
            self._tpm.add(now, cost)
        return None

    def _draw(self) -> _Draws:
        """The n-th admitted request's fault, jitter, drip and cut draws, from (seed, n) alone."""
        rng = random.Random(f"simrun-serve:{self.options.seed}:{self._admitted}")
        self._admitted += 1
        u, jitter, drip, cut = rng.random(), rng.random(), rng.random(), rng.random()
        o = self.options
        fault: str | None = None
        for name, rate in (
            ("quota", o.quota_rate),
            ("429", o.error_429),
            ("500", o.error_500),
            ("503", o.error_503),
            ("drop", o.drop_rate),
            ("malformed", o.malformed_rate),
        ):
            if u < rate:
                fault = name
                break
            u -= rate
        return _Draws(fault=fault, jitter=jitter, drip=drip < o.slow_drip_rate, cut=cut)

    async def _send_fault(self, conn: Connection, fault: str, keep: bool) -> None:
        """An injected error response, shaped like the real API's."""
        stats = self._stats
        if fault == "quota":
            stats.quota_exhausted += 1
            message = "You exceeded your current quota, please check your plan and billing details. (simrun serve)"
            await self._send_json(conn, 429, error_body(message, "insufficient_quota", "insufficient_quota"), keep)
        elif fault == "429":
            stats.injected_429 += 1
            message = (
                f"Rate limit reached (injected by simrun serve). Please try again in {self.options.retry_after_s:g}s."
            )
            body = error_body(message, "requests", "rate_limit_exceeded")
            await self._send_json(conn, 429, body, keep, _retry_after(self.options.retry_after_s))
        elif fault == "500":
            stats.server_errors += 1
            body = error_body(
                "The server had an error while processing your request. (simrun serve)", "server_error", None
            )
            await self._send_json(conn, 500, body, keep)
        else:
            stats.server_errors += 1
            body = error_body("The server is overloaded or not ready yet. (simrun serve)", "server_error", None)
            await self._send_json(conn, 503, body, keep, _retry_after(self.options.retry_after_s))

    async def _complete(self, conn: Connection, chat: _Chat, reply: ChatReply, draws: _Draws, keep: bool) -> Outcome:
        """A non-streaming answer, possibly dropped inside its headers, malformed or dripped."""
        stats = self._stats
        body = orjson.dumps(completion_body(self._next_id(), chat.model, reply.text, _usage(reply)))
        if draws.fault == "malformed":
            stats.malformed += 1
            body = _truncated(body)
        head = encode_head(
            200,
            {"content-type": "application/json", "content-length": str(len(body)), "x-request-id": self._request_id()},
            keep,
        )
        if draws.fault == "drop":
            stats.dropped += 1
            cut = int(draws.cut * len(head))
            if cut:
                await conn.send(head[:cut])
            return "abort"
        if draws.drip and self.options.slow_drip_s > 0:
            await conn.send(head)
            self._count_status(200)
            size = -(-len(body) // _DRIP_PIECES)
            for start in range(0, len(body), size):
                await anyio.sleep(self.options.slow_drip_s)
                await conn.send(body[start : start + size])
        else:
            await conn.send(head + body)
            self._count_status(200)
        self._delivered(reply, malformed=draws.fault == "malformed")
        return "keep"

    async def _stream(self, conn: Connection, chat: _Chat, reply: ChatReply, draws: _Draws, keep: bool) -> Outcome:
        """An SSE answer paced by ttft_s and tokens_per_s, possibly dropped after some chunks, malformed or dripped.

        The whole event sequence is built first so the head can carry its exact Content-Length; the sends are
        then spaced out: the first (role and first words) after `ttft_s`, each further content chunk after its
        tokens / `tokens_per_s` (plus `slow_drip_s` when dripping), and the finish, usage and `[DONE]` events
        right after the last words.
        """
        stats, options = self._stats, self.options
        ident, created = self._next_id(), int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return chunk_body(ident, created, chat.model, delta, finish, with_usage=chat.include_usage)

        texts = _chunk_texts(reply.text, options.chunk_words)
        content = [orjson.dumps(chunk({"content": text})) for text in texts]
        if draws.fault == "malformed":
            stats.malformed += 1
        if draws.fault == "malformed" and content:
            index = min(int(draws.cut * len(content)), len(content) - 1)
            content[index] = _truncated(content[index])
        role = sse(chunk({"role": "assistant", "content": ""}))
        tail = sse(chunk({}, "stop"))
        if chat.include_usage:
            tail += sse(usage_chunk(ident, created, chat.model, _usage(reply)))
        tail += SSE_DONE
        if draws.fault == "malformed" and not content:
            tail = sse(_truncated(orjson.dumps(chunk({}, "stop")))) + SSE_DONE
        drip = options.slow_drip_s if draws.drip else 0.0
        sends: list[tuple[float, bytes]] = [(options.ttft_s, role + (sse(content[0]) if content else b""))]
        for text, data in zip(texts[1:], content[1:], strict=True):
            pace = _chunk_tokens(text) / options.tokens_per_s if options.tokens_per_s else 0.0
            sends.append((pace + drip, sse(data)))
        sends.append((drip, tail))
        length = sum(len(data) for _, data in sends)
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "content-length": str(length),
            "x-request-id": self._request_id(),
        }
        await conn.send(encode_head(200, headers, keep))
        self._count_status(200)
        stats.streamed += 1
        deliver = len(sends)
        if draws.fault == "drop":
            stats.dropped += 1
            deliver = 1 + int(draws.cut * (len(sends) - 1))  # at least one chunk, never [DONE]
        for delay, data in sends[:deliver]:
            if delay > 0:
                await anyio.sleep(delay)
            await conn.send(data)
        if draws.fault == "drop":
            return "abort"
        self._delivered(reply, malformed=draws.fault == "malformed")
        return "keep"

    def _next_id(self) -> str:
        return f"chatcmpl-simrun{self._admitted}"

    def _delivered(self, reply: ChatReply, *, malformed: bool) -> None:
        """Counts the tokens of a completion delivered intact."""
        if malformed:
            return
        self._stats.prompt_tokens += reply.usage.prompt_tokens
        self._stats.completion_tokens += reply.usage.completion_tokens
        self._stats.tokens += reply.usage.prompt_tokens + reply.usage.completion_tokens


def _retry_after(seconds: float) -> dict[str, str]:
    """`retry-after` in whole seconds (the HTTP form) and `retry-after-ms` (what OpenAI adds, and precise)."""
    return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(math.ceil(seconds * 1000))}


def _usage(reply: ChatReply) -> dict[str, int]:
    return usage_body(reply.usage.prompt_tokens, reply.usage.completion_tokens)


# -- command line ----------------------------------------------------------------------------------------------------


def _sim_params(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`--sim judge.invalid_rate=0.2` → `{"judge": {"invalid_rate": 0.2}}` (values parsed as YAML)."""
    params: dict[str, dict[str, Any]] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        role, dot, knob = key.partition(".")
        if not sep or not dot or not knob:
            raise click.BadParameter(
                f"{value!r}: expected ROLE.KNOB=VALUE, e.g. judge.invalid_rate=0.2", param_hint="--sim"
            )
        try:
            parsed, _ = parse_yaml(raw, f"--sim {value!r}")
        except ScenarioError as exc:
            raise click.BadParameter(str(exc), param_hint="--sim") from None
        params.setdefault(role, {})[knob] = parsed
    return params


def _options(knobs: Mapping[str, Any], sim: Sequence[str]) -> ServeOptions:
    data = {name: value for name, value in knobs.items() if value is not None}
    if sim:
        data["sim"] = _sim_params(sim)
    try:
        return ServeOptions.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            ": ".join(filter(None, (".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, "))))
            for e in exc.errors()
        )
        raise click.UsageError(f"invalid serve options: {problems}") from exc


def _probability(name: str, help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A `--NAME P` option for a fault probability in [0, 1]."""
    return click.option(name, type=click.FloatRange(0, 1), help=help_text)


@click.command(name="serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free).")
@click.option("--latency", "latency_s", type=click.FloatRange(min=0), help="Fixed seconds before every answer.")
@click.option("--jitter", "jitter_s", type=click.FloatRange(min=0), help="Extra seconds, uniform in [0, JITTER].")
@click.option("--ttft", "ttft_s", type=click.FloatRange(min=0), help="Streaming: seconds to the first chunk.")
@click.option("--tokens-per-s", "tokens_per_s", type=click.FloatRange(min=0, min_open=True), help="Streaming pace.")
@click.option("--chunk-words", type=click.IntRange(min=1), help="Streaming: words per chunk (default 3).")
@click.option("--rpm", type=click.IntRange(min=1), help="Requests per window, then 429 with Retry-After.")
@click.option("--tpm", type=click.IntRange(min=1), help="Tokens per window, then 429 with Retry-After.")
@click.option("--window", "window_s", type=click.FloatRange(min=0, min_open=True), help="Rate window in s (60).")
@_probability("--error-429", "Chance of an injected 429 rate_limit_exceeded.")
@_probability("--error-500", "Chance of a 500.")
@_probability("--error-503", "Chance of a 503.")
@_probability("--quota-rate", "Chance of a 429 insufficient_quota.")
@_probability("--drop-rate", "Chance of closing the connection mid-response.")
@_probability("--malformed-rate", "Chance of a 200 with truncated JSON.")
@_probability("--slow-drip-rate", "Chance of a slow-drip response.")
@click.option("--slow-drip", "slow_drip_s", type=click.FloatRange(min=0), help="Gap of a slow drip in s (1).")
@click.option("--stall-at", "stall_at_s", type=click.FloatRange(min=0), help="Stall this many s after start.")
@click.option("--stall", "stall_s", type=click.FloatRange(min=0), help="Length of the stall in s (0).")
@click.option("--retry-after", "retry_after_s", type=click.FloatRange(min=0), help="Retry-After of injected 429/503.")
@click.option("--seed", type=int, help="Seed of the fault, jitter and drip draws (0).")
@click.option("--sim", "sim", multiple=True, metavar="ROLE.KNOB=VALUE", help="A sim knob, e.g. judge.error_rate=0.1.")
@click.option(
    "--header-timeout",
    "header_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=HEADER_TIMEOUT_S,
    show_default=True,
    help="Seconds for a request to arrive after its first byte (then 408).",
)
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=IDLE_TIMEOUT_S,
    show_default=True,
    help="Seconds a connection may stay silent between requests (then closed).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    help="Open connections at once; more get a 503 (default: half the file-descriptor limit, at most 8192).",
)
def serve_command(
    host: str,
    port: int,
    sim: tuple[str, ...],
    header_timeout_s: float,
    idle_timeout_s: float,
    max_connections: int | None,
    **knobs: Any,
) -> int:
    """Serve an OpenAI-compatible API on this machine, with content from the sim provider, until Ctrl-C.

    A model name containing "student" or "judge" plays sim/student or sim/judge; any other plays sim/tutor.
    """
    server = LoopbackServer(
        _options(knobs, sim),
        host=host,
        port=port,
        header_timeout_s=header_timeout_s,
        idle_timeout_s=idle_timeout_s,
        max_connections=max_connections,
    )

    async def serve() -> None:
        async with server:
            click.echo(f"simrun serve: {server.base_url} (content from the sim provider; Ctrl-C stops)")
            await anyio.sleep_forever()

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from exc
    stats = server.stats
    click.echo(
        f"simrun serve: stopped after {stats.requests} chat requests "
        f"({stats.too_many_requests} 429s, {stats.dropped} dropped, {stats.tokens} tokens)"
    )
    return 0
