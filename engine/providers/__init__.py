"""Model providers: `openai` (any OpenAI-compatible endpoint) and `sim` (the offline deterministic simulator)."""

from .base import PROVIDERS, ChatModel, ChatReply, ChatRequest, Message, RequestContext


@PROVIDERS.register("openai")
def _openai() -> type[ChatModel]:
    from .openai import OpenAIChatModel

    return OpenAIChatModel


@PROVIDERS.register("sim")
def _sim() -> type[ChatModel]:
    from .sim import SimChatModel

    return SimChatModel


__all__ = ("PROVIDERS", "ChatModel", "ChatReply", "ChatRequest", "Message", "RequestContext")
