"""A real-HTTP, in-process fake of the OpenAI chat-completions API.

Why a socket server rather than a mocked transport: the code under test reaches the provider
through ``openai.AsyncOpenAI`` and its ``httpx2`` connection pool, and the behaviours that matter
(keep-alive reuse, client timeouts, dropped connections, 429s with ``retry-after``, concurrency)
only show up when real bytes cross a real TCP socket. The server uses anyio alone so that it runs
inside the test's own event loop, needs no thread and no extra dependency, and is torn down
deterministically by structured concurrency.

Usage::

    async with FakeOpenAI([Reply(content="hi"), Reply(status=429, error_code="rate_limit_exceeded")]) as fake:
        client = openai.AsyncOpenAI(api_key="k", base_url=fake.base_url, max_retries=0)
        ...
    assert fake.seen[0].body["model"] == "some-model"

Enter it in the test body (or any ``async with`` inside one task). Do not hold it open across the
``yield`` of a pytest-asyncio async-generator fixture: pytest-asyncio runs fixture set-up and
tear-down in different tasks, and anyio refuses to exit a task group from a task other than the one
that entered it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio

from engine.models._wire import completion_body, error_body, error_type_for, models_body, usage_body
from engine.tools._http11 import Connection, HttpError, LoopbackListener, Request, encode_head, linger_close

__all__ = ["FakeOpenAI", "Reply", "Seen"]

# Headers the server owns: letting a script override them would corrupt HTTP framing.
_FRAMING_HEADERS: Final = frozenset({"content-length", "transfer-encoding", "connection"})
_MODELS_PAYLOAD: Final[dict[str, Any]] = models_body(["fake-model"])


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status. 2xx answers carry a chat.completion; anything else an OpenAI-style
            ``{"error": {...}}`` body, so the SDK raises the same exception class it would in
            production.
        content: Assistant message content for 2xx answers.
        headers: Extra response headers, e.g. ``{"retry-after": "0.05"}``. Framing headers
            (content-length, transfer-encoding, connection) are ignored because the server owns them.
        error_code: ``error.code`` of the error body (e.g. ``"insufficient_quota"``,
            ``"rate_limit_exceeded"``); the SDK exposes it as ``APIStatusError.code``.
        delay_s: Seconds to sleep before answering, to push the client into its timeout.
        drop: Close the connection without answering, to make the client see a connection error.
        body: An error answer's body as is, for servers that shape errors their own way (vLLM, LiteLLM).
    """

    status: int = 200
    content: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None
    delay_s: float = 0.0
    drop: bool = False
    body: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        """Rejects statuses that cannot carry a JSON body, so a typo fails at script-build time."""
        if not 200 <= self.status <= 599 or self.status in (204, 304):
            raise ValueError(f"Reply.status must be a 2xx-5xx status that allows a body, got {self.status}")
        if self.delay_s < 0:
            raise ValueError(f"Reply.delay_s must be >= 0, got {self.delay_s}")


