"""The `http` provider: a tutoring product behind its own API, one templated request per tutor turn.

Stateful products keep their own history, so in a session mode only the new student message is sent with the
session id. A protocol may rewind a dialogue (the crescendo attacker hides a refused exchange and tries again):
the product's session still holds the hidden turns, so simrun opens a new session and replays the kept student
messages before sending the new one. The product's replies to the replay are not recorded — the dialogue keeps
the replies it had — and their tokens are counted. A call that fails abandons its session, so a retry never
sends a message twice to one session. The HTTP client is the lean transport's session (aiohttp); status codes
become simrun's errors through the wire module's one table, and the engine's one retry layer retries them.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp
import orjson

from engine.core._errors import ProviderError, ProviderTimeout, ScenarioError
from engine.core._events import redact_url
from engine.core._records import Usage
from engine.core._templates import render
from engine.models._http_spec import HttpProbe, HttpTarget, jsonpath, whole_variable
from engine.models._lean import LeanSession
from engine.models._provider import ChatModel, ChatReply, ChatRequest
from engine.models._wire import error_for_status
from engine.scenario._spec import ModelSpec

__all__ = ("HttpChatModel",)

_KEPT_SESSIONS = 100_000
"""Episodes whose session is remembered; an older one opens a new session (and replays) if it ever continues."""
_PROBE_MESSAGE = "Say OK."


@dataclass
class _Session:
    ident: str
    sent: list[str] = field(default_factory=list)
    """The student messages this session has been sent, in order."""


@dataclass(frozen=True)
class _Answer:
    text: str
    usage: Usage
    session_id: str | None


class HttpChatModel(ChatModel):
    """A tutor behind its own HTTP API, configured by `HttpTarget` in the model's `params`."""

    default_key_env: ClassVar[str | None] = None

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[HttpTarget]:
        return HttpTarget

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        if role != "tutor":
            raise ScenarioError(
                f"{spec.model}: the http provider serves the tutor role only (a product, not a student or judge)"
            )
        if spec.api_key_env is not None and not os.environ.get(spec.api_key_env):
            raise ScenarioError(f"{role} model {spec.model}: set ${spec.api_key_env} (its api_key_env)")

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.target = HttpTarget.model_validate(spec.params)
        self.base_url = spec.base_url or ""
        self.cacheable = self.target.session == "none"  # a cached turn never reaches the product's state
        self._key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        self.http = LeanSession(
            self.base_url, api_key=None, timeout_s=spec.timeout_s, max_connections=spec.max_concurrency or 1000
        )
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    @functools.cached_property
    def _where(self) -> str:
        return redact_url(self.base_url) if self.base_url else self.spec.model

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        messages = [dict(m) for m in request.messages]
        students = [m.get("content", "") for m in messages if m.get("role") == "user"]
        if not students:
            raise ScenarioError(f"{self.spec.model}: a tutor turn with no student message to send")
        episode = _episode(request)
        shared = {
            "base_url": self.base_url,
            "model": self.spec.name,
            "system": next((m.get("content", "") for m in messages if m.get("role") == "system"), ""),
            "preamble": _preamble(messages),
            "episode": episode,
        }
        if self.target.session == "none":
            variables = {**shared, "messages": messages, "message": students[-1], "session_id": episode["id"]}
            answer = await self._send(variables, turn=len(students))
            return ChatReply(answer.text, answer.usage, self.spec.model)
        return await self._in_session(str(episode["id"]), students, shared)

    async def _in_session(self, key: str, students: list[str], shared: dict[str, Any]) -> ChatReply:
        kept, new = students[:-1], students[-1]
        session = self._sessions.pop(key, None)
        spent = Usage()
        if session is None or session.sent != kept:  # a new episode, or one that rewound its dialogue
            session = _Session(uuid.uuid4().hex if self.target.session == "client" else "")
            for text in kept:
                spent = spent + (await self._session_turn(session, text, shared)).usage
        answer = await self._session_turn(session, new, shared)
        self._sessions[key] = session  # only a session whose every turn succeeded is continued
        if len(self._sessions) > _KEPT_SESSIONS:
            self._sessions.popitem(last=False)
        return ChatReply(answer.text, spent + answer.usage, self.spec.model)

    async def _session_turn(self, session: _Session, text: str, shared: dict[str, Any]) -> _Answer:
        variables = {**shared, "message": text, "session_id": session.ident}
        answer = await self._send(variables, turn=len(session.sent) + 1)
        if answer.session_id:
            session.ident = answer.session_id
        elif not session.ident:
            raise self._malformed(f"no session id at {self.target.session_id} in the first reply of a session")
        session.sent.append(text)
        return answer

    async def _send(self, variables: dict[str, Any], *, turn: int) -> _Answer:
        variables = {**variables, "turn": turn}
        target = self.target
        url = render(target.url, variables)
        headers = {
            name: render(value, {**variables, "api_key": self._key or ""}) for name, value in target.headers.items()
        }
        body = _body(target.body, variables, headers)
        status, response_headers, raw, streamed = await self._request(target.method, url, headers, body)
        if status >= 400:
            raise error_for_status(self.spec.model, status, response_headers, raw, endpoint=self._where)
        return self._read_stream(raw) if streamed else self._read(raw)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> tuple[int, Mapping[str, str], bytes, bool]:
        model, where = self.spec.model, self._where
        try:
            async with self.http.session.request(method, url, data=body, headers=headers) as response:
                raw = await response.read()
                streamed = response.content_type == "text/event-stream"
                return response.status, response.headers, raw, streamed
        except TimeoutError as exc:
            raise ProviderTimeout(model, "request timed out", endpoint=where) from exc
        except aiohttp.ClientError as exc:
            raise ProviderError(model, f"connection failed ({type(exc).__name__})", endpoint=where) from exc

    def _read(self, raw: bytes) -> _Answer:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise self._malformed("the reply is not JSON") from None
        texts = [text for text in _found(self.target.reply, data) if text is not None]
        if not texts:
            raise self._malformed(f"nothing at {self.target.reply} in the reply")
        return _Answer("".join(str(t) for t in texts), self._usage(data), self._session_of(data))

    def _read_stream(self, raw: bytes) -> _Answer:
        """A whole `text/event-stream` body: the pieces at `stream.text`, the session id and usage where found."""
        stream = self.target.stream
        if stream is None:
            raise self._malformed("the product streamed its reply but the target has no `stream` settings")
        pieces: list[str] = []
        usage, session_id = Usage(), None
        for line in raw.splitlines():
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == stream.done.encode():
                break
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise self._malformed("a stream event is not JSON") from None
            pieces.extend(str(t) for t in _found(stream.text, event) if t is not None)
            found = self._usage(event)
            usage = found if found.total else usage
            session_id = self._session_of(event) or session_id
        return _Answer("".join(pieces), usage, session_id)

    def _usage(self, data: Any) -> Usage:
        paths = self.target.usage
        if paths is None:
            return Usage()
        counts = []
        for path in (paths.prompt_tokens, paths.completion_tokens):
            values = _found(path, data) if path else []
            try:
                counts.append(max(0, int(values[0])) if values else 0)
            except (TypeError, ValueError):
                raise self._malformed(f"the token count at {path} is not a number") from None
        return Usage(prompt_tokens=counts[0], completion_tokens=counts[1])

    def _session_of(self, data: Any) -> str | None:
        if self.target.session_id is None:
            return None
        values = _found(self.target.session_id, data)
        return str(values[0]) if values and values[0] not in (None, "") else None

    def _malformed(self, detail: str) -> ProviderError:
        return ProviderError(self.spec.model, f"malformed response: {detail}", malformed=True, endpoint=self._where)

    async def probe(self) -> None:
        """The pre-run check: the configured probe request, or one turn in a new session; raises ProviderError."""
        probe = self.target.probe
        if isinstance(probe, HttpProbe):
            variables = {"base_url": self.base_url, "model": self.spec.name}
            headers = {k: render(v, {**variables, "api_key": self._key or ""}) for k, v in probe.headers.items()}
            body = _body(probe.body, variables, headers)
            status, response_headers, raw, _ = await self._request(
                probe.method, render(probe.url, variables), headers, body
            )
            if status >= 400:
                raise error_for_status(self.spec.model, status, response_headers, raw, endpoint=self._where)
            return
        episode: dict[str, Any] = {"id": "probe", "item_id": None, "condition": {}}
        shared = {"base_url": self.base_url, "model": self.spec.name, "system": "", "preamble": "", "episode": episode}
        if self.target.session == "none":
            message = {"role": "user", "content": _PROBE_MESSAGE}
            await self._send(
                {**shared, "messages": [message], "message": _PROBE_MESSAGE, "session_id": "probe"}, turn=1
            )
        else:
            session = _Session(uuid.uuid4().hex if self.target.session == "client" else "")
            await self._session_turn(session, _PROBE_MESSAGE, shared)

    @property
    def probes(self) -> bool:
        return self.target.probe is not False

    async def aclose(self) -> None:
        await self.http.aclose()


