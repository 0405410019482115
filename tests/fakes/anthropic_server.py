"""A real-HTTP fake of Anthropic's Messages API (`POST /v1/messages`, `GET /v1/models`), for the `anthropic` provider.

It checks what the real API checks and a client could get wrong: the key (`x-api-key` or a bearer token), a
`max_tokens`, turns that start with the user and alternate, and a system prompt passed as a parameter, never as
a turn. Replies
come from a script (`script(body) -> str | (status, error type)`), and usage counts words, so token accounting
can be checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.tools._http11 import Connection, HttpError, LoopbackListener, encode_head, linger_close

__all__ = ["FakeAnthropic"]

Script = Callable[[dict[str, Any]], "str | tuple[int, str]"]


class FakeAnthropic(LoopbackListener):
    """Attributes: `seen` holds every `/v1/messages` body; `models` is what `/v1/models` lists."""

    def __init__(self, script: Script, *, key: str, models: tuple[str, ...] = ("claude-fake",)) -> None:
        super().__init__()
        self.script, self.key, self.models = script, key, models
        self.seen: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def converse(self, conn: Connection) -> None:
        while True:
            try:
                request = await conn.read_request()
            except HttpError as err:
                await conn.stream.send(_error(err.status, "invalid_request_error", err.message, False))
                await linger_close(conn.stream)
                return
            if request is None:
                return
            keep = request.keep_alive
            credential = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            if credential != self.key:
                response = _error(401, "authentication_error", "invalid x-api-key", keep)
            elif request.path.startswith("/v1/models") and request.method == "GET":
                rows = [{"type": "model", "id": name, "display_name": name} for name in self.models]
                response = _json(200, {"data": rows, "has_more": False, "first_id": None, "last_id": None}, keep)
            elif request.path == "/v1/messages" and request.method == "POST":
                response = self._message(request.body, keep)
            else:
                response = _error(404, "not_found_error", f"no route {request.path}", keep)
            await conn.stream.send(response)
            if not keep:
                await linger_close(conn.stream)
                return

    def _message(self, raw: bytes, keep: bool) -> bytes:
        body = json.loads(raw)
        self.seen.append(body)
        turns = body.get("messages") or []
        roles = [turn.get("role") for turn in turns]
        if not isinstance(body.get("max_tokens"), int):
            return _error(400, "invalid_request_error", "max_tokens: Field required", keep)
        if not roles or roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:], strict=False)):
            return _error(400, "invalid_request_error", "messages: roles must alternate, starting with user", keep)
        if "system" in roles:
            return _error(400, "invalid_request_error", "messages: system is a parameter, not a role", keep)
        if body.get("model") not in self.models:
            return _error(404, "not_found_error", f"model: {body.get('model')}", keep)
        answer = self.script(body)
        if isinstance(answer, tuple):
            status, kind = answer
            return _error(status, kind, f"fake {kind}", keep)
        prompt = sum(len(str(turn.get("content", "")).split()) for turn in turns)
        prompt += len(str(body.get("system", "")).split())
        payload = {
            "id": f"msg_fake{len(self.seen)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": answer}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": len(answer.split())},
        }
        return _json(200, payload, keep)


def _json(status: int, payload: dict[str, Any], keep: bool) -> bytes:
    data = json.dumps(payload).encode()
    head = encode_head(status, {"content-type": "application/json", "content-length": str(len(data))}, keep)
    return head + data


def _error(status: int, kind: str, message: str, keep: bool) -> bytes:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}}, keep)
