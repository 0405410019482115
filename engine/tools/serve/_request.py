"""The parts of a chat-completion request `simrun serve` uses, and the sim request they become.

HTTP carries no item, so the sim gets none (the sim tutor never leaks a reference answer); a judge gets the
rubric the sim's registry of judge tasks finds for the request, never one matched here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.models._provider import ChatRequest, Message, RequestContext
from engine.models.sim._tasks import task_for_request
from engine.tools.serve._options import Role

__all__ = ("BadRequest", "Chat", "parse_chat", "sim_request")


class BadRequest(Exception):
    """A chat request whose JSON is well framed but not a valid chat completion request (400)."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Chat:
    """The parts of a chat-completion request the server uses."""

    model: str
    role: Role
    messages: list[Message]
    seed: int
    stream: bool
    include_usage: bool
    json_output: bool
    schema_name: str | None = None


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


def parse_chat(body: dict[str, Any]) -> Chat:
    """Validates the fields the server relies on; anything else in the body is accepted and ignored.

    Raises:
        BadRequest: A field is missing or has the wrong type (answered with 400 naming the field).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a non-empty string.", "model")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty array of message objects.", "messages")
    messages: list[Message] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a string 'role'.", f"messages[{index}]")
        messages.append({"role": message["role"], "content": _text(message.get("content"))})
    seed = body.get("seed", 0)
    if seed is None:
        seed = 0
    if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**63) <= seed < 2**63:
        raise BadRequest("'seed' must be a 64-bit integer.", "seed")
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise BadRequest("'stream' must be a boolean.", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object.", "stream_options")
    response_format = body.get("response_format")
    json_output = isinstance(response_format, dict) and response_format.get("type") in ("json_object", "json_schema")
    schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
    schema_name = schema.get("name") if isinstance(schema, dict) else None
    return Chat(
        model=model,
        role=_role_for(model),
        messages=messages,
        seed=seed,
        stream=bool(stream),
        include_usage=bool(stream) and bool((options or {}).get("include_usage")),
        json_output=json_output,
        schema_name=schema_name if isinstance(schema_name, str) else None,
    )


def sim_request(chat: Chat, knobs: Mapping[str, Any]) -> ChatRequest:
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