@dataclass
class Seen:
    """A request the server received, recorded so tests can assert on what the client really sent.

    Attributes:
        path: Request path without the query string, e.g. ``/v1/chat/completions``.
        headers: Request headers with lower-cased names (repeated headers joined with ", ").
        body: Parsed JSON object; ``{}`` when the body was empty, not JSON or not an object.
        at: ``anyio.current_time()`` (the event loop's monotonic clock) once the body was read.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


@dataclass
class _Response:
    status: int
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False


def _error_response(
    status: int,
    message: str,
    error_type: str,
    code: str | None,
    headers: dict[str, str] | None = None,
) -> _Response:
    """Builds the body shape the OpenAI SDK unpacks into ``APIStatusError.body``/``.code``."""
    return _Response(status, error_body(message, error_type, code), dict(headers or {}))


def _parse_json(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """Decodes a JSON object body; returns ({}, reason) instead of raising on bad input."""
    if not raw.strip():
        return {}, "Request body is empty; expected a JSON object."
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}, "Request body is not valid JSON."
    if not isinstance(value, dict):
        return {}, "Request body must be a JSON object."
    return value, None


def _word_count(content: object) -> int:
    """Counts whitespace-separated words in a message content string or list of text parts."""
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_word_count(part.get("text")) for part in content if isinstance(part, dict))
    return 0


def _encode(response: _Response, keep_alive: bool, request_id: str) -> bytes:
    """Serialises a response with an exact Content-Length so keep-alive framing stays intact."""
    body = json.dumps(response.payload, separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "content-length": str(len(body)), "x-request-id": request_id}
    headers.update(response.headers)
    return encode_head(response.status, headers, keep_alive) + body


class FakeOpenAI(LoopbackListener):
    """Answers ``/v1/chat/completions`` from a script, over real HTTP/1.1 on 127.0.0.1.

    The script is either a sequence of `Reply` consumed in order (then `default`, which is a 200
    "ok" unless given) or a callable ``(request_body) -> Reply``. ``GET /v1/models`` lists one
    model; any other path gets a 404 error body. Connections are kept alive and each runs in its own
    task, so the SDK's pooled, concurrent requests behave as they would against the real service.

    Attributes:
        seen: Every request that was framed well enough to route, in arrival order, including
            rate-limited and erroneous ones.
        accepted: Chat-completion requests admitted by the rate limiter (they then get their
            scripted reply, whatever its status).
        rejected: Chat-completion requests refused by the rate limiter with a 429; these do not
            consume the script.
        connections: TCP connections accepted so far; lets a test check that the client reuses
            keep-alive connections instead of opening one per request.
        errors: Unexpected exceptions swallowed to keep serving (e.g. a script callable that
            raised, which is also answered with a 500); assert it is empty to catch broken fakes.
    """

    def __init__(
        self,
        script: Sequence[Reply] | Callable[[dict[str, Any]], Reply] = (),
        *,
        default: Reply | None = None,
        rpm_limit: int | None = None,
        window_s: float = 60.0,
        models_status: int = 200,
    ) -> None:
        """Configures the script and the optional rate limit; nothing is bound until entered.

        Args:
            script: Replies consumed in order, or a callable picking a reply from the request body.
            default: Reply used once a sequence script is exhausted; a 200 "ok" if omitted.
            rpm_limit: If set, at most this many chat-completion requests are admitted per sliding
                `window_s`; the rest get a 429 ``rate_limit_exceeded`` with a ``retry-after`` header.
            window_s: Length of the sliding rate-limit window, shortened in tests to keep them fast.
            models_status: The status of ``GET /v1/models``; an error status gets an error body (a proxy that
                refuses to list models to a key that may still chat).
        """
        if rpm_limit is not None and rpm_limit < 1:
            raise ValueError(f"rpm_limit must be >= 1, got {rpm_limit}")
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        super().__init__()
        self._script_fn: Callable[[dict[str, Any]], Reply] | None
        if isinstance(script, Sequence):
            self._script_fn = None
            self._queue: deque[Reply] = deque(script)
        else:
            self._script_fn = script
            self._queue = deque()
        self.default = default if default is not None else Reply()
        self.models_status = models_status
        self.rpm_limit = rpm_limit
        self.window_s = window_s
        self.seen: list[Seen] = []
        self.accepted = 0
        self.rejected = 0
        self._admitted: deque[float] = deque()
        self._responses = 0

    @property
    def base_url(self) -> str:
        """The ``base_url`` to hand to ``openai.AsyncOpenAI``; only valid once entered."""
        if self.port == 0:
            raise RuntimeError("FakeOpenAI is not serving; use `async with FakeOpenAI(...) as fake`.")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        """Scripted replies not yet consumed (always 0 for a callable script)."""
        return len(self._queue)

    async def converse(self, conn: Connection) -> None:
        """Runs the HTTP/1.1 request/response loop of one keep-alive connection."""
        while True:
            try:
                request = await conn.read_request()
            except HttpError as err:
                response = _error_response(err.status, err.message, "invalid_request_error", None)
                await conn.stream.send(_encode(response, False, self._next_request_id()))
                await linger_close(conn.stream)
                return
            if request is None:
                return
            response = await self._dispatch(request)
            if response.drop:
                return
            await conn.stream.send(_encode(response, request.keep_alive, self._next_request_id()))
            if not request.keep_alive:
                await linger_close(conn.stream)
                return

    def _next_request_id(self) -> str:
        self._responses += 1
        return f"req_fake_{self._responses}"

    async def _dispatch(self, request: Request) -> _Response:
        """Records the request and routes it by path and method."""
        body, json_error = _parse_json(request.body)
        self.seen.append(Seen(request.path, request.headers, body, anyio.current_time()))
        if request.path == "/v1/chat/completions":
            if request.method != "POST":
                return _error_response(405, "Use POST for chat completions.", "invalid_request_error", None)
            if json_error is not None:
                return _error_response(400, json_error, "invalid_request_error", None)
            return await self._chat_completion(body)
        if request.path == "/v1/models":
            if request.method != "GET":
                return _error_response(405, "Use GET to list models.", "invalid_request_error", None)
            if self.models_status >= 400:
                message = f"Fake {self.models_status} error."
                return _error_response(self.models_status, message, error_type_for(self.models_status, None), None)
            return _Response(200, _MODELS_PAYLOAD)
        return _error_response(
            404,
            f"Unknown request URL: {request.method} {request.path}",
            "invalid_request_error",
            "unknown_url",
        )

    def _admit(self) -> _Response | None:
        """Applies the sliding-window limit; returns the 429 to send, or None if admitted."""
        if self.rpm_limit is None:
            self.accepted += 1
            return None
        now = anyio.current_time()
        while self._admitted and self._admitted[0] <= now - self.window_s:
            self._admitted.popleft()
        if len(self._admitted) >= self.rpm_limit:
            self.rejected += 1
            wait_s = max(self._admitted[0] + self.window_s - now, 0.001)
            return _error_response(
                429,
                f"Rate limit reached for requests: limit {self.rpm_limit} per {self.window_s:g}s "
                f"(fake). Please try again in {wait_s:.3f}s.",
                "requests",
                "rate_limit_exceeded",
                {"retry-after": f"{wait_s:.3f}"},
            )
        self._admitted.append(now)
        self.accepted += 1
        return None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._script_fn is not None:
            return self._script_fn(body)
        return self._queue.popleft() if self._queue else self.default

    async def _chat_completion(self, body: dict[str, Any]) -> _Response:
        """Answers one chat completion: rate limit, then the scripted reply."""
        if body.get("stream"):
            return _error_response(400, "FakeOpenAI does not implement streaming.", "invalid_request_error", None)
        limited = self._admit()
        if limited is not None:
            return limited
        try:
            reply = self._next_reply(body)
        except Exception as exc:
            self.errors.append(exc)
            return _error_response(500, f"FakeOpenAI script raised {exc!r}.", "server_error", None)
        if reply.delay_s > 0:
            await anyio.sleep(reply.delay_s)
        headers = {name.lower(): value for name, value in reply.headers.items()}
        headers = {name: value for name, value in headers.items() if name not in _FRAMING_HEADERS}
        if reply.drop:
            return _Response(reply.status, {}, headers, drop=True)
        if not 200 <= reply.status < 300 and reply.body is not None:
            return _Response(reply.status, reply.body, headers)
        if not 200 <= reply.status < 300:
            message = f"Fake {reply.status} error" + (f" ({reply.error_code})." if reply.error_code else ".")
            error_type = error_type_for(reply.status, reply.error_code)
            return _error_response(reply.status, message, error_type, reply.error_code, headers)
        return _Response(reply.status, self._completion(body, reply.content), headers)

    def _completion(self, body: dict[str, Any], content: str) -> dict[str, Any]:
        """Builds a chat.completion whose usage is word counts, so token accounting is checkable."""
        messages = body.get("messages")
        prompt_tokens = (
            sum(_word_count(m.get("content")) for m in messages if isinstance(m, dict))
            if isinstance(messages, list)
            else 0
        )
        completion_tokens = _word_count(content)
        model = body.get("model")
        return completion_body(
            f"chatcmpl-fake{self.accepted}",
            model if isinstance(model, str) else "fake-model",
            content,
            usage_body(prompt_tokens, completion_tokens),
        )
