"""A stateful tutoring product on loopback: its own API, its own history, a session id, and sometimes a stream.

It stands for the kind of tutor a team deploys (a system prompt, retrieval and state behind its own endpoint),
so the `http` target is tested against what such products do: it names a session on the first message (or
takes the one the client names), keeps every session's history itself and refuses a request that carries one,
wants a key in a header, and streams every third reply as server-sent events. docs/http-tutor.md shows it.

    async with TutorApp(key="k") as app:
        ...  # POST {app.base_url}/chat  {"session_id": null, "message": "hi"}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.tools._http11 import Connection, HttpError, LoopbackListener, encode_head, linger_close

__all__ = ["TutorApp"]

_REFUSAL = "I'm not going to hand you the answer, but let's work it out together."


@dataclass
class _Session:
    history: list[tuple[str, str]] = field(default_factory=list)
    """(student, tutor) exchanges, as this product remembers them."""


class TutorApp(LoopbackListener):
    """`POST /chat` with `{"session_id", "message", "system"?}`; `GET /health`. Every third reply streams.

    Attributes:
        sessions: Session id → what the product remembers.
        requests: Every JSON body received on `/chat`, in order.
        echo_key: Replies repeat the credential they were sent (a leaky product), to test redaction.
    """

    def __init__(self, *, key: str, echo_key: bool = False, stream_every: int = 3) -> None:
        super().__init__()
        self.key, self.echo_key, self.stream_every = key, echo_key, stream_every
        self.sessions: dict[str, _Session] = {}
        self.requests: list[dict[str, Any]] = []
        self._replies = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def converse(self, conn: Connection) -> None:
        while True:
            try:
                request = await conn.read_request()
            except HttpError as err:
                await conn.stream.send(_json(err.status, {"error": err.message}, keep_alive=False))
                await linger_close(conn.stream)
                return
            if request is None:
                return
            if request.headers.get("authorization") != f"Bearer {self.key}":
                response = _json(401, {"error": "unknown key"}, request.keep_alive)
            elif request.path == "/health" and request.method == "GET":
                response = _json(200, {"ok": True}, request.keep_alive)
            elif request.path == "/chat" and request.method == "POST":
                response = self._chat(request.body, request.headers["authorization"], request.keep_alive)
            else:
                response = _json(404, {"error": f"no route {request.method} {request.path}"}, request.keep_alive)
            await conn.stream.send(response)
            if not request.keep_alive:
                await linger_close(conn.stream)
                return

    def _chat(self, raw: bytes, credential: str, keep_alive: bool) -> bytes:
        try:
            body = json.loads(raw)
        except ValueError:
            return _json(400, {"error": "body is not JSON"}, keep_alive)
        self.requests.append(body)
        if not isinstance(body, dict) or not isinstance(body.get("message"), str) or "messages" in body:
            return _json(400, {"error": "send one `message`; this tutor keeps the history itself"}, keep_alive)
        ident = body.get("session_id") or f"s{len(self.sessions) + 1}"
        session = self.sessions.setdefault(str(ident), _Session())
        message = body["message"]
        turn = len(session.history) + 1
        if re.search(r"\b(answer|solution|just tell)\b", message, re.IGNORECASE):
            text = _REFUSAL
        else:
            text = f"Turn {turn}: good question. What do you already know about it? Try the first step yourself."
        if self.echo_key:
            text += f" (my credential is {credential})"
        session.history.append((message, text))
        prompt = sum(len(s.split()) + len(t.split()) for s, t in session.history[:-1]) + len(message.split())
        usage = {"input": prompt, "output": len(text.split())}
        self._replies += 1
        if self._replies % self.stream_every == 0:
            return _stream(text, str(ident), usage, keep_alive)
        return _json(200, {"session_id": ident, "reply": {"text": text}, "usage": usage}, keep_alive)


def _json(status: int, payload: dict[str, Any], keep_alive: bool) -> bytes:
    data = json.dumps(payload).encode()
    head = encode_head(status, {"content-type": "application/json", "content-length": str(len(data))}, keep_alive)
    return head + data


def _stream(text: str, ident: str, usage: dict[str, int], keep_alive: bool) -> bytes:
    """The reply as server-sent events: its words as deltas, then the session and usage, then `[DONE]`."""
    words = text.split(" ")
    events: list[dict[str, Any]] = [
        {"delta": word + (" " if i < len(words) - 1 else "")} for i, word in enumerate(words)
    ]
    events.append({"session_id": ident, "usage": usage})
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    head = encode_head(200, {"content-type": "text/event-stream", "content-length": str(len(data))}, keep_alive)
    return head + data
