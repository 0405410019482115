"""How `simrun serve` writes a response: exact Content-Length framing, the injected error shapes, and the
sim reply as one JSON body or an SSE stream paced by ttft_s and tokens_per_s (dropped, malformed or dripped as
its draws say)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, Final, Literal

import anyio
import orjson

from engine.models._provider import ChatReply
from engine.models._wire import SSE_DONE, chunk_body, completion_body, error_body, sse, usage_body, usage_chunk
from engine.tools._http11 import Connection, encode_head
from engine.tools.serve._limits import Draws, retry_after
from engine.tools.serve._options import ServeOptions, ServerStats
from engine.tools.serve._request import Chat

__all__ = ("WORDS", "Outcome", "Replies")

Outcome = Literal["keep", "close", "abort"]
"""After a response: keep the connection, close it gracefully, or abort it (a drop: no linger)."""

_DRIP_PIECES: Final = 8
"""A slow-drip non-streaming body is sent in this many pieces."""
WORDS: Final = re.compile(r"\S+\s*")
"""A word with the spaces after it: the unit of stream chunks and of the embeddings' token estimate."""


class Replies:
    """Writes one server's responses and counts them in its `ServerStats` (shared with the server)."""

    def __init__(self, options: ServeOptions, stats: ServerStats) -> None:
        self.options = options
        self._stats = stats
        self._responses = 0

    def _request_id(self) -> str:
        self._responses += 1
        return f"req_simrun_{self._responses}"

    async def send_json(
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

    async def send_fault(self, conn: Connection, fault: str, keep: bool) -> None:
        """An injected error response, shaped like the real API's."""
        stats = self._stats
        if fault == "quota":
            stats.quota_exhausted += 1
            message = "You exceeded your current quota, please check your plan and billing details. (simrun serve)"
            await self.send_json(conn, 429, error_body(message, "insufficient_quota", "insufficient_quota"), keep)
        elif fault == "429":
            stats.injected_429 += 1
            message = (
                f"Rate limit reached (injected by simrun serve). Please try again in {self.options.retry_after_s:g}s."
            )
            body = error_body(message, "requests", "rate_limit_exceeded")
            await self.send_json(conn, 429, body, keep, retry_after(self.options.retry_after_s))
        elif fault == "500":
            stats.server_errors += 1
            body = error_body(
                "The server had an error while processing your request. (simrun serve)", "server_error", None
            )
            await self.send_json(conn, 500, body, keep)
        else:
            stats.server_errors += 1
            body = error_body("The server is overloaded or not ready yet. (simrun serve)", "server_error", None)
            await self.send_json(conn, 503, body, keep, retry_after(self.options.retry_after_s))

    async def complete(
        self, conn: Connection, chat: Chat, reply: ChatReply, draws: Draws, keep: bool, ident: str
    ) -> Outcome:
        """A non-streaming answer, possibly dropped inside its headers, malformed or dripped."""
        stats = self._stats
        body = orjson.dumps(completion_body(ident, chat.model, reply.text, _usage(reply)))
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

    async def stream(
        self, conn: Connection, chat: Chat, reply: ChatReply, draws: Draws, keep: bool, ident: str
    ) -> Outcome:
        """An SSE answer paced by ttft_s and tokens_per_s, possibly dropped after some chunks, malformed or dripped.

        The whole event sequence is built first so the head can carry its exact Content-Length; the sends are
        then spaced out: the first (role and first words) after `ttft_s`, each further content chunk after its
        tokens / `tokens_per_s` (plus `slow_drip_s` when dripping), and the finish, usage and `[DONE]` events
        right after the last words.
        """
        stats, options = self._stats, self.options
        ident, created = ident, int(time.time())

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

    def _delivered(self, reply: ChatReply, *, malformed: bool) -> None:
        """Counts the tokens of a completion delivered intact."""
        if malformed:
            return
        self._stats.prompt_tokens += reply.usage.prompt_tokens
        self._stats.completion_tokens += reply.usage.completion_tokens
        self._stats.tokens += reply.usage.prompt_tokens + reply.usage.completion_tokens


def _chunk_texts(text: str, words: int) -> list[str]:
    """Splits a reply into chunks of `words` words that join back to exactly the reply."""
    stripped = text.lstrip()
    pieces = WORDS.findall(stripped)
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


def _usage(reply: ChatReply) -> dict[str, int]:
    return usage_body(reply.usage.prompt_tokens, reply.usage.completion_tokens)
