"""`simrun serve`: a loopback OpenAI-compatible server whose replies come from the `sim` provider.

Why it exists: simrun must prove over real HTTP that a run survives what real endpoints do — 429 storms with
`Retry-After`, quota exhaustion, 5xx, dropped connections, malformed bodies, slow streams — and load tests need a
target whose latency and token rate are known. Only a real socket shows the behaviours that matter (keep-alive
reuse, SSE framing, client timeouts, connection errors), so this is a small HTTP/1.1 server (its framing layer is
_http11.py) rather than a mocked transport. It uses anyio alone — one task per connection inside the server's
own task group, no thread, no blocking call — so it runs inside a test's event loop (`async with LoopbackServer(...)`)
or on its own (`simrun serve`), and structured concurrency tears it down deterministically. Bad input and vanished
clients are answered or ignored, never a crash.

Endpoints (bound to 127.0.0.1 unless told otherwise):

* `POST /v1/chat/completions` — non-streaming, or SSE when `stream: true` (`data: {chunk}` events, a final
  usage chunk when `stream_options: {"include_usage": true}`, then `data: [DONE]`). Bodies are framed with
  Content-Length, streams included (a reply is known before it is paced out), so connections stay alive.
* `POST /v1/embeddings` — vectors of the sim embedding (`sim/embed`, engine/models/sim/_embed.py) for any model
  name: `input` a string or an array of strings, `dimensions` (default 512), `encoding_format` `float` or
  `base64`. The injected error faults apply as for chat; the RPM/TPM limiter and latencies do not.
* `GET /v1/models` (and `GET /v1/models/{id}`) — the three sim model names.
* `GET /stats` — the counters of `ServerStats` as JSON; reading them is not counted.

Content: the request's `model` picks the sim role — a name containing `student` plays `sim/student`, one
containing `judge` plays `sim/judge`, anything else `sim/tutor` (case-insensitive). The sim gets the messages,
the request's `seed` (default 0) and an engine-side `RequestContext(role=...)` with no item: HTTP carries no
reference answer, so the sim tutor never leaks. A `response_format` of `json_object`/`json_schema` asks for JSON
(the attacker's shape from `sim/student`). The sim judge needs a rubric, which it takes from the sim's registry
of judge tasks (engine/models/sim/_tasks.py; plug-ins register them): a `json_schema` response format names it by
its `name` (a registered judge task); without one, the first registered rubric whose markers (JSON keys only that
rubric's prompt names) appear in the prompt; else the registry's default rubric. It judges the last user
message. Usage is the sim's token counts. Other generation parameters are accepted and ignored.

Knobs (`ServeOptions`; every probability defaults to 0): fixed and jittered latency, time to first token and
token rate for streams, RPM/TPM limits over a sliding window answered with 429 + `Retry-After`, injected 429 /
500 / 503 errors, quota exhaustion (429 `insufficient_quota`), dropped connections mid-response, malformed JSON
and slow-drip bodies. The faults of the n-th admitted request (chat or embeddings) depend only on `seed` and n, so
a sequential test sees the same fault sequence on every run.

The parts: options and counters (`_options`), request parsing (`_request`), rate windows and
fault draws (`_limits`), response writing and streaming (`_reply`); this module routes requests.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
import orjson

from engine.models._wire import embeddings_response, error_body, model_object, models_body
from engine.models.sim._embed import SimEmbedParams, embed_texts
from engine.models.sim._provider import SimChatModel
from engine.scenario._spec import ModelSpec
from engine.tools._http11 import (
    HEADER_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    IO_ERRORS,
    Connection,
    HttpError,
    LoopbackListener,
    Request,
    linger_close,
)
from engine.tools.serve._limits import ERROR_FAULTS, Limits, retry_after
from engine.tools.serve._options import MODEL_NAMES, ROLES, ServeOptions, ServerStats
from engine.tools.serve._reply import WORDS, Outcome, Replies
from engine.tools.serve._request import BadRequest, Chat, parse_chat, sim_request

__all__ = ("LoopbackServer", "ServeOptions", "ServerStats")


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
        self._limits = Limits(self.options)
        self._replies = Replies(self.options, self._stats)

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
                await self._replies.send_json(
                    conn, err.status, error_body(err.message, "invalid_request_error", None), False
                )
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

    async def _dispatch(self, conn: Connection, request: Request) -> Outcome:
        """Routes one request by path and method."""
        path, method, keep = request.path.rstrip("/") or "/", request.method, request.keep_alive
        if path == "/stats" and method == "GET":
            await self._replies.send_json(conn, 200, self.stats.to_json(), keep, counted=False)
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
            await self._replies.send_json(conn, 200, models_body(list(MODEL_NAMES.values())), keep)
            return "keep"
        if path.startswith("/v1/models/") and method == "GET":
            await self._replies.send_json(conn, 200, model_object(path.removeprefix("/v1/models/")), keep)
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
        await self._replies.send_json(conn, status, error_body(message, "invalid_request_error", code, param), keep)
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
        draws = self._limits.draw()
        if draws.fault in ERROR_FAULTS:
            await self._replies.send_fault(conn, draws.fault, keep)
            return "keep"
        tokens = sum(len(WORDS.findall(text)) * 4 // 3 for text in texts)
        vectors = embed_texts(texts, dimensions)
        payload = embeddings_response(vectors, body.get("model"), tokens, as_base64=encoding == "base64")
        await self._replies.send_json(conn, 200, payload, keep)
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
            chat = parse_chat(body)
        except BadRequest as err:
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

    async def _answer(self, conn: Connection, chat: Chat, keep: bool) -> Outcome:
        try:
            model = self._models[chat.role]
            reply = await model.complete(sim_request(chat, model.spec.params))
        except Exception as exc:  # a sim bug must not take the server down
            self.errors.append(exc)
            body = error_body(f"The simulator failed: {type(exc).__name__}.", "server_error", None)
            await self._replies.send_json(conn, 500, body, keep)
            return "keep"
        limited = self._limits.admit(reply)
        if limited is not None:
            wait_s, message, kind = limited
            self._stats.rate_limited += 1
            body = error_body(message, kind, "rate_limit_exceeded")
            await self._replies.send_json(conn, 429, body, keep, retry_after(wait_s))
            return "keep"
        draws = self._limits.draw()
        delay = self.options.latency_s + draws.jitter * self.options.jitter_s + self._limits.stall_left()
        if delay > 0:
            await anyio.sleep(delay)
        if draws.fault in ERROR_FAULTS:
            await self._replies.send_fault(conn, draws.fault, keep)
            return "keep"
        if draws.drip:
            self._stats.slow_drips += 1
        ident = f"chatcmpl-simrun{self._limits.admitted}"  # after the delay: later requests may have drawn
        if chat.stream:
            return await self._replies.stream(conn, chat, reply, draws, keep, ident)
        return await self._replies.complete(conn, chat, reply, draws, keep, ident)
