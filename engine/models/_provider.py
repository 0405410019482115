"""What every model provider implements, and the request it receives."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from engine.core._errors import ScenarioError
from engine.core._records import Usage
from engine.core._registry import Registry
from engine.scenario._items import Item
from engine.scenario._spec import ModelSpec

__all__ = ("PROVIDERS", "ChatModel", "ChatReply", "ChatRequest", "Message", "RequestContext", "key_variables")

Message = Mapping[str, str]


@dataclass(frozen=True)
class RequestContext:
    """Engine-side facts about a call. Never sent to a real provider; the `sim` provider reads it.

    It lets the simulator play its role faithfully (it knows the item's reference answer, which pressure
    line a simulated student is on, which rubric a judge applies) without parsing prompts.
    """

    role: Literal["tutor", "student", "judge"]
    item: Item | None = None
    task: str | None = None
    """What is asked of the model beyond chatting, e.g. the judge rubric `harm`."""
    condition: Mapping[str, str] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    episode_id: str | None = None
    """The episode the call belongs to: an `http` target keeps one product session per episode."""


@dataclass(frozen=True)
class ChatRequest:
    messages: Sequence[Message]
    context: RequestContext
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)
    json_output: bool = False
    """Ask for a JSON object (`response_format`) where the provider supports it."""
    response_schema: Mapping[str, Any] | None = None
    """The JSON schema the reply must follow (implies `json_output`), named by `context.task`. Provider-neutral:
    each provider maps it to its wire (`openai`: `response_format: json_schema`, strict, or `json_object` when the
    endpoint's `structured_output` says it has no schemas); callers validate the reply either way."""


@dataclass(frozen=True)
class ChatReply:
    text: str
    usage: Usage
    model: str


class ChatModel(abc.ABC):
    """A model endpoint. Owns its HTTP client, if any; the engine closes it at the end of a run."""

    default_key_env: ClassVar[str | None] = None
    """The variable that holds the key when a spec names no `api_key_env` (None: the provider needs none)."""
    cacheable: bool = True
    """False for an endpoint with state of its own (a product session): a cached reply would skip it."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    @classmethod
    def key_variables(cls, spec: ModelSpec) -> set[str]:
        """The environment variables whose values are this endpoint's secrets (redacted everywhere)."""
        variable = spec.api_key_env or cls.default_key_env
        return {variable} if variable else set()

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        """Validate `spec` before anything runs; raise `ScenarioError` (e.g. unknown params, missing key)."""

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[BaseModel] | None:
        """The model `spec.params` must validate against, if this provider checks them (the sim's knobs)."""
        return None

    @abc.abstractmethod
    async def complete(self, request: ChatRequest, /) -> ChatReply:
        """One chat completion. Raise `ProviderError` subclasses; never retry here."""

    async def embed(self, texts: Sequence[str], /) -> list[list[float]]:
        """One embedding vector per text, in order. Raise `ProviderError` subclasses; never retry here.

        Optional: chat-only providers keep this default, so asking them for vectors is a user error.
        """
        raise ScenarioError(f"provider {self.spec.provider!r} has no embeddings (model {self.spec.model!r})")

    async def aclose(self) -> None:
        """Release connections."""


PROVIDERS: Registry[Callable[[], type[ChatModel]]] = Registry("provider", "providers")
"""Provider name → a function that imports and returns the implementation (so `openai` loads only when used)."""


@PROVIDERS.register("openai")
def _openai() -> type[ChatModel]:
    from engine.models._openai import OpenAIChatModel

    return OpenAIChatModel


@PROVIDERS.register("anthropic")
def _anthropic() -> type[ChatModel]:
    from engine.models._anthropic import AnthropicChatModel

    return AnthropicChatModel


@PROVIDERS.register("litellm")
def _litellm() -> type[ChatModel]:
    from engine.models._litellm import LiteLLMChatModel

    return LiteLLMChatModel


@PROVIDERS.register("http")
def _http() -> type[ChatModel]:
    from engine.models._http import HttpChatModel

    return HttpChatModel


def key_variables(specs: Sequence[ModelSpec]) -> set[str]:
    """The variables every configured provider declares for its keys: the secrets a run keeps out of files."""
    found: set[str] = set()
    for spec in specs:
        found |= PROVIDERS.get(spec.provider)().key_variables(spec)
    return found


@PROVIDERS.register("sim")
def _sim() -> type[ChatModel]:
    from engine.models.sim._provider import SimChatModel

    return SimChatModel
