"""The handle agents and judges use to call a model: throttling, per-attempt timeouts and the one retry loop."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from .errors import ProviderError, ProviderTimeout, QuotaExhausted
from .providers.base import ChatModel, ChatReply, ChatRequest, Message, RequestContext
from .retry import backoff_delay, classify
from .spec import ModelSpec
from .text import word_count
from .throttle import Throttle

__all__ = ("CallStats", "ModelClient", "estimate_tokens")

log = structlog.get_logger("simrun")


@dataclass
class CallStats:
    """Counters shared by a run's clients; the progress bar and the manifest read them."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries_by_kind: dict[str, int] = field(default_factory=dict)


def estimate_tokens(messages: Sequence[Message], max_tokens: int = 512) -> int:
    """A cheap upper-ish estimate of a call's tokens, charged to the TPM bucket before the call."""
    prompt = sum(word_count(m.get("content", "")) for m in messages) * 4 // 3 + 4 * len(messages)
    return prompt + max_tokens


class ModelClient:
    """One role's view of one endpoint. Several clients may share the endpoint's model and throttle."""

    def __init__(self, role: str, spec: ModelSpec, model: ChatModel, throttle: Throttle, stats: CallStats) -> None:
        self.role, self.spec, self._model, self._throttle, self._stats = role, spec, model, throttle, stats

    @property
    def model_id(self) -> str:
        return self.spec.model

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        context: RequestContext,
        seed: int,
        json_output: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> tuple[ChatReply, float]:
        """Call the model, retrying transient failures; returns the reply and its latency in seconds."""
        request = ChatRequest(
            messages=messages,
            context=context,
            seed=seed,
            params={**self.spec.params, **(params or {})},
            json_output=json_output,
        )
        estimate = estimate_tokens(messages, int(request.params.get("max_tokens", 512)))
        attempt = 0
        while True:
            try:
                async with self._throttle.slot(estimate):
                    self._stats.requests += 1
                    started = time.perf_counter()
                    reply = await self._attempt(request)
                    latency = time.perf_counter() - started
                break
            except ProviderError as exc:
                if isinstance(exc, QuotaExhausted) and self._throttle.exhausted is None:
                    self._throttle.exhausted = exc
                    log.error("provider.quota_exhausted", model=self.model_id, error=str(exc))
                decision = classify(exc)
                if not decision.retry or attempt >= self.spec.max_retries:
                    self._stats.failures += 1
                    raise
                delay = decision.after if decision.after is not None else backoff_delay(attempt)
                attempt += 1
                self._stats.retries += 1
                self._stats.retries_by_kind[exc.kind] = self._stats.retries_by_kind.get(exc.kind, 0) + 1
                log.warning(
                    "provider.retry",
                    model=self.model_id,
                    role=self.role,
                    attempt=attempt,
                    kind=exc.kind,
                    sleep_s=round(delay, 3),
                )
                await anyio.sleep(delay)
        self._stats.prompt_tokens += reply.usage.prompt_tokens
        self._stats.completion_tokens += reply.usage.completion_tokens
        await self._throttle.reconcile(estimate, reply.usage.total)
        return reply, latency

    async def _attempt(self, request: ChatRequest) -> ChatReply:
        try:
            with anyio.fail_after(self.spec.timeout_s):
                return await self._model.complete(request)
        except TimeoutError:
            raise ProviderTimeout(self.model_id, f"no reply within {self.spec.timeout_s:g}s") from None