def _episode(request: ChatRequest) -> dict[str, Any]:
    context = request.context
    return {
        "id": context.episode_id or "episode",
        "item_id": context.item.id if context.item is not None else None,
        "condition": dict(context.condition),
    }


def _preamble(messages: Sequence[Mapping[str, str]]) -> str:
    """The tutor turns before the first student message (a protocol's scripted opening the product never wrote)."""
    lines = []
    for message in messages:
        if message.get("role") == "user":
            break
        if message.get("role") == "assistant":
            lines.append(message.get("content", ""))
    return "\n\n".join(lines)


def _found(path: str, data: Any) -> list[Any]:
    return [match.value for match in jsonpath(path).find(data)]


def _body(template: Any, variables: Mapping[str, Any], headers: dict[str, str]) -> bytes | None:
    """The rendered body; a JSON body sets its content type unless a header names one."""
    if template is None:
        return None
    has_type = any(name.lower() == "content-type" for name in headers)
    if isinstance(template, str):
        if not has_type:
            headers["content-type"] = "text/plain; charset=utf-8"
        return render(template, variables).encode()
    if not has_type:
        headers["content-type"] = "application/json"
    return orjson.dumps(_filled(template, variables))


def _filled(value: Any, variables: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        name = whole_variable(value)
        if name is not None and not isinstance(variables.get(name), str):
            return variables.get(name)
        return render(value, variables)
    if isinstance(value, dict):
        return {key: _filled(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, variables) for item in value]
    return value
